ipvsadm -A -t 1.2.3.4:80 -s rr -p 10 -M 0.0.0.0 -o
