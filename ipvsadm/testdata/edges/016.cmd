ipvsadm --start-daemon=
