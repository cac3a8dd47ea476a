ipvsadm -S -n --sort
