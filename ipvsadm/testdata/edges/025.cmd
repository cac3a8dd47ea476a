ipvsadm --set 0 0 0 extra
