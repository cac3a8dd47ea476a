ipvsadm -L -x5
