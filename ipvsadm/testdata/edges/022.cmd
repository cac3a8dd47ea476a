ipvsadm -Lv
