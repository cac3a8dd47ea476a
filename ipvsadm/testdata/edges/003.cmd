ipvsadm -L --numeric=
