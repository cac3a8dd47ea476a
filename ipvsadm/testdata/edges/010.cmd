ipvsadm -L foo --bogus
