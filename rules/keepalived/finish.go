package keepalived

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/rules/desired"
)

// finishVS converts a virtual server once the whole file is read, as
// check_data.c validate_check_config completes it.
func (c *conv) finishVS(v *vsState) {
	first := len(c.res.Document.Services)
	setService := func(i int) {
		for _, n := range v.notices {
			c.res.Notices[n].Service = i
		}
	}
	setService(-1)
	if v.dropped {
		return
	}
	c.vs = v
	defer func() { c.vs = nil }()
	mark := len(c.res.Notices)
	defer func() {
		// notices made here belong to the virtual server too
		for i := mark; i < len(c.res.Notices); i++ {
			v.notices = append(v.notices, i)
		}
		if len(c.res.Document.Services) > first {
			setService(first)
		} else {
			setService(-1)
		}
	}()
	c.vs = nil // notices below are placed by the deferred loop
	at := v.at
	if v.groupName != "" {
		g := c.groups[v.groupName]
		if g == nil {
			c.notice(at, "virtual_server group %s: no virtual_server_group of that name: keepalived ignores this virtual server", v.groupName)
			return
		}
		v.keys = g.keys
		if v.gran != "" {
			// ipvswrapper.c ipvs_group_range_cmd and the fwmark loop of
			// ipvs_group_cmd set the full mask for a group's services.
			c.notice(v.granAt, "persistence_granularity %s: keepalived applies no mask to the services of a virtual_server group", v.gran)
			v.gran = ""
		}
	}
	if len(v.reals) == 0 {
		c.notice(at, "virtual_server %s: no real servers: keepalived leaves it out of the table, and so does the conversion", strings.Join(at.Words[1:], " "))
		return
	}
	js := desired.JSONService{Protocol: v.protocol, Scheduler: orDefault(v.sched, "wlc"), PE: v.pe}
	hasAddr := false
	for _, k := range v.keys {
		hasAddr = hasAddr || k.fwmark == 0
	}
	if js.Protocol == "" && hasAddr {
		c.note(at, "virtual_server %s: no protocol: keepalived's default is UDP", strings.Join(at.Words[1:], " "))
		js.Protocol = "udp"
	}
	if v.ops != nil {
		if hasAddr && js.Protocol != "udp" {
			c.notice(v.ops, "ops: one-packet scheduling is for UDP; keepalived drops it for %s", strings.ToUpper(js.Protocol))
		} else {
			js.OnePacket = true
		}
	}
	// The bits' names depend on the scheduler the service ends with.
	names := [3]string{"flag-1", "flag-2", "flag-3"}
	switch js.Scheduler {
	case "sh":
		names = [3]string{"sh-fallback", "sh-port", "flag-3"}
	case "mh":
		names = [3]string{"mh-fallback", "mh-port", "flag-3"}
	}
	for i, on := range v.flags {
		if on {
			js.SchedulerFlags = append(js.SchedulerFlags, names[i])
		}
	}
	pto := v.pto
	zeroPort := false
	for _, k := range v.keys {
		zeroPort = zeroPort || (k.fwmark == 0 && k.port == 0)
	}
	if pto == 0 && zeroPort {
		c.note(at, "virtual_server %s: port 0: keepalived makes the service persistent (360 s)", strings.Join(at.Words[1:], " "))
		pto = persistDefault
	}

	// Real servers: duplicates dropped, defaults from the virtual server.
	if v.method == "" {
		v.method = "masq"
	}
	var dests []desired.JSONDestination
	seen := map[netip.AddrPort]bool{}
	weightSum := uint64(0)
	for _, r := range v.reals {
		key := netip.AddrPortFrom(r.addr, r.port)
		if seen[key] {
			c.notice(r.at, "real_server %s: a duplicate: keepalived drops the second", key)
			continue
		}
		seen[key] = true
		d, ok := c.destination(v, r)
		if !ok {
			continue
		}
		weightSum += uint64(d.Weight)
		dests = append(dests, d)
	}
	if len(dests) == 0 {
		return
	}
	js.Destinations = dests
	c.sorryAndQuorum(v, &js, weightSum)
	if js.WhenAllDown == "" && anyChecked(js.Destinations) {
		// keepalived takes every failed server out; lvsctl's default
		// (keep) would keep the last ones in.
		js.WhenAllDown = desired.Zero
	}
	hoistCheck(&js)

	for _, k := range v.keys {
		s := js
		s.SchedulerFlags = append([]string(nil), js.SchedulerFlags...)
		s.Destinations = append([]desired.JSONDestination(nil), js.Destinations...)
		if k.fwmark != 0 {
			s.FWMark = k.fwmark
			s.Protocol = ""
			s.Family = orDefault(k.family, v.family)
			if s.Family == "" {
				s.Family = "inet"
			}
			for i := range s.Destinations {
				if s.Destinations[i].Method != "masq" {
					s.Destinations[i].Port = 0
				}
			}
		} else {
			s.Address = k.addr.String()
			port := k.port
			s.Port = &port
			s.Family = familyOf(k.addr)
			for i := range s.Destinations {
				if d := &s.Destinations[i]; d.Port == 0 || d.Method != "masq" {
					d.Port = k.port // keepalived (and the kernel) use the service's port
				}
			}
		}
		if pto != 0 {
			p := desired.JSONPersistence{Timeout: pto, Netmask: v.gran}
			if p.Netmask == "" {
				p.Netmask = "255.255.255.255"
				if s.Family == "inet6" {
					p.Netmask = "128"
				}
			}
			s.Persistence = &p
		}
		if bad := c.familyMismatch(&s, at); bad {
			continue
		}
		c.res.Document.Services = append(c.res.Document.Services, s)
		c.res.Sources = append(c.res.Sources, at)
	}
}

