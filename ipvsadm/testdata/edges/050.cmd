ipvsadm -a -t 10.0.0.1:80 -r 1.2.3.4:0080 -m; ipvsadm -Ln
