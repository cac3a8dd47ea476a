printf '%s\n' '-L -t 9.9.9.9:80' '-A -t 2.2.2.2:80' | ipvsadm -R; echo rc=$?; ipvsadm -Ln