// familyMismatch reports a group's member of the other family than its
// real servers: lvsctl cannot serve it.
func (c *conv) familyMismatch(s *desired.JSONService, at *stmt) bool {
	for _, d := range s.Destinations {
		a, _ := netip.ParseAddr(d.Address)
		if (s.Family == "inet6") != a.Is6() && d.Method != "tunnel" {
			c.refuse(at, "virtual_server: real server %s is not of the service's family %s", d.Address, s.Family)
			return true
		}
	}
	return false
}

// destination completes a real server as validate_check_config does and
// converts its checks.
func (c *conv) destination(v *vsState, r *rsState) (desired.JSONDestination, bool) {
	method, tun := r.method, r.tun
	if method == "" {
		method, tun = v.method, v.tun
	}
	w := r.weight
	if w < 0 {
		w = v.weight
	}
	d := desired.JSONDestination{Address: r.addr.String(), Port: r.port, Method: method, Tunnel: tun, Weight: w, UpperThreshold: r.uthr, LowerThreshold: r.lthr}
	if len(v.keys) == 1 && v.keys[0].fwmark == 0 && method != "masq" && r.port != 0 && r.port != v.keys[0].port {
		c.notice(r.at, "real_server %s %d: keepalived uses the virtual server's port %d for a %s real server", r.addr, r.port, v.keys[0].port, methodName(method))
	}
	if v.fwmark && method != "masq" && r.port != 0 {
		c.notice(r.at, "real_server %s %d: keepalived clears the port of a %s real server of a fwmark service", r.addr, r.port, methodName(method))
	}
	inhibit := v.inhibit
	if r.inhibit >= 0 {
		inhibit = r.inhibit == 1
	}
	var checks []*chkState
	for _, k := range r.checks {
		if !k.dropped {
			checks = append(checks, k)
		}
	}
	// keepalived serves a real server while every one of its checkers
	// passes (check_api.c: num_failed_checkers): lvsctl's checks, in the
	// checkers' order, all of which must pass.
	var specs []health.Spec
	for _, k := range checks {
		if spec, ok := c.checkSpec(v, r, k, method); ok {
			specs = append(specs, *spec)
		}
	}
	switch {
	case len(specs) == 1:
		d.Check = &specs[0]
	case len(specs) > 1:
		d.Checks = specs
	}
	if len(checks) > 0 && !inhibit {
		c.note(r.at, "real server %s: no inhibit_on_failure: keepalived deletes a failed server, lvsctl sets its weight to 0 (its connections finish)", d.Address)
	}
	return d, true
}

