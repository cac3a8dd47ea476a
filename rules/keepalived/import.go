package keepalived

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/rules/desired"
)

// Notice is something the conversion reports at the statement that says
// it: a reading of keepalived's worth knowing, something left out, a
// change of behaviour (Lossy) or a refusal (Refused).
type Notice struct {
	File string
	Line int
	// Service is the index in Result.Document.Services of the first
	// service the notice concerns, or -1 for none.
	Service int
	// Lossy is set when the desired state behaves differently from
	// keepalived (Import refuses it unless Options.Lossy).
	Lossy bool
	// Refused is set for what Import refuses: the result is not usable.
	Refused bool
	Msg     string
	seq     int // the statement's place in keepalived's reading
}

func (n Notice) String() string { return (&Error{File: n.File, Line: n.Line, Msg: n.Msg}).Error() }

// Options changes how Import converts.
type Options struct {
	// Lossy turns what the desired state cannot say exactly into notices
	// instead of errors.
	Lossy bool
	// FS reads the files (nil fields: the real file system).
	FS FS
	// ConfigID selects the "@ID" lines, as keepalived's -i does; empty
	// selects none of them (and every "@^ID" line).
	ConfigID string
}

// Result is a converted configuration.
type Result struct {
	// Source is the file name Import was given.
	Source string
	// Document is the desired state, version 2.
	Document desired.Document
	// Sources holds, for each service, the virtual_server statement it
	// comes from.
	Sources []*stmt
	// Notices are in the order keepalived reads the statements they
	// concern, refusals included.
	Notices []Notice
}

// Errors are the refusals of one import, in the order of the statements.
type Errors []*Error

func (e Errors) Error() string {
	var b strings.Builder
	for i, x := range e {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(x.Error())
	}
	return b.String()
}

// Import reads the keepalived configuration in the file name and the files
// it includes, and converts its virtual servers. It reads every statement
// as keepalived 2.2.7's checker does, noticing where keepalived
// reinterprets or ignores what is written. What keepalived does that the
// desired state cannot say exactly is refused unless opt.Lossy; every
// refusal is returned (Errors), with the Result holding every notice.
// Import does not validate the result against the host (an exec check's
// program, a scheduler module): rules/desired.Read does.
func Import(name string, opt Options) (*Result, error) {
	data, err := opt.FS.readFile(name)
	if err != nil {
		return nil, err
	}
	return importData(name, data, opt)
}

// importData is Import of data, the contents of the file name.
func importData(name string, data []byte, opt Options) (*Result, error) {
	stmts, notes, err := parse(name, data, opt.FS, opt.ConfigID)
	if err != nil {
		return nil, err
	}
	c := &conv{opt: opt, res: &Result{Source: name, Document: desired.Document{Version: desired.HealthVersion, Services: []desired.JSONService{}}},
		skippedKind: map[string]bool{}, groups: map[string]*group{}}
	for i := range notes {
		notes[i].Service = -1
	}
	c.res.Notices = notes
	r := &reader{c: c, stmts: stmts}
	r.block(topLevel, nil, 0, false)
	for _, v := range c.vss {
		c.finishVS(v)
	}
	if len(c.res.Document.Services) == 0 {
		c.refuse(&stmt{File: name, seq: len(stmts)}, "no virtual server with real servers: nothing for lvsctl run to keep")
	}
	sort.SliceStable(c.res.Notices, func(i, j int) bool { return c.res.Notices[i].seq < c.res.Notices[j].seq })
	var errs Errors
	for _, n := range c.res.Notices {
		if n.Refused {
			errs = append(errs, &Error{File: n.File, Line: n.Line, Msg: n.Msg})
		}
	}
	if len(errs) > 0 {
		return c.res, errs
	}
	return c.res, nil
}

// conv holds the conversion while the reader walks the file.
type conv struct {
	opt         Options
	res         *Result
	skippedKind map[string]bool
	groups      map[string]*group
	vss         []*vsState // in file order; converted once all is read
	vs          *vsState   // the virtual_server being read
	rs          *rsState
	chk         *chkState
	url         *urlState
	group       *group
}

