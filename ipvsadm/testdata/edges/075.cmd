printf '%s\n' '-S -n' '-h' | ipvsadm -R | tail -2
