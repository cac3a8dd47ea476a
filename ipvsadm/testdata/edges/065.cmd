ipvsadm --start-daemon master --mcast-group ff02::1%lo
