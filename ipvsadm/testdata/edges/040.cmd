ipvsadm ---
