POSIXLY_CORRECT=1 ipvsadm -L foo --bogus
