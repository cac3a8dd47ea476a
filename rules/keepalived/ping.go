package keepalived

// pingIgnores is a connection keyword check_ping.c has no use for: its
// ICMP socket (icmp_connect_thread) is neither bound nor marked, and an
// echo request has no port.
func pingIgnores(c *conv, k *chkState, s *stmt) {
	if s.Words[0] == "connect_port" {
		c.note(s, "connect_port: a PING_CHECK sends ICMP echo, which has no port: keepalived does not use it")
		return
	}
	c.note(s, "%s: keepalived's PING_CHECK neither binds nor marks its ICMP socket (check_ping.c icmp_connect_thread): it does not use it", s.Words[0])
}

// pingWay is where a PING_CHECK pings: check_ping.c ping_it sends to the
// checker's address, connect_ip or the real server's. lvsctl's ping goes
// to the real server's own address only (IPVS forwards no ICMP echo, so
// no address of the virtual server reaches it).
func (c *conv) pingWay(r *rsState, k *chkState) {
	switch {
	case !k.connIP.IsValid():
	case k.connIP == r.addr:
		c.note(k.connIPAt, "connect_ip %s: the real server's own address, which lvsctl pings anyway", k.connIP)
	default:
		c.lossy(k.connIPAt, "connect_ip %s: keepalived's PING_CHECK pings that address for real server %s; lvsctl pings the real server's own address", k.connIP, r.addr)
	}
}
