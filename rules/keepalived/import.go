package keepalived

import (
	"fmt"
	"net/netip"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

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
	Sources []*Stmt
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
	return ImportData(name, data, opt)
}

// ImportData is Import of data, the contents of the file name.
func ImportData(name string, data []byte, opt Options) (*Result, error) {
	stmts, notes, err := Parse(name, data, opt.FS, opt.ConfigID)
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
		c.refuse(&Stmt{File: name, seq: len(stmts)}, "no virtual server with real servers: nothing for lvsctl run to keep")
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

func (c *conv) add(s *Stmt, n Notice) {
	n.File, n.Line, n.Service, n.seq = s.File, s.Line, -1, s.seq
	if c.vs != nil {
		c.vs.notices = append(c.vs.notices, len(c.res.Notices))
	}
	c.res.Notices = append(c.res.Notices, n)
}

// note records something left out that does not change the table.
func (c *conv) note(s *Stmt, format string, args ...any) {
	c.add(s, Notice{Msg: fmt.Sprintf(format, args...)})
}

// notice records keepalived's reading of what is written where it differs
// from a plain reading: an unknown keyword, an invalid value, a value it
// takes otherwise, extra words.
func (c *conv) notice(s *Stmt, format string, args ...any) {
	c.note(s, format, args...)
}

// lossy records a change of behaviour, or refuses it without Lossy.
func (c *conv) lossy(s *Stmt, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if !c.opt.Lossy {
		c.refuse(s, "%s (--lossy converts it anyway)", msg)
		return
	}
	c.add(s, Notice{Lossy: true, Msg: msg})
}

// refuse records what lvsctl cannot reproduce: Import fails.
func (c *conv) refuse(s *Stmt, format string, args ...any) {
	c.add(s, Notice{Refused: true, Msg: fmt.Sprintf(format, args...)})
}

func (c *conv) skipped(s *Stmt, kind string) {
	if !c.skippedKind[kind] {
		c.skippedKind[kind] = true
		c.note(s, "%s: skipped, and any other %s block (%s: not part of the IPVS table)", s.Words[0], kind, kind)
	}
}

// arg is a statement's i-th value; a missing one is "", as
// lib/vector.c strvec_slot gives keepalived.
func arg(s *Stmt, i int) string {
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
	at   *Stmt
	keys []vsKey
}

// vsState is a virtual_server as keepalived holds it while reading
// (check_data.c alloc_vs sets the defaults).
type vsState struct {
	at        *Stmt
	dropped   bool
	keys      []vsKey
	groupName string
	fwmark    bool
	family    string // "" until known
	protocol  string
	sched     string
	flags     [3]bool // SCHED1..3
	ops       *Stmt
	method    string // "" until set
	tun       *desired.JSONTunnel
	pto       uint32
	gran      string // netmask text, "" for none
	granAt    *Stmt
	pe        string
	retry     int64 // -1: unset
	delayLoop int64
	connTO    int64
	inhibit   bool
	weight    int64
	vhost     string
	sorry     *rsState
	sorryInh  *Stmt
	quorum    uint64
	quorumAt  *Stmt
	hyst      uint64
	hystAt    *Stmt
	reals     []*rsState
	notices   []int
}

// rsState is a real_server (check_data.c alloc_rs), or the sorry server.
type rsState struct {
	at        *Stmt
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
	at        *Stmt
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
}

type urlState struct {
	at    *Stmt
	path  string
	codes []string
	vhost string
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
func startVS(c *conv, s *Stmt) {
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
func vsKW(f func(c *conv, v *vsState, s *Stmt)) func(c *conv, s *Stmt) {
	return func(c *conv, s *Stmt) {
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
func lbAlgo(c *conv, v *vsState, s *Stmt) {
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
func lbFlag(c *conv, v *vsState, s *Stmt) {
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
func (c *conv) fwdMethod(s *Stmt, method *string, tun **desired.JSONTunnel) {
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
func persistenceTimeout(c *conv, v *vsState, s *Stmt) {
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
func persistenceGranularity(c *conv, v *vsState, s *Stmt) {
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
func protocol(c *conv, v *vsState, s *Stmt) {
	p := strings.ToLower(arg(s, 1))
	if p != "tcp" && p != "udp" && p != "sctp" {
		c.notice(s, "protocol %q: keepalived knows TCP, UDP and SCTP and ignores this: the protocol stays %s", arg(s, 1), strings.ToUpper(orDefault(v.protocol, "udp (keepalived's default)")))
		return
	}
	v.protocol = p
}

// ipFamily is check_parser.c ip_family_handler.
func ipFamily(c *conv, v *vsState, s *Stmt) {
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

// timerInto reads one of the timers a virtual server, a real server and a
// checker share (delay_loop, connect_timeout: at least 1 µs) into dst;
// a value keepalived refuses leaves dst as it was.
func (c *conv) timerInto(s *Stmt, dst *int64) {
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
func (c *conv) retryInto(s *Stmt, lo uint64, lenient bool, dst *int64) {
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
func sorryServer(c *conv, v *vsState, s *Stmt) {
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
func (c *conv) newServer(v *vsState, s *Stmt, what string) *rsState {
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
func startRS(c *conv, s *Stmt) {
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

func rsKW(f func(c *conv, r *rsState, s *Stmt)) func(c *conv, s *Stmt) {
	return func(c *conv, s *Stmt) {
		if c.rs != nil {
			f(c, c.rs, s)
		}
	}
}

// threshold is check_parser.c uthreshold_handler and lthreshold_handler.
func threshold(field func(r *rsState) *uint32) func(c *conv, r *rsState, s *Stmt) {
	return func(c *conv, r *rsState, s *Stmt) {
		n, how := readUnsigned(arg(s, 1), 0, 1<<32-1, true)
		switch how {
		case numBad:
			c.notice(s, "%s %q: keepalived ignores it", s.Words[0], arg(s, 1))
			return
		case numLoose:
			c.notice(s, "%s %q: keepalived reads %d", s.Words[0], arg(s, 1), n)
		}
		*field(r) = uint32(n)
	}
}

// startCheck is a checker keyword (check_api.c queue_checker).
func startCheck(c *conv, s *Stmt) {
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
	}
	c.chk = k
	c.rs.checks = append(c.rs.checks, k)
}

func chkKW(f func(c *conv, k *chkState, s *Stmt)) func(c *conv, s *Stmt) {
	return func(c *conv, s *Stmt) {
		if c.chk != nil {
			f(c, c.chk, s)
		}
	}
}

// endCheck drops the checkers keepalived drops at their end: HTTP_GET and
// SSL_GET without a url (check_http.c http_get_check_end), MISC_CHECK
// without misc_path (check_misc.c misc_end_handler).
func endCheck(c *conv) {
	k := c.chk
	c.chk = nil
	if k == nil {
		return
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

func startURL(c *conv, s *Stmt) {
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

func urlKW(f func(c *conv, u *urlState, s *Stmt)) func(c *conv, s *Stmt) {
	return func(c *conv, s *Stmt) {
		if c.url != nil {
			f(c, c.url, s)
		}
	}
}

// statusCodes is check_http.c status_code_handler: each value is a code
// or a range of 100 to 599; a bad one is skipped.
func statusCodes(c *conv, u *urlState, s *Stmt) {
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
func startGroup(c *conv, s *Stmt) {
	c.group = &group{at: s}
}

// groupEntry is check_data.c alloc_vsg_entry: "IP [PORT]", "RANGE
// [PORT]" or "fwmark N [inet|inet6]"; an entry keepalived cannot read is
// skipped.
func groupEntry(c *conv, owner, e *Stmt) {
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
func (c *conv) familyMismatch(s *desired.JSONService, at *Stmt) bool {
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
// converts its first check.
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
	for i, k := range checks {
		if i > 0 {
			c.lossy(k.at, "%s: lvsctl runs one check per real server; only the first (%s) is kept", k.kind, checks[0].kind)
			continue
		}
		spec, ok := c.checkSpec(v, r, k, method)
		if !ok {
			continue
		}
		d.Check = spec
	}
	if len(checks) > 0 && !inhibit {
		c.note(r.at, "real server %s: no inhibit_on_failure: keepalived deletes a failed server, lvsctl sets its weight to 0 (its connections finish)", d.Address)
	}
	return d, true
}

// checkSpec completes a check's timing as validate_check_config does:
// each of retry, delay_loop and connect_timeout comes from the checker,
// else the real server, else the virtual server, else the default (retry:
// 1; 3 for DNS_CHECK, 0 for MISC_CHECK).
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
		s.Host = orDefault(k.vhost, orDefault(r.vhost, v.vhost))
		for i, u := range k.urls {
			if i > 0 {
				c.lossy(u.at, "url: lvsctl checks one URL per real server; only the first is kept")
				continue
			}
			s.Path = u.path
			if u.vhost != "" {
				s.Host = u.vhost
			}
			s.Expect = "200-299" // check_http.h HTTP_DEFAULT_STATUS_CODE_MIN..MAX
			if len(u.codes) > 0 {
				s.Expect = strings.Join(u.codes, ",")
			}
		}
	}
	if s.Type == "udp" && !k.reply {
		c.lossy(k.at, "UDP_CHECK without require_reply passes when no ICMP error comes back; lvsctl's udp check needs a reply")
	}
	if s.Type == "exec" && s.User == "" {
		c.note(k.at, "MISC_CHECK without user: keepalived runs it as keepalived_script (or root), lvsctl as nobody")
	}
	if r.port == 0 && s.Port == 0 && s.Type != "exec" {
		// keepalived probes port 0, which fails; lvsctl would probe the
		// service's port.
		c.lossy(k.at, "%s of real server %s without a port or connect_port: keepalived probes port 0 and takes the server out; lvsctl probes the service's port", k.kind, r.addr)
	}
	if method != "masq" && s.Type != "exec" {
		s.Via = "direct" // keepalived probes the real server's own address
	}
	return &s, true
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
		if d.Check != nil {
			return true
		}
	}
	return false
}

// hoistCheck moves a check that every real server has into the service.
func hoistCheck(js *desired.JSONService) {
	if len(js.Destinations) == 0 {
		return
	}
	first := js.Destinations[0].Check
	if first == nil {
		return
	}
	for _, d := range js.Destinations[1:] {
		if d.Check == nil || !reflect.DeepEqual(*d.Check, *first) {
			return
		}
	}
	js.Check = first
	for i := range js.Destinations {
		js.Destinations[i].Check = nil
	}
}

// maxRange bounds the addresses one group entry expands to.
const maxRange = 1 << 16

// addrRange reads "A", "A-N", "A-B" or "A/LEN" (check_data.c
// alloc_vsg_entry): N replaces the last byte of an IPv4 or the last group
// of an IPv6 address.
func addrRange(w string) ([]netip.Addr, error) {
	if pfx, err := netip.ParsePrefix(w); err == nil {
		if pfx.Addr().BitLen()-pfx.Bits() > 16 {
			return nil, fmt.Errorf("%q: more than %d addresses", w, maxRange)
		}
		var out []netip.Addr
		for a := pfx.Masked().Addr(); pfx.Contains(a); a = a.Next() {
			out = append(out, a.Unmap())
		}
		return out, nil
	}
	base, last, isRange := strings.Cut(w, "-")
	a, err := netip.ParseAddr(base)
	if err != nil {
		return nil, fmt.Errorf("%q: not an IP address or range", w)
	}
	a = a.Unmap()
	if !isRange {
		return []netip.Addr{a}, nil
	}
	end, err := netip.ParseAddr(last)
	if err != nil || end.Is4() != a.Is4() {
		b := a.AsSlice()
		var hi uint64
		if a.Is4() {
			hi, err = strconv.ParseUint(last, 10, 8)
			b[3] = byte(hi)
		} else {
			hi, err = strconv.ParseUint(last, 16, 16)
			b[14], b[15] = byte(hi>>8), byte(hi)
		}
		if err != nil {
			return nil, fmt.Errorf("%q: not an IP address or range", w)
		}
		end, _ = netip.AddrFromSlice(b)
	}
	end = end.Unmap()
	if end.Less(a) {
		return nil, fmt.Errorf("%q: the range's end must be at least its start", w)
	}
	var out []netip.Addr
	for x := a; ; x = x.Next() {
		if len(out) == maxRange {
			return nil, fmt.Errorf("%q: more than %d addresses", w, maxRange)
		}
		out = append(out, x)
		if x == end {
			return out, nil
		}
	}
}

// splitCommand splits misc_path into arguments at blanks; single or
// double quotes keep blanks in an argument, as keepalived's script
// parameters do.
func splitCommand(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0 && ch == quote:
			quote = 0
		case quote != 0:
			cur.WriteByte(ch)
		case ch == '\'' || ch == '"':
			quote, in = ch, true
		case ch == ' ' || ch == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if in {
		out = append(out, cur.String())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty")
	}
	return out, nil
}

// hexString reads keepalived's free-form HEX_STR: each word is read two
// digits to a byte, and a last digit alone is a byte of its own
// ("Ab12f 3" is AB 12 0F 03). X stands for any digit.
func hexString(words []string) (string, bool) {
	var out strings.Builder
	for _, w := range words {
		for i := 0; i < len(w); i += 2 {
			pair := w[i:min(i+2, len(w))]
			if len(pair) == 1 {
				pair = "0" + pair
			}
			for _, ch := range pair {
				if !strings.ContainsRune("0123456789abcdefABCDEFxX", ch) {
					return "", false
				}
			}
			out.WriteString(pair)
		}
	}
	if out.Len() == 0 {
		return "", false
	}
	return strings.ToLower(out.String()), true
}
