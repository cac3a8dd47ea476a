ipvsadm --start-daemon master --mcast-group 239.1.1.1 --mcast-interface lo --sync-maxlen 100; ipvsadm -L --daemon; ipvsadm --stop-daemon master
