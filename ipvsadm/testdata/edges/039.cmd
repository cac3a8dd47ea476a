ipvsadm -L ---