// checkSpec completes a check's timing as validate_check_config does:
// each of retry, delay_loop and connect_timeout comes from the checker,
// else the real server, else the virtual server, else the default (retry:
// 1; 3 for DNS_CHECK, 0 for MISC_CHECK). An SMTP_CHECK's timeout was
// fixed where its block ended (smtpEnd).
//
// keepalived's retry N means N more attempts after a failed one before
// the server is taken out: fall = retry + 1. One success brings a server
// back: rise 1.
func (c *conv) checkSpec(v *vsState, r *rsState, k *chkState, method string) (*health.Spec, bool) {
	s := k.spec
	s.Rise = 1
	retry := k.retry
	if retry < 0 {
		retry = r.retry
	}
	if retry < 0 {
		retry = v.retry
	}
	if retry < 0 {
		retry = 1
		switch k.kind {
		case "DNS_CHECK":
			retry = 3 // check_dns.h DNS_DEFAULT_RETRY
		case "MISC_CHECK":
			retry = 0 // check_misc.c misc_check_handler
		}
	}
	if retry > 1000 {
		c.notice(k.at, "retry %d: lvsctl counts at most 1001 failures in a row", retry)
		retry = 1000
	}
	s.Fall = int(retry) + 1
	delay := firstSet(k.delayLoop, r.delayLoop, v.delayLoop)
	to := firstSet(k.connTO, r.connTO, v.connTO)
	if k.smtp != nil && k.smtp.endTO >= 0 {
		if later := firstSet(r.connTO, v.connTO); later != uint64(k.smtp.endTO) {
			c.notice(k.at, "SMTP_CHECK without connect_timeout: keepalived fixes its timeout where the block ends (check_smtp.c smtp_check_end_handler), "+
				"from the connect_timeout read before it: %s, not the %s given after it", micros(uint64(k.smtp.endTO)), micros(later))
		}
	}
	if k.kind == "MISC_CHECK" {
		to = firstSet(k.miscTO, r.connTO, v.connTO)
	}
	iv, tv := microsDuration(delay), microsDuration(to)
	if iv < health.MinInterval {
		c.note(k.at, "delay_loop %s: lvsctl probes at most every %s (timing only)", iv, health.MinInterval)
		iv = health.MinInterval
	}
	if tv < time.Millisecond {
		c.note(k.at, "connect_timeout %s: lvsctl waits at least 1ms (timing only)", tv)
		tv = time.Millisecond
	}
	if tv >= iv {
		// keepalived waits delay_loop after a probe ends; lvsctl's interval
		// runs from start to start and must exceed the timeout.
		c.note(k.at, "connect_timeout %s is not below delay_loop %s: the interval becomes %s (keepalived waits delay_loop after each probe ends)", tv, iv, iv+tv)
		iv += tv
	}
	s.Interval = micros(uint64(iv / time.Microsecond))
	s.Timeout = micros(uint64(tv / time.Microsecond))
	if s.Type == "http" || s.Type == "https" {
		host := orDefault(k.vhost, orDefault(r.vhost, v.vhost))
		s.Host = host
		for i, u := range k.urls {
			expect := "200-299" // check_http.c url_check: HTTP_DEFAULT_STATUS_CODE_MIN..MAX
			if len(u.codes) > 0 {
				expect = strings.Join(u.codes, ",")
			}
			// One Host header for all: the first url's virtualhost.
			uh := orDefault(u.vhost, host)
			if i == 0 {
				s.Host = uh
			} else if uh != s.Host {
				c.lossy(u.at, "url %s: virtualhost %q: lvsctl sends one Host header per check, the first url's (%q)", u.path, uh, s.Host)
			}
			su := health.URL{Path: u.path, Expect: expect}
			if u.digest != "" {
				su.Digest = []string{u.digest}
			}
			s.URLs = append(s.URLs, su)
		}
		if len(s.URLs) == 1 && s.URLs[0].Digest == nil {
			// One url without a digest: the plain form.
			s.Path, s.Expect, s.URLs = s.URLs[0].Path, s.URLs[0].Expect, nil
		}
		if len(s.URLs) > 1 {
			c.note(k.urls[1].at, "url: keepalived requests one url per delay_loop, in turn; lvsctl requests them all at each probe, within connect_timeout (timing only)")
		}
	}
	if s.Type == "udp" && !k.reply {
		c.lossy(k.at, "UDP_CHECK without require_reply passes when no ICMP error comes back; lvsctl's udp check needs a reply")
	}
	if s.Type == "exec" && s.User == "" {
		c.note(k.at, "MISC_CHECK without user: keepalived runs it as keepalived_script (or root), lvsctl as nobody")
	}
	if r.port == 0 && s.Port == 0 && s.Type != "exec" && s.Type != "ping" {
		// keepalived probes port 0, which fails; lvsctl would probe the
		// service's port.
		c.lossy(k.at, "%s of real server %s without a port or connect_port: keepalived probes port 0 and takes the server out; lvsctl probes the service's port", k.kind, r.addr)
	}
	switch s.Type {
	case "exec":
	case "ping":
		c.pingWay(r, k)
	default:
		c.probeWay(v, r, k, method, &s)
	}
	return &s, true
}

