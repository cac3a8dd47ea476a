ipvsadm -A -t VIP1:80; ipvsadm -Ln
