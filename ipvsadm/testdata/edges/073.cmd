printf '%s\n' '-L -n' '-A -t 2.2.2.2:80 --bogus' '-A -t 2.2.2.2:80' '-A -t 2.2.2.2:80' | ipvsadm -R 2>&1 | cat
