ipvsadm -L -c -t 10.0.0.1:80
