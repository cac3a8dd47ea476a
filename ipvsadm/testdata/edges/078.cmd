ipvsadm -l -n -- -t
