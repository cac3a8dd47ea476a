ipvsadm -L --sort --sort -n
