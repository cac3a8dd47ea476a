ipvsadm -L -6 -f 1
