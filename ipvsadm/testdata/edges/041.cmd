ipvsadm -L -=
