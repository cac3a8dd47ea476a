ipvsadm -L --daemon --syncid 3 -n
