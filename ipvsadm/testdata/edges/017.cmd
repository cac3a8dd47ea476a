ipvsadm -A -t 1.2.3.4:80 -s ''; ipvsadm -Ln
