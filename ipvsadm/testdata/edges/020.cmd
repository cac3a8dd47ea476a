ipvsadm -Z -t [::]:0; echo rc=$?
