package keepalived

import (
	"fmt"
	"net/netip"
	"strings"
)

// The keyword tables follow keepalived 2.2.7's: check_parser.c
// init_check_keywords (virtual servers, real servers), check_api.c
// install_checker_common_keywords and each checker's install function
// (check_tcp.c, check_http.c, check_dns.c, check_udp.c, check_misc.c,
// check_ping.c, check_smtp.c, check_file.c). Keepalived looks keywords up
// with strcmp: they are case-sensitive. Each handler reads the values
// keepalived's reads and ignores the rest.

const (
	whyRetryDelay = "timing only: lvsctl probes every interval, retries included"
	whyWarmup     = "timing only: lvsctl spreads the first probes over one interval"
	whyAlpha      = "lvsctl serves a real server new to the table after its first passing check, and takes one the kernel already serves as up"
	whyQuorumCmd  = "lvsctl runs no commands on quorum changes"
	whyNotify     = "lvsctl logs each change and exports it as a metric; it runs no commands"
	whyAlert      = "lvsctl sends no mail"
)

var (
	topLevel   = &level{name: "the top level"}
	vsLevel    = &level{name: "virtual_server"}
	rsLevel    = &level{name: "real_server"}
	urlLevel   = &level{name: "url"}
	checkLevel = map[string]*level{}
)

func ignored(why string, args int) *keyword { return &keyword{ignore: true, why: why, args: args} }

