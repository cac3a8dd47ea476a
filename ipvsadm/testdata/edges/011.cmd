ipvsadm -A -t [2001:db8::1]:80 -p -M 4294967360; ipvsadm -Ln