func (c *conv) add(s *stmt, n Notice) {
	n.File, n.Line, n.Service, n.seq = s.File, s.Line, -1, s.seq
	if c.vs != nil {
		c.vs.notices = append(c.vs.notices, len(c.res.Notices))
	}
	c.res.Notices = append(c.res.Notices, n)
}

// note records something left out that does not change the table.
func (c *conv) note(s *stmt, format string, args ...any) {
	c.add(s, Notice{Msg: fmt.Sprintf(format, args...)})
}

// notice records keepalived's reading of what is written where it differs
// from a plain reading: an unknown keyword, an invalid value, a value it
// takes otherwise, extra words.
func (c *conv) notice(s *stmt, format string, args ...any) {
	c.note(s, format, args...)
}

// lossy records a change of behaviour, or refuses it without Lossy.
func (c *conv) lossy(s *stmt, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !c.opt.Lossy {
		c.refuse(s, "%s (--lossy converts it anyway)", msg)
		return
	}
	c.add(s, Notice{Lossy: true, Msg: msg})
}

// refuse records what lvsctl cannot reproduce: Import fails.
func (c *conv) refuse(s *stmt, format string, args ...any) {
	c.add(s, Notice{Refused: true, Msg: fmt.Sprintf(format, args...)})
}

func (c *conv) skipped(s *stmt, kind string) {
	if !c.skippedKind[kind] {
		c.skippedKind[kind] = true
		c.note(s, "%s: skipped, and any other %s block (%s: not part of the IPVS table)", s.Words[0], kind, kind)
	}
}

// arg is a statement's i-th value; a missing one is "", as
// lib/vector.c strvec_slot gives keepalived.
func arg(s *stmt, i int) string {
	if i < len(s.Words) {
		return s.Words[i]
	}
	return ""
}

// vsKey is one service address of a virtual_server.
type vsKey struct {
	addr   netip.Addr
	port   uint16
	fwmark uint32
	family string // of a group's fwmark, when given
}

type group struct {
	at   *stmt
	keys []vsKey
}

// vsState is a virtual_server as keepalived holds it while reading
// (check_data.c alloc_vs sets the defaults).
type vsState struct {
	at        *stmt
	dropped   bool
	keys      []vsKey
	groupName string
	fwmark    bool
	family    string // "" until known
	protocol  string
	sched     string
	flags     [3]bool // SCHED1..3
	ops       *stmt
	method    string // "" until set
	tun       *desired.JSONTunnel
	pto       uint32
	gran      string // netmask text, "" for none
	granAt    *stmt
	pe        string
	retry     int64 // -1: unset
	delayLoop int64
	connTO    int64
	inhibit   bool
	weight    int64
	vhost     string
	sorry     *rsState
	sorryInh  *stmt
	quorum    uint64
	quorumAt  *stmt
	hyst      uint64
	hystAt    *stmt
	reals     []*rsState
	notices   []int
}

// rsState is a real_server (check_data.c alloc_rs), or the sorry server.
type rsState struct {
	at        *stmt
	addr      netip.Addr
	port      uint16
	method    string
	tun       *desired.JSONTunnel
	weight    int64 // -1: the virtual server's
	uthr      uint32
	lthr      uint32
	inhibit   int // -1: the virtual server's
	retry     int64
	delayLoop int64
	connTO    int64
	vhost     string
	checks    []*chkState
}

// chkState is one checker block.
type chkState struct {
	at        *stmt
	kind      string
	spec      health.Spec
	retry     int64
	delayLoop int64
	connTO    int64
	miscTO    int64
	vhost     string
	urls      []*urlState
	reply     bool
	dropped   bool
	connIP    netip.Addr // connect_ip, unmapped; invalid when not given
	connIPAt  *stmt
	mark      uint32 // fwmark: SO_MARK on the probe's socket
	markAt    *stmt
	smtp      *smtpState // SMTP_CHECK's connections
}

type urlState struct {
	at     *stmt
	path   string
	codes  []string
	vhost  string
	digest string // lower case; "" for none
}