func init() {
	topLevel.kws = map[string]*keyword{
		"virtual_server":       {run: startVS, args: 2, sub: vsLevel, end: endVS},
		"virtual_server_group": {run: startGroup, args: 1, values: groupEntry, end: endGroup},
	}
	for kw, kind := range map[string]string{
		"global_defs": "global settings", "vrrp_instance": "VRRP", "vrrp_sync_group": "VRRP",
		"vrrp_script": "VRRP", "vrrp_track_process": "VRRP", "vrrp_track_file": "VRRP",
		"track_file": "VRRP", "garp_group": "VRRP", "static_ipaddress": "static addresses",
		"static_routes": "static routes", "static_rules": "static rules", "bfd_instance": "BFD",
		"linkbeat_interfaces": "link beat", "net_namespace": "network namespace",
		"instance": "instance", "use_symlink_paths": "global settings", "SSL": "SSL client",
		"vrrp_garp_interval": "VRRP", "static_track_group": "static routes",
	} {
		topLevel.kws[kw] = &keyword{skip: kind, args: -1}
	}

	vsTimerKW := func(f func(v *vsState) *int64) *keyword {
		return &keyword{run: vsKW(func(c *conv, v *vsState, s *stmt) { c.timerInto(s, f(v)) }), args: 1}
	}
	vsLevel.kws = map[string]*keyword{
		"ip_family":               {run: vsKW(ipFamily), args: 1},
		"retry":                   {run: vsKW(func(c *conv, v *vsState, s *stmt) { c.retryInto(s, 1, false, &v.retry) }), args: 1},
		"delay_before_retry":      ignored(whyRetryDelay, 1),
		"warmup":                  ignored(whyWarmup, 1),
		"connect_timeout":         vsTimerKW(func(v *vsState) *int64 { return &v.connTO }),
		"delay_loop":              vsTimerKW(func(v *vsState) *int64 { return &v.delayLoop }),
		"inhibit_on_failure":      {run: vsKW(vsInhibit), args: -1},
		"lb_algo":                 {run: vsKW(lbAlgo), args: 1},
		"lvs_sched":               {run: vsKW(lbAlgo), args: 1},
		"lb_kind":                 {run: vsKW(func(c *conv, v *vsState, s *stmt) { c.fwdMethod(s, &v.method, &v.tun) }), args: -1},
		"lvs_method":              {run: vsKW(func(c *conv, v *vsState, s *stmt) { c.fwdMethod(s, &v.method, &v.tun) }), args: -1},
		"persistence_engine":      {run: vsKW(persistenceEngine), args: 1},
		"persistence_timeout":     {run: vsKW(persistenceTimeout), args: 1},
		"persistence_granularity": {run: vsKW(persistenceGranularity), args: 1},
		"protocol":                {run: vsKW(protocol), args: 1},
		"ha_suspend":              ignored("it suspends checks while the director lacks the VIP; lvsctl always checks", 0),
		"smtp_alert":              ignored(whyAlert, 1),
		"virtualhost":             {run: vsKW(func(c *conv, v *vsState, s *stmt) { v.vhost = vhost(c, s, v.vhost) }), args: 1},
		"snmp_name":               ignored("", 1),
		"alpha":                   ignored(whyAlpha, 0),
		"omega":                   ignored(whyQuorumCmd, 0),
		"quorum_up":               ignored(whyQuorumCmd, -1),
		"quorum_down":             ignored(whyQuorumCmd, -1),
		"quorum":                  {run: vsKW(quorum), args: 1},
		"hysteresis":              {run: vsKW(hysteresis), args: 1},
		"weight":                  {run: vsKW(vsWeight), args: 1},
		"sorry_server":            {run: vsKW(sorryServer), args: 2},
		"sorry_server_inhibit":    {run: vsKW(sorryInhibit), args: 0},
		"sorry_server_lvs_method": {run: vsKW(sorryMethod), args: -1},
		"real_server":             {run: startRS, args: 2, sub: rsLevel, end: endRS},
	}
	for _, f := range []string{"hashed", "ops", "flag-1", "flag-2", "flag-3", "sh-port", "sh-fallback", "mh-port", "mh-fallback"} {
		vsLevel.kws[f] = &keyword{run: vsKW(lbFlag), args: 0}
	}

	rsLevel.kws = map[string]*keyword{
		"weight":             {run: rsKW(rsWeight), args: 1},
		"lvs_method":         {run: rsKW(func(c *conv, r *rsState, s *stmt) { c.fwdMethod(s, &r.method, &r.tun) }), args: -1},
		"uthreshold":         {run: rsKW(threshold(func(r *rsState) *uint32 { return &r.uthr })), args: 1},
		"lthreshold":         {run: rsKW(threshold(func(r *rsState) *uint32 { return &r.lthr })), args: 1},
		"inhibit_on_failure": {run: rsKW(rsInhibit), args: 1},
		"notify_up":          ignored(whyNotify, -1),
		"notify_down":        ignored(whyNotify, -1),
		"alpha":              ignored(whyAlpha, 1),
		"retry":              {run: rsKW(func(c *conv, r *rsState, s *stmt) { c.retryInto(s, 1, false, &r.retry) }), args: 1},
		"delay_before_retry": ignored(whyRetryDelay, 1),
		"warmup":             ignored(whyWarmup, 1),
		"connect_timeout":    {run: rsKW(func(c *conv, r *rsState, s *stmt) { c.timerInto(s, &r.connTO) }), args: 1},
		"delay_loop":         {run: rsKW(func(c *conv, r *rsState, s *stmt) { c.timerInto(s, &r.delayLoop) }), args: 1},
		"smtp_alert":         ignored(whyAlert, 1),
		"virtualhost":        {run: rsKW(func(c *conv, r *rsState, s *stmt) { r.vhost = vhost(c, s, r.vhost) }), args: 1},
		"snmp_name":          ignored("", 1),
	}

	// Checkers. common: check_api.c install_checker_common_keywords;
	// MISC_CHECK has no connection keywords.
	common := func(conn bool) map[string]*keyword {
		m := map[string]*keyword{
			"retry":              {run: chkKW(func(c *conv, k *chkState, s *stmt) { c.retryInto(s, 0, true, &k.retry) }), args: 1},
			"delay_before_retry": ignored(whyRetryDelay, 1),
			"warmup":             ignored(whyWarmup, 1),
			"delay_loop":         {run: chkKW(func(c *conv, k *chkState, s *stmt) { c.timerInto(s, &k.delayLoop) }), args: 1},
			"alpha":              ignored(whyAlpha, 1),
			"log_all_failures":   ignored("", 1),
		}
		if conn {
			m["connect_port"] = &keyword{run: chkKW(connectPort), args: 1}
			m["connect_timeout"] = &keyword{run: chkKW(func(c *conv, k *chkState, s *stmt) { c.timerInto(s, &k.connTO) }), args: 1}
			m["connect_ip"] = &keyword{run: chkKW(connectIP), args: 1}
			m["fwmark"] = &keyword{run: chkKW(checkMark), args: 1}
			for _, kw := range []string{"bindto", "bind_port", "bind_if"} {
				m[kw] = &keyword{run: chkKW(notExpressible), args: 1}
			}
		}
		return m
	}
	with := func(m map[string]*keyword, more map[string]*keyword) map[string]*keyword {
		for k, v := range more {
			m[k] = v
		}
		return m
	}
	http := func() map[string]*keyword {
		return with(common(true), map[string]*keyword{
			"nb_get_retry":  {run: chkKW(func(c *conv, k *chkState, s *stmt) { c.retryInto(s, 0, true, &k.retry) }), args: 1},
			"virtualhost":   {run: chkKW(func(c *conv, k *chkState, s *stmt) { k.vhost = vhost(c, s, k.vhost) }), args: 1},
			"http_protocol": {run: chkKW(notExpressible), args: 1},
			"enable_sni":    ignored("lvsctl sends the virtualhost as the TLS server name whenever one is given", 1),
			"fast_recovery": ignored("timing only: lvsctl checks all its URLs every interval", 1),
			"url":           {run: startURL, args: 0, sub: urlLevel, end: endURL},
		})
	}
	checkLevel["TCP_CHECK"] = &level{name: "TCP_CHECK", kws: common(true)}
	checkLevel["HTTP_GET"] = &level{name: "HTTP_GET", kws: http()}
	checkLevel["SSL_GET"] = &level{name: "SSL_GET", kws: http()}
	checkLevel["DNS_CHECK"] = &level{name: "DNS_CHECK", kws: with(common(true), map[string]*keyword{
		"type": {run: chkKW(dnsType), args: 1},
		"name": {run: chkKW(func(c *conv, k *chkState, s *stmt) { k.spec.Query = arg(s, 1) }), args: 1},
	})}
	checkLevel["UDP_CHECK"] = &level{name: "UDP_CHECK", kws: with(common(true), map[string]*keyword{
		"payload":          {run: chkKW(payload), args: -1},
		"require_reply":    {run: chkKW(requireReply), args: -1},
		"min_reply_length": {run: chkKW(notExpressible), args: 1},
		"max_reply_length": {run: chkKW(notExpressible), args: 1},
	})}
	checkLevel["MISC_CHECK"] = &level{name: "MISC_CHECK", kws: with(common(false), map[string]*keyword{
		"misc_path":    {run: chkKW(miscPath), args: -1},
		"misc_timeout": {run: chkKW(miscTimeout), args: 1},
		"misc_dynamic": {run: chkKW(func(c *conv, k *chkState, s *stmt) { k.spec.Dynamic = true }), args: 0},
		"user":         {run: chkKW(miscUser), args: 2},
	})}
	// check_ping.c: the common keywords; the ICMP socket is neither bound
	// nor marked, and has no port.
	ping := common(true)
	ping["connect_port"] = &keyword{run: chkKW(pingIgnores), args: 1}
	for _, kw := range []string{"bindto", "bind_port", "bind_if", "fwmark"} {
		ping[kw] = &keyword{run: chkKW(pingIgnores), args: 1}
	}
	checkLevel["PING_CHECK"] = &level{name: "PING_CHECK", kws: ping}
	// check_smtp.c install_smtp_check_keyword: helo_name, the common
	// keywords, and host blocks, whose connection keywords are the
	// host's and whose others the checker's.
	smtpHost := &level{name: "host", kws: with(common(false), map[string]*keyword{
		"connect_ip":      {run: hostKW(connectIP), args: 1},
		"connect_port":    {run: hostKW(connectPort), args: 1},
		"fwmark":          {run: hostKW(checkMark), args: 1},
		"connect_timeout": {run: hostKW(func(c *conv, k *chkState, s *stmt) { c.timerInto(s, &k.connTO) }), args: 1},
	})}
	for _, kw := range []string{"bindto", "bind_port", "bind_if"} {
		smtpHost.kws[kw] = &keyword{run: chkKW(notExpressible), args: 1}
	}
	smtp := common(true)
	for _, kw := range []string{"connect_ip", "connect_port", "bindto", "bind_port", "bind_if", "fwmark", "connect_timeout"} {
		smtp[kw] = smtpCO(smtp[kw])
	}
	checkLevel["SMTP_CHECK"] = &level{name: "SMTP_CHECK", kws: with(smtp, map[string]*keyword{
		"helo_name": {run: chkKW(heloName), args: 1},
		"host":      {run: chkKW(startHost), args: 0, sub: smtpHost, end: endHost},
	})}
	for _, kind := range []string{"TCP_CHECK", "HTTP_GET", "SSL_GET", "DNS_CHECK", "UDP_CHECK", "MISC_CHECK", "PING_CHECK", "SMTP_CHECK"} {
		rsLevel.kws[kind] = &keyword{run: startCheck, args: 0, sub: checkLevel[kind], end: endCheck}
	}
	// Checkers lvsctl has none of: their block is read for its notices'
	// sake, and the real server is refused (or served unchecked).
	absent := map[string]struct {
		kws map[string]*keyword
		why string
	}{
		// check_file.c, trackers/track_file.c
		// process_update_checker_track_file_status.
		"FILE_CHECK": {map[string]*keyword{"track_file": ignored("", 1), "weight": ignored("", -1)},
			"keepalived watches the file of a track_file block and adds the number in it (times weight) to the real server's weight, " +
				"or takes the server out while it reads a fault; lvsctl has no file check: an exec check that reads the file does it " +
				"(dynamic: true sets the weight from its exit status)"},
		// check_bfd.c: the checker follows a session of keepalived's own
		// BFD process.
		"BFD_CHECK": {map[string]*keyword{"name": ignored("", 1), "alpha": ignored("", 0)},
			"keepalived takes the real server out while the session of the bfd_instance it names, run by keepalived's BFD process, " +
				"is down; lvsctl runs no BFD sessions"},
	}
	for kind, a := range absent {
		kind, why := kind, a.why
		rsLevel.kws[kind] = &keyword{args: 0, sub: &level{name: kind, kws: a.kws}, run: func(c *conv, s *stmt) {
			if c.rs != nil {
				c.lossy(s, "%s: %s; real server %s served unchecked", kind, why, c.rs.addr)
			}
		}}
	}

	urlLevel.kws = map[string]*keyword{
		"path":        {run: urlKW(func(c *conv, u *urlState, s *stmt) { u.path = arg(s, 1) }), args: 1},
		"status_code": {run: urlKW(statusCodes), args: -1},
		"virtualhost": {run: urlKW(func(c *conv, u *urlState, s *stmt) { u.vhost = vhost(c, s, u.vhost) }), args: 1},
		"digest":      {run: urlKW(digest), args: 1},
	}
	for _, kw := range []string{"regex", "regex_no_match", "regex_options", "regex_stack", "regex_min_offset", "regex_max_offset"} {
		urlLevel.kws[kw] = &keyword{run: urlKW(func(c *conv, u *urlState, s *stmt) {
			c.lossy(s, "%s: lvsctl checks a body by its digest only, not by a regex", s.Words[0])
		}), args: -1}
	}
}

