ipvsadm --start-daemon master --mcast-group 224.0.0.1.; echo rc=$?