const (
	defaultDelayLoop = 60_000_000 // check_data.h KEEPALIVED_DEFAULT_DELAY, µs
	defaultConnTO    = 5_000_000  // check_data.c alloc_vs connection_to
	persistDefault   = 360        // libipvs.h IPVS_SVC_PERSISTENT_TIMEOUT
	maxPersist       = 86400 * 31 // global_data.h LVS_MAX_TIMEOUT
	weightMax        = 1<<31 - 1  // ip_vs.h IPVS_WEIGHT_LIMIT
)

// startVS is check_parser.c vs_handler / check_data.c alloc_vs: IP [PORT],
// fwmark N or group NAME; an address or mark keepalived cannot read drops
// the whole block.
func startVS(c *conv, s *stmt) {
	v := &vsState{at: s, retry: -1, delayLoop: defaultDelayLoop, connTO: defaultConnTO, weight: 1, quorum: 1}
	c.vs = v
	c.vss = append(c.vss, v)
	p1, p2 := arg(s, 1), arg(s, 2)
	switch p1 {
	case "group":
		v.groupName = p2
	case "fwmark":
		m, how := readUnsigned(p2, 0, 1<<32-1, true)
		if how == numBad {
			c.notice(s, "virtual_server fwmark %q: keepalived skips this virtual server (check_data.c alloc_vs)", p2)
			v.dropped = true
			return
		}
		if how == numLoose {
			c.notice(s, "virtual_server fwmark %q: keepalived reads fwmark %d", p2, m)
		}
		v.fwmark = true
		v.keys = []vsKey{{fwmark: uint32(m)}}
	default:
		a, err := netip.ParseAddr(p1)
		if err != nil || a.Zone() != "" {
			c.notice(s, "virtual_server %q: not an IP address: keepalived skips this virtual server", p1)
			v.dropped = true
			return
		}
		var port uint64
		if strings.Trim(p2, "0") != "" {
			var perr error
			if port, perr = strconv.ParseUint(p2, 10, 16); perr != nil || port == 0 {
				c.notice(s, "virtual_server %s %q: not a port: keepalived skips this virtual server", p1, p2)
				v.dropped = true
				return
			}
		}
		a = a.Unmap()
		v.keys = []vsKey{{addr: a, port: uint16(port)}}
		v.family = familyOf(a)
	}
}

func familyOf(a netip.Addr) string {
	if a.Is6() {
		return "inet6"
	}
	return "inet"
}

// vsKW returns a handler that runs only while the virtual server being
// read is kept.
func vsKW(f func(c *conv, v *vsState, s *stmt)) func(c *conv, s *stmt) {
	return func(c *conv, s *stmt) {
		if c.vs != nil && !c.vs.dropped {
			f(c, c.vs, s)
		}
	}
}

// endVS is check_parser.c vs_end_handler: a fwmark virtual server of no
// family yet takes its servers' (they are all tunnelled then), IPv4 when
// they mix.
func endVS(c *conv) {
	v := c.vs
	c.vs = nil
	if v == nil || v.dropped || v.family != "" || v.groupName != "" {
		return
	}
	fam := ""
	servers := v.reals
	if v.sorry != nil {
		servers = append([]*rsState{v.sorry}, servers...)
	}
	for _, r := range servers {
		switch f := familyOf(r.addr); {
		case fam == "":
			fam = f
		case fam != f:
			v.family = "inet"
			return
		}
	}
	v.family = orDefault(fam, "inet")
}

// schedulers are check_parser.c lvs_schedulers: lb_algo takes no other.
var schedulers = map[string]bool{"rr": true, "wrr": true, "lc": true, "wlc": true, "lblc": true, "sh": true, "mh": true, "dh": true,
	"fo": true, "ovf": true, "lblcr": true, "sed": true, "nq": true, "twos": true}