// vhost is a virtualhost (check_parser.c vs_virtualhost_handler and the
// real server's, check_http.c virtualhost_handler): a missing name is
// ignored.
func vhost(c *conv, s *stmt, old string) string {
	if len(s.Words) < 2 {
		c.notice(s, "virtualhost without a name: keepalived ignores it")
		return old
	}
	return s.Words[1]
}

// vsInhibit is check_parser.c vs_inhibit_handler: it reads no value, so
// "inhibit_on_failure off" on a virtual server turns it on.
func vsInhibit(c *conv, v *vsState, s *stmt) {
	if len(s.Words) > 1 {
		c.notice(s, "inhibit_on_failure %s: on a virtual server keepalived reads no value and turns it on", strings.Join(s.Words[1:], " "))
	}
	v.inhibit = true
}

// rsInhibit is check_parser.c rs_inhibit_handler: no value or a
// lower-case true/on/yes, false/off/no; another is ignored.
func rsInhibit(c *conv, r *rsState, s *stmt) {
	if len(s.Words) < 2 {
		r.inhibit = 1
		return
	}
	b, ok := trueFalse(s.Words[1])
	if !ok {
		c.notice(s, "inhibit_on_failure %q: keepalived takes true, on, yes, false, off or no (lower case) and ignores this", s.Words[1])
		return
	}
	r.inhibit = 0
	if b {
		r.inhibit = 1
	}
}