// probeWay sets how s travels, from where keepalived's checker connects:
// check_api.c queue_checker starts from the real server's address and
// port as written, co_ip_handler and co_port_handler replace them, and
// co_fwmark_handler has layer4.c mark the probe's socket (SO_MARK).
//
//   - The real server's own address: via direct. A mark on it changes
//     only what the director's own rules (routing, firewall, an IPVS
//     fwmark service) do with the probe, which lvsctl cannot see: lossy.
//   - An address of the virtual server with a mark: the mark steers the
//     probe through the director's table to this real server, which is
//     via vip, with lvsctl's own mark service. Exact when the probe
//     reaches the real server at the port it serves the service on.
//   - An address of the virtual server without a mark: IPVS sends the
//     probe to whichever real server it schedules, whose answer stands
//     for this one; via vip probes this one alone: lossy.
//   - Another address: not expressible; the real server is probed.
func (c *conv) probeWay(v *vsState, r *rsState, k *chkState, method string, s *health.Spec) {
	if method != "masq" {
		s.Via = "direct"
	}
	port := uint16(s.Port) // connect_port, else the real server's as written
	if port == 0 {
		port = r.port
	}
	ip := k.connIP
	if !ip.IsValid() || ip == r.addr {
		if ip.IsValid() {
			c.note(k.connIPAt, "connect_ip %s: the real server's own address, which lvsctl probes anyway", ip)
		}
		if k.mark != 0 {
			c.lossy(k.markAt, "fwmark %d: keepalived marks its probe of the real server's own address, which changes only what the director's own rules (policy routing, firewall, an IPVS fwmark service) do with it; lvsctl's probe carries no mark", k.mark)
		}
		return
	}
	var matched []vsKey
	addrs, marks := 0, 0
	for _, key := range v.keys {
		switch {
		case key.fwmark != 0:
			marks++
		case key.addr == ip:
			matched = append(matched, key)
			fallthrough
		default:
			addrs++
		}
	}
	if len(matched) == 0 {
		c.lossy(k.connIPAt, "connect_ip %s: neither the real server's address nor one of the virtual server's: not expressible in an lvsctl check, which probes the real server directly or through the virtual address; ignored", ip)
		return
	}
	s.Via, s.Port = "vip", 0
	if k.mark == 0 {
		c.lossy(k.connIPAt, "connect_ip %s without fwmark: keepalived's probe of the virtual address goes to whichever real server IPVS schedules, and that one's answer stands for %s; lvsctl's via vip probes through the virtual address to %s alone", ip, r.addr, r.addr)
		return
	}
	// What the mark's own service does with the probe is the admin's;
	// lvsctl's goes to the real server at its port in the service (the
	// service's own for direct routing and tunnels).
	want := matched[0].port
	if method == "masq" && r.port != 0 {
		want = r.port
	}
	if port != 0 && port != want {
		c.lossy(k.connIPAt, "connect_ip %s, port %d: keepalived probes that port of the virtual address; lvsctl's via vip probes the service's port and reaches real server %s at port %d", ip, port, r.addr, want)
	}
	if marks > 0 {
		c.lossy(k.connIPAt, "connect_ip %s: lvsctl probes the real servers of virtual_server_group %s's fwmark entries directly, not through %s", ip, v.groupName, ip)
	}
	steer := "an IPVS fwmark service or a routing rule"
	if at := c.markService(k.mark); at != nil {
		steer = fmt.Sprintf("%s at %s:%d", strings.Join(at.Words[:min(3, len(at.Words))], " "), filepath.Base(at.File), at.Line)
	}
	each := ""
	if addrs > 1 {
		each = "; each service of the group is probed through its own address and port"
	}
	c.note(k.connIPAt, "connect_ip %s with fwmark %d (line %d): keepalived's probe goes through the director's table to this real server, steered by the mark; lvsctl checks via vip, with a mark service of its own per real server, so the check needs neither fwmark %d nor what steers it (%s)%s",
		ip, k.mark, k.markAt.Line, k.mark, steer, each)
}

