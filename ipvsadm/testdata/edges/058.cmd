ipvsadm -a -t 10.0.0.1:80 -r rs1 -w ' +7' -m; ipvsadm -Ln