// rsWeight is check_parser.c rs_weight_handler: 0 to 2^31-1.
func rsWeight(c *conv, r *rsState, s *stmt) {
	if n, ok := c.unsigned(s, 0, weightMax, fmt.Sprintf("keepalived takes 0 to %d and ignores this", weightMax)); ok {
		r.weight = int64(n)
	}
}

// vsWeight is check_parser.c vs_weight_handler: the weight of the real
// servers that give none, 1 to 2^31-1.
func vsWeight(c *conv, v *vsState, s *stmt) {
	if n, ok := c.unsigned(s, 1, weightMax, fmt.Sprintf("keepalived takes 1 to %d and ignores this", weightMax)); ok {
		v.weight = int64(n)
	}
}

// persistenceEngine is check_parser.c pengine_handler: at most 15
// characters are kept.
func persistenceEngine(c *conv, v *vsState, s *stmt) {
	w := arg(s, 1)
	if len(w) > 15 {
		c.notice(s, "persistence_engine %q: keepalived keeps its first 15 characters", w)
		w = w[:15]
	}
	v.pe = w
}

// quorum is check_parser.c quorum_handler: an invalid value is 1.
func quorum(c *conv, v *vsState, s *stmt) {
	n, how := readUnsigned(arg(s, 1), 1, 1<<32-1, true)
	switch how {
	case numBad:
		c.notice(s, "quorum %q: keepalived sets the quorum to 1", arg(s, 1))
		n = 1
	case numLoose:
		c.notice(s, "quorum %q: keepalived reads %d", arg(s, 1), n)
	}
	v.quorum, v.quorumAt = n, s
}

