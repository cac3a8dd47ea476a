ipvsadm -R < /dev/null extra
