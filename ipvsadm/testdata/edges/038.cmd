ipvsadm -Ltn
