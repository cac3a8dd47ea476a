ipvsadm --stop-daemon backup --syncid 300
