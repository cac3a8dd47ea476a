ipvsadm -A -f 1 -6 -M 64x -p; ipvsadm -Ln
