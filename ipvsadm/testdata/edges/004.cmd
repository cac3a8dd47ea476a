ipvsadm -A -t 1.2.3.4:80 -s 'r!#:+' r; echo rc=$?; ipvsadm -Ln
