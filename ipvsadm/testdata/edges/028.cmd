ipvsadm -A -f 1 -6 -6 -p; ipvsadm -Ln
