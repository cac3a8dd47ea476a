ipvsadm -d -t 10.0.0.1:80 -r 192.168.10.1:81; echo rc=$?; ipvsadm -d -t 10.0.0.1:80 -r rs1.example.com:http; echo rc=$?; ipvsadm -Ln
