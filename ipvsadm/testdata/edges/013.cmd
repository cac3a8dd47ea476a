ipvsadm -A -t 1.2.3.4:80 -s rr -b flag-1,flag-1,flag-1,flag-1,flag-1,flag-1,flag-1,flag-1,flag-1,flag-1,flag-1,flag-1,flag-1,flag-1,flag-1,flag-1,flag-1,flag-1,flag-1,flag-1
