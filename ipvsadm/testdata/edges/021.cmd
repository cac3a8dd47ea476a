ipvsadm -hq | head -2
