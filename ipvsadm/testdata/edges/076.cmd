printf '%s\n' '-Z -t 9.9.9.9:80' '--set 1 2 3' | ipvsadm -R; echo rc=$?; ipvsadm -L --timeout
