ipvsadm foo -L
