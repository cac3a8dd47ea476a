POSIXLY_CORRECT= ipvsadm -L foo --bogus
