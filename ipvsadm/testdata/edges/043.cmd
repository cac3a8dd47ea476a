ipvsadm --zero -t 1.2.3.4:80
