printf '%s\n' '-A -t 2.2.2.2:80' '-L -n' '-A -t 2.2.2.3:80 -b ,' | ipvsadm -R 2>&1 | cat; echo rc=$?
