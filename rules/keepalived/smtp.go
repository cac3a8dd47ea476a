package keepalived

import (
	"net/netip"

	"github.com/lvskit/lvskit/health"
)

// smtpState is what an SMTP_CHECK holds beside its spec: keepalived 2.2.7
// may give it several connections (check_smtp.c, WITH_HOST_ENTRIES).
type smtpState struct {
	// coSet: a connection keyword of the checker's own was stored
	// (connect_ip, connect_port, bindto, bind_port, bind_if, fwmark,
	// connect_timeout); smtp_check_end_handler then keeps the checker's
	// own connection and makes each host a checker of its own.
	coSet bool
	hosts []*smtpHost // in file order
	host  *smtpHost   // the host block being read
	// endTO is the timeout (µs) smtp_check_end_handler fixed from the
	// real and virtual servers read so far; -1 when it fixed none.
	endTO int64
}

// smtpHost is a host block (check_smtp.c smtp_host_handler): a
// connection of its own, to the real server's address and port unless it
// says otherwise. Its connection keywords are read into co as a
// checker's are (connIP, spec.Port, mark, connTO); co.connTO -1 is none
// given, which keepalived leaves at 0.
type smtpHost struct {
	at *stmt
	co chkState
}

// smtpCO wraps a connection keyword of SMTP_CHECK itself: a value
// keepalived stores (check_api.c co_*_handler) marks the checker's own
// connection as set.
func smtpCO(k *keyword) *keyword {
	run := k.run
	return &keyword{args: k.args, run: func(c *conv, s *stmt) {
		run(c, s)
		k := c.chk
		if k == nil || k.smtp == nil {
			return
		}
		v := arg(s, 1)
		stored := false
		switch s.Words[0] {
		case "connect_ip":
			stored = k.connIPAt == s
		case "fwmark":
			stored = k.markAt == s && k.mark != 0
		case "bindto":
			_, err := netip.ParseAddr(v)
			stored = err == nil
		case "connect_port", "bind_port":
			_, how := readUnsigned(v, 1, 65535, true)
			stored = how != numBad
		case "bind_if":
			stored = v != "" && len(v) < 16 // IFNAMSIZ
		case "connect_timeout":
			_, how := readTimer(v, 1, 0, true)
			stored = how != numBad
		}
		k.smtp.coSet = k.smtp.coSet || stored
	}}
}

// heloName is check_smtp.c smtp_helo_name_handler: one word.
func heloName(c *conv, k *chkState, s *stmt) {
	if len(s.Words) < 2 {
		c.notice(s, "helo_name without a name: keepalived ignores it")
		return
	}
	if err := (health.Spec{Type: "smtp", Helo: s.Words[1]}).Validate(); err != nil {
		c.lossy(s, "helo_name: %v: lvsctl sends %s instead", err, health.DefaultHelo)
		return
	}
	k.spec.Helo = s.Words[1]
	if k.spec.Helo == health.DefaultHelo {
		k.spec.Helo = "" // the default, written as such
	}
}

// startHost is check_smtp.c smtp_host_handler.
func startHost(c *conv, k *chkState, s *stmt) {
	if k.smtp != nil {
		k.smtp.host = &smtpHost{at: s, co: chkState{connTO: -1}}
	}
}

// endHost is check_smtp.c smtp_host_end_handler: the host joins the
// checker's list.
func endHost(c *conv) {
	if k := c.chk; k != nil && k.smtp != nil && k.smtp.host != nil {
		k.smtp.hosts = append(k.smtp.hosts, k.smtp.host)
		k.smtp.host = nil
	}
}

// hostKW runs a checker's connection keyword handler on the host block
// being read.
func hostKW(f func(c *conv, k *chkState, s *stmt)) func(c *conv, s *stmt) {
	return func(c *conv, s *stmt) {
		if k := c.chk; k != nil && k.smtp != nil && k.smtp.host != nil {
			f(c, &k.smtp.host.co, s)
		}
	}
}

// smtpEnd is check_smtp.c smtp_check_end_handler. When a connection
// keyword of the checker's own was stored, or there is no host block,
// the checker probes its own connection (the real server's address and
// port unless it says otherwise), with a timeout fixed here from the
// real server's connect_timeout read so far, else the virtual server's.
// Otherwise the first host's connection becomes the checker's. Every
// other host becomes a checker of its own, and keepalived serves the
// real server only while all its checkers pass. A host's timeout is its
// own connect_timeout, else 0: smtp_host_handler allocates its
// connection zeroed and only an unset (UINT_MAX) timeout gets a default.
// With 0, each wait of the conversation (lib/scheduler.c) has a timer
// already expired: it fails unless the socket is ready at once.
func (c *conv) smtpEnd(k *chkState) {
	st, r := k.smtp, c.rs
	if r == nil {
		return
	}
	c.note(k.at, "SMTP_CHECK: keepalived gives each step of the conversation connect_timeout, and fails a reply of several lines (220-...) "+
		"as it reads only the first (check_smtp.c smtp_get_status); lvsctl's timeout covers the whole conversation, and it reads whole replies")
	extra := st.hosts
	if !st.coSet && len(st.hosts) > 0 {
		// The first host's connection is the checker's: probeWay then
		// reads its connect_ip and fwmark as a checker's own.
		h := st.hosts[0]
		extra = st.hosts[1:]
		k.spec.Port = h.co.spec.Port
		k.connIP, k.connIPAt, k.mark, k.markAt = h.co.connIP, h.co.connIPAt, h.co.mark, h.co.markAt
		if h.co.connTO < 0 {
			c.lossy(h.at, "host without connect_timeout: keepalived 2.2.7 gives its connection a timeout of 0, "+
				"so each step of the conversation must find its reply there at once: real server %s fails, or passes by chance and flaps; "+
				"lvsctl probes with the real server's or virtual server's connect_timeout", r.addr)
		} else {
			k.connTO = h.co.connTO
		}
	} else if k.connTO < 0 {
		k.connTO = int64(firstSet(r.connTO, c.vs.connTO))
		st.endTO = k.connTO
	}
	// where is a connection's address and port, and its mark.
	where := func(co *chkState) (netip.AddrPort, uint32) {
		a, p := co.connIP, uint16(co.spec.Port)
		if !a.IsValid() {
			a = r.addr
		}
		if p == 0 {
			p = r.port
		}
		return netip.AddrPortFrom(a, p), co.mark
	}
	main, mainMark := where(k)
	for _, h := range extra {
		ap, mark := where(&h.co)
		switch {
		case ap != main || mark != mainMark:
			c.lossy(h.at, "host %s: keepalived checks it too, with a checker of its own, and serves real server %s only while every checker passes; "+
				"lvsctl converts one check per SMTP_CHECK, of %s", ap, r.addr, main)
		case h.co.connTO < 0:
			c.lossy(h.at, "host without connect_timeout: keepalived 2.2.7 gives its connection a timeout of 0, "+
				"so each step of the conversation must find its reply there at once: real server %s fails, or passes by chance and flaps; "+
				"lvsctl checks %s once, with the check's timeout", r.addr, ap)
		default:
			c.note(h.at, "host %s: what the check probes: keepalived runs a second checker of it, which lvsctl's one check stands for", ap)
		}
	}
}