// lbAlgo is check_parser.c lbalgo_handler: the name is compared
// case-sensitively with keepalived's list; another is ignored.
func lbAlgo(c *conv, v *vsState, s *stmt) {
	w := arg(s, 1)
	if !schedulers[w] {
		c.notice(s, "%s %q: not a scheduler keepalived knows (names are lower case): ignored, the service keeps %s", s.Words[0], w, orDefault(v.sched, "wlc"))
		return
	}
	v.sched = w
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// lbFlag is check_parser.c lbflags_handler: flag-1..3 set a bit whatever
// the scheduler; sh-port and sh-fallback only while the scheduler read so
// far is sh, mh-port and mh-fallback only while it is mh; hashed sets
// nothing; ops is one-packet scheduling.
func lbFlag(c *conv, v *vsState, s *stmt) {
	kw := s.Words[0]
	switch kw {
	case "ops":
		v.ops = s
		return
	case "flag-1", "flag-2", "flag-3":
		v.flags[kw[5]-'1'] = true
		return
	}
	if kw == "hashed" {
		c.notice(s, "hashed: keepalived sets no flag for it")
		return
	}
	family := strings.SplitN(kw, "-", 2)[0] // sh or mh
	switch {
	case v.sched == "sh" && family == "sh", v.sched == "mh" && family == "mh":
		if strings.HasSuffix(kw, "-fallback") {
			v.flags[0] = true
		} else {
			v.flags[1] = true
		}
	case v.sched == "sh" || v.sched == "mh":
		c.notice(s, "%s: not a flag of the %s scheduler: keepalived ignores it", kw, v.sched)
	default:
		c.notice(s, "%s: keepalived takes it only after lb_algo sh (or mh for mh- flags), and the scheduler here is %s: ignored", kw, orDefault(v.sched, "not yet set"))
	}
}

// fwdMethod is check_parser.c svr_forwarding_handler: NAT, DR or TUN,
// case-sensitively; the method is set before the tunnel options are read,
// and a bad option leaves the tunnel as it was.
func (c *conv) fwdMethod(s *stmt, method *string, tun **desired.JSONTunnel) {
	m := map[string]string{"NAT": "masq", "DR": "route", "TUN": "tunnel"}[arg(s, 1)]
	if m == "" {
		hint := ""
		if mm := map[string]string{"NAT": "masq", "DR": "route", "TUN": "tunnel"}[strings.ToUpper(arg(s, 1))]; mm != "" {
			hint = " (keepalived reads only upper case)"
		}
		c.notice(s, "%s %q: not a forwarding method keepalived knows%s: ignored, the method stays %s", s.Words[0], arg(s, 1), hint, methodName(*method))
		return
	}
	*method = m
	typ, port, csum := "ipip", uint64(0), "nocsum"
	for i := 2; i < len(s.Words); i++ {
		w := s.Words[i]
		switch w {
		case "type":
			if i+1 >= len(s.Words) || (s.Words[i+1] != "ipip" && s.Words[i+1] != "gue" && s.Words[i+1] != "gre") {
				c.notice(s, "%s: tunnel type %q unknown: keepalived keeps the method %s and the tunnel as it was", s.Words[0], arg(s, i+1), methodName(m))
				return
			}
			typ = s.Words[i+1]
			i++
		case "port":
			p, how := readUnsigned(arg(s, i+1), 1, 65535, false)
			if how == numBad {
				c.notice(s, "%s: tunnel port %q invalid: keepalived keeps the method %s and the tunnel as it was", s.Words[0], arg(s, i+1), methodName(m))
				return
			}
			port = p
			i++
		case "nocsum", "csum", "remcsum":
			csum = w
		default:
			c.notice(s, "%s: tunnel option %q invalid: keepalived keeps the method %s and the tunnel as it was", s.Words[0], w, methodName(m))
			return
		}
	}
	if (typ == "gue") != (port != 0) || (typ == "ipip" && csum != "nocsum") || (typ == "gre" && csum == "remcsum") {
		c.notice(s, "%s: tunnel options %q do not fit together: keepalived keeps the method %s and the tunnel as it was", s.Words[0], strings.Join(s.Words[2:], " "), methodName(m))
		return
	}
	if typ == "ipip" {
		*tun = nil
		return
	}
	*tun = &desired.JSONTunnel{Type: typ, Port: uint16(port), Checksum: csum}
}

func methodName(m string) string {
	switch m {
	case "route":
		return "DR"
	case "tunnel":
		return "TUN"
	}
	return "NAT"
}

// persistenceTimeout is check_parser.c pto_handler: no value is 360 s;
// otherwise 1 to 31 days, and anything else (0 included) is ignored.
func persistenceTimeout(c *conv, v *vsState, s *stmt) {
	if len(s.Words) < 2 {
		v.pto = persistDefault
		return
	}
	n, how := readUnsigned(s.Words[1], 1, maxPersist, false)
	if how != numOK {
		if v.pto == 0 {
			c.notice(s, "persistence_timeout %q: keepalived takes 1 to %d seconds and ignores this: the service is not persistent", s.Words[1], maxPersist)
		} else {
			c.notice(s, "persistence_timeout %q: keepalived takes 1 to %d seconds and ignores this: the timeout stays %d", s.Words[1], maxPersist, v.pto)
		}
		return
	}
	v.pto = uint32(n)
}

// persistenceGranularity is check_parser.c pgr_handler: the family is the
// virtual server's, else IPv4 when the value has a dot; IPv4 is read as an
// address by getaddrinfo (so "24" is 0.0.0.24), IPv6 as a prefix length 1
// to 128. It makes the service persistent (360 s) when it is not yet.
func persistenceGranularity(c *conv, v *vsState, s *stmt) {
	w := arg(s, 1)
	fam := v.family
	if fam == "" {
		fam = "inet6"
		if strings.Contains(w, ".") {
			fam = "inet"
		}
	}
	if fam == "inet6" {
		n, how := readUnsigned(w, 1, 128, false)
		if how != numOK {
			c.notice(s, "persistence_granularity %q: keepalived takes an IPv6 prefix length of 1 to 128 here and ignores this", w)
			return
		}
		v.gran = strconv.FormatUint(n, 10)
	} else {
		b, ok := inetAton(w)
		if !ok {
			c.notice(s, "persistence_granularity %q: not an IPv4 mask keepalived can read: ignored", w)
			return
		}
		m := netip.AddrFrom4(b).String()
		if m != w {
			c.notice(s, "persistence_granularity %s: keepalived reads it as the mask %s", w, m)
		}
		v.gran = m
	}
	v.granAt = s
	if v.family == "" {
		v.family = fam
	}
	if v.pto == 0 {
		v.pto = persistDefault
	}
}

// protocol is check_parser.c proto_handler: TCP, UDP or SCTP in any case;
// another is ignored.
func protocol(c *conv, v *vsState, s *stmt) {
	p := strings.ToLower(arg(s, 1))
	if p != "tcp" && p != "udp" && p != "sctp" {
		c.notice(s, "protocol %q: keepalived knows TCP, UDP and SCTP and ignores this: the protocol stays %s", arg(s, 1), strings.ToUpper(orDefault(v.protocol, "udp (keepalived's default)")))
		return
	}
	v.protocol = p
}

// ipFamily is check_parser.c ip_family_handler.
func ipFamily(c *conv, v *vsState, s *stmt) {
	w := arg(s, 1)
	if w != "inet" && w != "inet6" {
		c.notice(s, "ip_family %q: keepalived knows inet and inet6 and ignores this", w)
		return
	}
	if v.family != "" && v.family != w {
		c.notice(s, "ip_family %s: the virtual server is already %s: keepalived ignores it", w, v.family)
		return
	}
	v.family = w
}

// unsigned reads the statement's argument as keepalived's
// read_unsigned_func with ignore_error: a loose value is a notice saying
// what keepalived reads; an invalid one a notice ending in bad, and ok
// false.
func (c *conv) unsigned(s *stmt, lo, hi uint64, bad string) (n uint64, ok bool) {
	n, how := readUnsigned(arg(s, 1), lo, hi, true)
	switch how {
	case numBad:
		c.notice(s, "%s %q: %s", s.Words[0], arg(s, 1), bad)
		return 0, false
	case numLoose:
		c.notice(s, "%s %q: keepalived reads %d", s.Words[0], arg(s, 1), n)
	}
	return n, true
}

// timerInto reads one of the timers a virtual server, a real server and a
// checker share (delay_loop, connect_timeout: at least 1 µs) into dst;
// a value keepalived refuses leaves dst as it was.
func (c *conv) timerInto(s *stmt, dst *int64) {
	us, how := readTimer(arg(s, 1), 1, 0, true)
	switch how {
	case numBad:
		c.notice(s, "%s %q: keepalived takes seconds and ignores this", s.Words[0], arg(s, 1))
		return
	case numLoose:
		c.notice(s, "%s %q: keepalived reads %s", s.Words[0], arg(s, 1), micros(us))
	}
	*dst = int64(us)
}

// retryInto reads a virtual or real server's retry (check_parser.c
// vs_retry_handler, rs_retry_handler: 1 or more, so 0 is ignored) or a
// checker's (check_api.c retry_handler, and nb_get_retry of HTTP_GET and
// SSL_GET: 0 or more) into dst.
func (c *conv) retryInto(s *stmt, lo uint64, lenient bool, dst *int64) {
	n, how := readUnsigned(arg(s, 1), lo, 1<<32-1, lenient)
	switch how {
	case numBad:
		c.notice(s, "%s %q: keepalived takes a count from %d and ignores this", s.Words[0], arg(s, 1), lo)
		return
	case numLoose:
		c.notice(s, "%s %q: keepalived reads %d", s.Words[0], arg(s, 1), n)
	}
	*dst = int64(n)
}

// sorryServer is check_data.c alloc_ssvr: a sorry server's method is the
// virtual server's as read so far.
func sorryServer(c *conv, v *vsState, s *stmt) {
	r := c.newServer(v, s, "sorry_server")
	if r != nil {
		if v.sorry != nil {
			c.notice(s, "sorry_server: a second one: keepalived keeps this one")
		}
		v.sorry = r
	}
}

// newServer reads IP [PORT] of a real or sorry server (check_data.c
// alloc_rs, alloc_ssvr): a port of zeros is none.
func (c *conv) newServer(v *vsState, s *stmt, what string) *rsState {
	a, err := netip.ParseAddr(arg(s, 1))
	if err != nil || a.Zone() != "" {
		c.notice(s, "%s %q: not an IP address: keepalived skips this %s", what, arg(s, 1), what)
		return nil
	}
	var port uint64
	if p := arg(s, 2); strings.Trim(p, "0") != "" {
		if port, err = strconv.ParseUint(p, 10, 16); err != nil || port == 0 {
			c.notice(s, "%s %s %q: not a port: keepalived skips this %s", what, arg(s, 1), p, what)
			return nil
		}
	}
	return &rsState{at: s, addr: a.Unmap(), port: uint16(port), method: v.method, tun: v.tun, weight: -1, inhibit: -1, retry: -1, delayLoop: -1, connTO: -1}
}

// startRS is check_parser.c rs_handler: the real server takes the
// virtual server's method as read so far (or, when none is set yet, the
// one it ends with).
func startRS(c *conv, s *stmt) {
	c.rs = nil
	if c.vs == nil || c.vs.dropped {
		return
	}
	c.rs = c.newServer(c.vs, s, "real_server")
}

// endRS is check_parser.c rs_end_handler: a real server of the other
// family than the virtual server is dropped, unless tunnelled.
func endRS(c *conv) {
	r, v := c.rs, c.vs
	c.rs = nil
	if r == nil || v == nil || v.dropped {
		return
	}
	method := r.method
	if method == "" {
		method = v.method
	}
	if method != "tunnel" {
		if v.family == "" {
			v.family = familyOf(r.addr)
		} else if v.family != familyOf(r.addr) {
			c.notice(r.at, "real_server %s: not of the virtual server's family %s: keepalived skips it", r.addr, v.family)
			return
		}
	}
	v.reals = append(v.reals, r)
}

func rsKW(f func(c *conv, r *rsState, s *stmt)) func(c *conv, s *stmt) {
	return func(c *conv, s *stmt) {
		if c.rs != nil {
			f(c, c.rs, s)
		}
	}
}

// threshold is check_parser.c uthreshold_handler and lthreshold_handler.
func threshold(field func(r *rsState) *uint32) func(c *conv, r *rsState, s *stmt) {
	return func(c *conv, r *rsState, s *stmt) {
		if n, ok := c.unsigned(s, 0, 1<<32-1, "keepalived ignores it"); ok {
			*field(r) = uint32(n)
		}
	}
}

// startCheck is a checker keyword (check_api.c queue_checker).
func startCheck(c *conv, s *stmt) {
	c.chk = nil
	if c.rs == nil {
		return
	}
	k := &chkState{at: s, kind: s.Words[0], retry: -1, delayLoop: -1, connTO: -1, miscTO: -1}
	switch k.kind {
	case "TCP_CHECK":
		k.spec.Type = "tcp"
	case "HTTP_GET":
		k.spec.Type = "http"
	case "SSL_GET":
		k.spec.Type = "https"
		k.spec.TLSSkipVerify = true // keepalived does not verify the certificate
	case "DNS_CHECK":
		k.spec.Type = "dns"
		k.spec.Query, k.spec.Record = ".", "SOA" // check_dns.c defaults
	case "UDP_CHECK":
		k.spec.Type = "udp"
	case "MISC_CHECK":
		k.spec.Type = "exec"
	case "PING_CHECK":
		k.spec.Type = "ping"
	case "SMTP_CHECK":
		k.spec.Type = "smtp"
		k.smtp = &smtpState{endTO: -1}
	}
	c.chk = k
	c.rs.checks = append(c.rs.checks, k)
}

func chkKW(f func(c *conv, k *chkState, s *stmt)) func(c *conv, s *stmt) {
	return func(c *conv, s *stmt) {
		if c.chk != nil {
			f(c, c.chk, s)
		}
	}
}

// endCheck drops the checkers keepalived drops at their end: HTTP_GET and
// SSL_GET without a url (check_http.c http_get_check_end), MISC_CHECK
// without misc_path (check_misc.c misc_end_handler); it settles an
// SMTP_CHECK's connections as keepalived does there (smtpEnd).
func endCheck(c *conv) {
	k := c.chk
	c.chk = nil
	if k == nil {
		return
	}
	if k.smtp != nil {
		c.smtpEnd(k)
	}
	switch {
	case (k.spec.Type == "http" || k.spec.Type == "https") && len(k.urls) == 0:
		c.notice(k.at, "%s without a url that has a path: keepalived drops this checker", k.kind)
		k.dropped = true
	case k.spec.Type == "exec" && len(k.spec.Command) == 0:
		c.notice(k.at, "MISC_CHECK without misc_path: keepalived drops this checker")
		k.dropped = true
	}
}

func startURL(c *conv, s *stmt) {
	c.url = nil
	if c.chk != nil {
		c.url = &urlState{at: s}
	}
}

// endURL is check_http.c url_check: a url without a path is dropped.
func endURL(c *conv) {
	u := c.url
	c.url = nil
	if u == nil || c.chk == nil {
		return
	}
	if u.path == "" {
		c.notice(u.at, "url without path: keepalived drops it")
		return
	}
	c.chk.urls = append(c.chk.urls, u)
}

func urlKW(f func(c *conv, u *urlState, s *stmt)) func(c *conv, s *stmt) {
	return func(c *conv, s *stmt) {
		if c.url != nil {
			f(c, c.url, s)
		}
	}
}

// digest is check_http.c digest_handler: a url's first digest counts, and
// a later one is ignored as a duplicate (keepalived compares the body's
// MD5 with that one digest). The value must be 32 characters, which
// strtoul reads two at a time in base 16: a pair may also be a blank, '+'
// or '-' and one hex digit. One keepalived cannot read is ignored.
func digest(c *conv, u *urlState, s *stmt) {
	w := arg(s, 1)
	if u.digest != "" {
		c.notice(s, "digest: a second one for this url: keepalived keeps the first")
		return
	}
	h, ok := md5Pairs(w)
	if !ok {
		c.notice(s, "digest %q: not 32 hex digits: keepalived ignores it", w)
		return
	}
	if h != strings.ToLower(w) {
		c.notice(s, "digest %q: keepalived reads it as %s", w, h)
	}
	u.digest = h
}

// md5Pairs reads a digest as digest_handler does: each pair of characters
// by strtoul in base 16, which must use both. It returns the digest in
// lower-case hex.
func md5Pairs(w string) (string, bool) {
	if len(w) != 2*md5.Size {
		return "", false
	}
	var sum [md5.Size]byte
	for i := range sum {
		p := w[2*i : 2*i+2]
		lead, d := p[0], p[1]
		v, err := strconv.ParseUint(string(d), 16, 8)
		if err != nil {
			return "", false
		}
		switch {
		case strings.IndexByte(" \t\n\v\f\r+", lead) >= 0:
		case lead == '-':
			v = -v & 0xff // strtoul negates; the byte keeps the low bits
		default:
			hi, err := strconv.ParseUint(string(lead), 16, 8)
			if err != nil {
				return "", false
			}
			v |= hi << 4
		}
		sum[i] = byte(v)
	}
	return hex.EncodeToString(sum[:]), true
}

// statusCodes is check_http.c status_code_handler: each value is a code
// or a range of 100 to 599; a bad one is skipped.
func statusCodes(c *conv, u *urlState, s *stmt) {
	for _, w := range s.Words[1:] {
		lo, rest, _ := strtoul(w)
		hi := lo
		if strings.HasPrefix(rest, "-") {
			hi, rest, _ = strtoul(rest[1:])
		}
		if rest != "" || lo < 100 || lo > 599 || hi < 100 || hi > 599 || lo > hi {
			c.notice(s, "status_code %q: not a status keepalived takes (100 to 599): skipped", w)
			continue
		}
		if lo == hi {
			u.codes = append(u.codes, strconv.FormatUint(lo, 10))
		} else {
			u.codes = append(u.codes, fmt.Sprintf("%d-%d", lo, hi))
		}
	}
}

// startGroup is check_parser.c vsg_handler.
func startGroup(c *conv, s *stmt) {
	c.group = &group{at: s}
}

// groupEntry is check_data.c alloc_vsg_entry: "IP [PORT]", "RANGE
// [PORT]" or "fwmark N [inet|inet6]"; an entry keepalived cannot read is
// skipped.
func groupEntry(c *conv, owner, e *stmt) {
	g := c.group
	if e.Words[0] == "fwmark" {
		m, how := readUnsigned(arg(e, 1), 0, 1<<32-1, true)
		if how == numBad {
			c.notice(e, "fwmark %q: keepalived skips this entry", arg(e, 1))
			return
		}
		k := vsKey{fwmark: uint32(m)}
		if len(e.Words) > 2 {
			if e.Words[2] != "inet" && e.Words[2] != "inet6" {
				c.notice(e, "fwmark %s %q: family unknown: keepalived skips this entry", arg(e, 1), e.Words[2])
				return
			}
			k.family = e.Words[2]
		}
		if len(e.Words) > 3 {
			c.notice(e, "fwmark: keepalived ignores the words after the family (%s)", strings.Join(e.Words[3:], " "))
		}
		g.keys = append(g.keys, k)
		return
	}
	if len(e.Words) > 2 {
		c.notice(e, "%s: keepalived reads an address and a port and ignores the rest (%s)", e.Words[0], strings.Join(e.Words[2:], " "))
	}
	var p uint64
	if w := arg(e, 1); strings.Trim(w, "0") != "" {
		var err error
		if p, err = strconv.ParseUint(w, 10, 16); err != nil || p == 0 {
			c.notice(e, "%q: not a port: keepalived skips this entry", w)
			return
		}
	}
	addrs, err := addrRange(e.Words[0])
	if err != nil {
		c.notice(e, "%v: keepalived skips this entry", err)
		return
	}
	for _, a := range addrs {
		g.keys = append(g.keys, vsKey{addr: a, port: uint16(p)})
	}
	_ = owner
}

func endGroup(c *conv) {
	g := c.group
	c.group = nil
	name := arg(g.at, 1)
	if len(g.keys) == 0 {
		c.notice(g.at, "virtual_server_group %s: no entries: keepalived removes it", name)
		return
	}
	if c.groups[name] != nil {
		c.notice(g.at, "virtual_server_group %s: defined again: keepalived uses the first", name)
		return
	}
	c.groups[name] = g
}
