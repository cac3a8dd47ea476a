ipvsadm -a -t 10.0.0.1:80 -r 1.1.1.1 -i --tun-type gre --tun-nocsum --tun-csum
