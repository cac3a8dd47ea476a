ipvsadm -L -t=
