ipvsadm -a -t 10.0.0.1:80 -r rs6 -m
