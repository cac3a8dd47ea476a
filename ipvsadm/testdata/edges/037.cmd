ipvsadm -Lxn
