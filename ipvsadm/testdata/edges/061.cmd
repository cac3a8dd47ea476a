ipvsadm -A -t 1.2.3.4:80 --sched-flags=flag-2 -s mh; ipvsadm -Ln
