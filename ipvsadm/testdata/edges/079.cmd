ipvsadm -l -c -c
