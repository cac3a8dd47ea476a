ipvsadm --stop-daemon master --mcast-interface=lo
