ipvsadm -Ln=5
