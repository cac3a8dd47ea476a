ipvsadm -Lc --persistent-conn -n
