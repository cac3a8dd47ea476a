ipvsadm -A -s 'rr!#:+' -t 1.2.3.4:80 foo; echo rc=$?; ipvsadm -Ln
