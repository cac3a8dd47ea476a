printf '%s\n' '-A -t 2.2.2.2:80' '-L -n' '-A -t 2.2.2.2:80 -b ,' | ipvsadm -R; echo rc=$?
