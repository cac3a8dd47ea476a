ipvsadm -e -t 10.0.0.1:80 -r 192.168.10.1 -i --tun-type gue --tun-port 99 --tun-csum; ipvsadm -Ln --tun-info; ipvsadm -e -t 10.0.0.1:80 -r 192.168.10.1; ipvsadm -Ln --tun-info
