ipvsadm -A -u 1.2.3.4:53 -o -b ''; ipvsadm -Ln