// markService is the virtual_server of firewall mark m, or nil.
func (c *conv) markService(m uint32) *stmt {
	for _, v := range c.vss {
		keys := v.keys
		if g := c.groups[v.groupName]; v.groupName != "" && g != nil {
			keys = g.keys
		}
		for _, key := range keys {
			if !v.dropped && key.fwmark == m {
				return v.at
			}
		}
	}
	return nil
}

// firstSet is the first of vs that is set (not negative).
func firstSet(vs ...int64) uint64 {
	for _, v := range vs {
		if v >= 0 {
			return uint64(v)
		}
	}
	return 0
}

// sorryAndQuorum sets what happens when every real server is down.
func (c *conv) sorryAndQuorum(v *vsState, js *desired.JSONService, weightSum uint64) {
	quorum, hyst := v.quorum, v.hyst
	if quorum > weightSum {
		quorum = weightSum // check_data.c validate_check_config
	}
	if quorum > 0 && hyst >= quorum {
		hyst = quorum - 1
	}
	if v.sorry == nil {
		if v.sorryInh != nil {
			c.notice(v.sorryInh, "sorry_server_inhibit: keepalived ignores it without a sorry_server before it")
		}
		if v.quorumAt != nil {
			c.note(v.quorumAt, "quorum: ignored: without a sorry_server it only runs quorum commands, which lvsctl does not")
		}
		if v.hystAt != nil {
			c.note(v.hystAt, "hysteresis: ignored: it matters only with a quorum above 1 and a sorry_server")
		}
		return
	}
	s := v.sorry
	if v.sorry.method == "" {
		s.method = v.method
	}
	port := s.port
	if v.keys[0].fwmark == 0 && (port == 0 || s.method != "masq") {
		port = v.keys[0].port
	}
	js.WhenAllDown = desired.Sorry
	js.SorryServer = netip.AddrPortFrom(s.addr, port).String()
	if v.sorryInh != nil {
		c.lossy(v.sorryInh, "sorry_server_inhibit: keepalived keeps the sorry server in the table at weight 0; lvsctl adds it only while every real server is down")
	}
	if s.method != js.Destinations[0].Method {
		c.lossy(s.at, "sorry_server: keepalived forwards to it by %s, lvsctl as to the first real server (%s)", methodName(s.method), methodName(js.Destinations[0].Method))
	}
	if quorum > 1 {
		c.lossy(v.quorumAt, "quorum %d: keepalived sends to the sorry server once the weights of the real servers up add to less than %d (less %d of hysteresis); lvsctl only once all are down", quorum, quorum, hyst)
	} else if v.hystAt != nil {
		c.note(v.hystAt, "hysteresis: ignored: it matters only with a quorum above 1 and a sorry_server")
	}
}

func anyChecked(ds []desired.JSONDestination) bool {
	for _, d := range ds {
		if d.Check != nil || d.Checks != nil {
			return true
		}
	}
	return false
}

// hoistCheck moves the check, or checks, that every real server has into
// the service.
func hoistCheck(js *desired.JSONService) {
	if len(js.Destinations) == 0 {
		return
	}
	first := &js.Destinations[0]
	if first.Check == nil && first.Checks == nil {
		return
	}
	for _, d := range js.Destinations[1:] {
		if !reflect.DeepEqual(d.Check, first.Check) || !reflect.DeepEqual(d.Checks, first.Checks) {
			return
		}
	}
	js.Check, js.Checks = first.Check, first.Checks
	for i := range js.Destinations {
		js.Destinations[i].Check, js.Destinations[i].Checks = nil, nil
	}
}