// hysteresis is check_parser.c hysteresis_handler.
func hysteresis(c *conv, v *vsState, s *stmt) {
	n, how := readUnsigned(arg(s, 1), 0, 1<<32-1, true)
	if how == numBad {
		c.notice(s, "hysteresis %q: keepalived ignores it", arg(s, 1))
		return
	}
	v.hyst, v.hystAt = n, s
}

// sorryInhibit is check_parser.c ssvri_handler: it needs a sorry_server
// before it.
func sorryInhibit(c *conv, v *vsState, s *stmt) {
	if v.sorry == nil {
		c.notice(s, "sorry_server_inhibit before any sorry_server: keepalived ignores it")
		return
	}
	v.sorryInh = s
}

// sorryMethod is check_parser.c ss_forwarding_handler.
func sorryMethod(c *conv, v *vsState, s *stmt) {
	if v.sorry == nil {
		c.notice(s, "sorry_server_lvs_method before any sorry_server: keepalived ignores it")
		return
	}
	c.fwdMethod(s, &v.sorry.method, &v.sorry.tun)
}

// connectPort is check_api.c co_port_handler: 1 to 65535.
func connectPort(c *conv, k *chkState, s *stmt) {
	if n, ok := c.unsigned(s, 1, 65535, "keepalived ignores it"); ok {
		k.spec.Port = int(n)
	}
}

