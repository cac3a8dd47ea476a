ipvsadm -A -t 0x1.2:80; ipvsadm -Ln
