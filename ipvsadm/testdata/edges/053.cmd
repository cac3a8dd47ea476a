ipvsadm -A -t vip1.:80; ipvsadm -Ln