// connectIP is check_api.c co_ip_handler: inet_stosockaddr reads the
// address up to a '-' (else a '/') and keeps the port already set (the
// real server's as written, or connect_port's). Whether lvsctl can probe
// it is decided once the virtual server is read (probeWay).
func connectIP(c *conv, k *chkState, s *stmt) {
	w := arg(s, 1)
	if i := strings.IndexByte(w, '-'); i >= 0 {
		w = w[:i]
	} else if i := strings.IndexByte(w, '/'); i >= 0 {
		w = w[:i]
	}
	a, err := netip.ParseAddr(w)
	if err != nil || a.Zone() != "" {
		notExpressible(c, k, s)
		return
	}
	if w != arg(s, 1) {
		c.notice(s, "connect_ip %q: keepalived reads the address %s", arg(s, 1), w)
	}
	k.connIP, k.connIPAt = a.Unmap(), s
}

// checkMark is check_api.c co_fwmark_handler: the mark layer4.c
// socket_bind_connect and udp_bind_connect set (SO_MARK) on the probe's
// socket; 0 sets none.
func checkMark(c *conv, k *chkState, s *stmt) {
	if n, ok := c.unsigned(s, 0, 1<<32-1, "keepalived ignores it"); ok {
		k.mark, k.markAt = uint32(n), s
	}
}

func notExpressible(c *conv, k *chkState, s *stmt) {
	c.lossy(s, "%s: not expressible in an lvsctl check; ignored", s.Words[0])
}

// dnsTypes are check_dns.c's record types (dns_type_lookup, any case).
var dnsTypes = []string{"A", "NS", "CNAME", "SOA", "MX", "TXT", "AAAA"}

func dnsType(c *conv, k *chkState, s *stmt) {
	w := strings.ToUpper(arg(s, 1))
	for _, t := range dnsTypes {
		if t == w {
			k.spec.Record = w
			return
		}
	}
	c.notice(s, "type %q: not a DNS type keepalived knows: ignored, the query stays %s", arg(s, 1), k.spec.Record)
}

// payload is check_udp.c payload_handler (a hex string).
func payload(c *conv, k *chkState, s *stmt) {
	h, ok := hexString(s.Words[1:])
	if !ok {
		c.notice(s, "payload: not hexadecimal: keepalived ignores it")
		return
	}
	k.spec.Send = "hex:" + h
}

// requireReply is check_udp.c require_reply_handler: without a value any
// reply passes.
func requireReply(c *conv, k *chkState, s *stmt) {
	k.reply = true
	if len(s.Words) < 2 {
		return
	}
	h, ok := hexString(s.Words[1:])
	if !ok {
		c.notice(s, "require_reply: not hexadecimal: keepalived ignores it")
		k.reply = false
		return
	}
	if strings.ContainsAny(h, "xX") {
		c.lossy(s, "require_reply with X (any digit): lvsctl matches the bytes exactly")
		h = strings.NewReplacer("x", "0", "X", "0").Replace(h)
	}
	k.spec.ExpectBytes = "hex:" + h
	c.note(s, "require_reply: keepalived compares the reply from its first byte, lvsctl finds the bytes anywhere in it")
}

func miscPath(c *conv, k *chkState, s *stmt) {
	argv, err := splitCommand(strings.Join(s.Words[1:], " "))
	if err != nil {
		c.refuse(s, "misc_path: %v", err)
		return
	}
	k.spec.Command = argv
}

// miscTimeout is check_misc.c misc_timeout_handler: whole seconds.
func miscTimeout(c *conv, k *chkState, s *stmt) {
	n, how := readUnsigned(arg(s, 1), 0, (1<<32-1)/1_000_000, true)
	switch how {
	case numBad:
		c.notice(s, "misc_timeout %q: keepalived takes whole seconds and ignores this", arg(s, 1))
		return
	case numLoose:
		c.notice(s, "misc_timeout %q: keepalived reads %d s", arg(s, 1), n)
	}
	if n == 0 {
		return
	}
	k.miscTO = int64(n) * 1_000_000
}

func miscUser(c *conv, k *chkState, s *stmt) {
	if len(s.Words) < 2 {
		c.notice(s, "user without a name: keepalived ignores it")
		return
	}
	k.spec.User = s.Words[1]
	if len(s.Words) > 2 {
		c.lossy(s, "user %s %s: lvsctl runs the program with the user's own group", s.Words[1], s.Words[2])
	}
}
