ipvsadm -A -t localhost:http -p; ipvsadm -L
