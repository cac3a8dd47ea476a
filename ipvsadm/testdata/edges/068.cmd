ipvsadm -E -t 10.0.0.1:80 -s wrr -p 30 -M 255.255.0.0 --pe sip; ipvsadm -Ln; ipvsadm -E -t 10.0.0.1:80; ipvsadm -Ln
