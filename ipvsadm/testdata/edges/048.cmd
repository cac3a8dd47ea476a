ipvsadm -A -t '1.2.3.4 junk:80'; ipvsadm -Ln
