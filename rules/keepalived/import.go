package keepalived

import (
	"fmt"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/rules/desired"
)

// Notice is something the conversion leaves out or changes, at the
// statement that says it.
type Notice struct {
	File string
	Line int
	// Service is the index in Result.Document.Services of the first
	// service the notice concerns, or -1 for none.
	Service int
	// Lossy is set when the desired state behaves differently from
	// keepalived (Import refuses it unless Options.Lossy); otherwise the
	// notice is about what keepalived does beside the table (VRRP, alerts)
	// or about timing only.
	Lossy bool
	Msg   string
}

func (n Notice) String() string { return fmt.Sprintf("%s:%d: %s", n.File, n.Line, n.Msg) }

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
	// Notices are in the order of the statements they concern.
	Notices []Notice
}

// Import reads the keepalived configuration in the file name and the files
// it includes, and converts its virtual servers. What the desired state
// cannot say exactly is an error naming the file and line, unless
// opt.Lossy. Import does not validate the result against the host (an exec
// check's program, a scheduler module): rules/desired.Read does.
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
	c := &conv{opt: opt, res: &Result{Source: name, Document: desired.Document{Version: desired.HealthVersion, Services: []desired.JSONService{}}}, svc: -1}
	for i := range notes {
		notes[i].Service = -1
	}
	c.res.Notices = notes
	if err := c.top(stmts); err != nil {
		return nil, err
	}
	return c.res, nil
}

type conv struct {
	opt     Options
	res     *Result
	svc     int // index of the service being converted, -1 outside
	skipped map[string]bool
	groups  map[string]*Stmt
	granAt  *Stmt // the persistence_granularity of the service being converted
}

// note records an informational notice.
func (c *conv) note(s *Stmt, format string, args ...any) {
	c.res.Notices = append(c.res.Notices, Notice{File: s.File, Line: s.Line, Service: c.svc, Msg: fmt.Sprintf(format, args...)})
}

// lossy records a change of behaviour, or refuses it without Lossy.
func (c *conv) lossy(s *Stmt, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if !c.opt.Lossy {
		return &Error{s.File, s.Line, msg + " (--lossy converts it anyway)"}
	}
	c.res.Notices = append(c.res.Notices, Notice{File: s.File, Line: s.Line, Service: c.svc, Lossy: true, Msg: msg})
	return nil
}

func errAt(s *Stmt, format string, args ...any) error {
	return &Error{s.File, s.Line, fmt.Sprintf(format, args...)}
}

// skippedKinds are top-level blocks that configure something other than
// the IPVS table, by kind; each kind gets one notice.
var skippedKinds = map[string]string{
	"global_defs": "global settings", "vrrp_instance": "VRRP", "vrrp_sync_group": "VRRP",
	"vrrp_script": "VRRP", "vrrp_track_process": "VRRP", "vrrp_track_file": "VRRP",
	"track_file": "VRRP", "garp_group": "VRRP", "static_ipaddress": "static addresses",
	"static_routes": "static routes", "static_rules": "static rules", "bfd_instance": "BFD",
	"linkbeat_interfaces": "link beat", "net_namespace": "network namespace",
	"instance": "instance", "use_symlink_paths": "global settings",
}

func (c *conv) top(stmts []*Stmt) error {
	c.skipped = map[string]bool{}
	c.groups = map[string]*Stmt{}
	for _, s := range stmts {
		if s.Words[0] == "virtual_server_group" {
			if len(s.Words) != 2 || !s.HasBlock {
				return errAt(s, "virtual_server_group: want a name and a block")
			}
			if c.groups[s.Words[1]] != nil {
				return errAt(s, "virtual_server_group %s: defined twice", s.Words[1])
			}
			c.groups[s.Words[1]] = s
		}
	}
	for _, s := range stmts {
		kw := s.Words[0]
		switch {
		case kw == "virtual_server":
			if err := c.virtualServer(s); err != nil {
				return err
			}
		case kw == "virtual_server_group":
		case skippedKinds[kw] != "":
			if kind := skippedKinds[kw]; !c.skipped[kind] {
				c.skipped[kind] = true
				c.note(s, "%s: skipped, and any other %s block (%s: not part of the IPVS table)", kw, kind, kind)
			}
		default:
			c.note(s, "%s: unknown keyword, ignored (as keepalived does)", kw)
		}
	}
	return nil
}

// vsKey is one service address of a virtual_server.
type vsKey struct {
	addr   netip.Addr
	port   uint16
	fwmark uint32
	family string // of a group's fwmark, when given
}

func (c *conv) virtualServer(s *Stmt) error {
	if !s.HasBlock {
		return errAt(s, "virtual_server: no block")
	}
	var keys []vsKey
	switch {
	case len(s.Words) == 3 && s.Words[1] == "fwmark":
		m, err := parseUint(s.Words[2], 32)
		if err != nil || m == 0 {
			return errAt(s, "virtual_server fwmark %q: want a mark from 1", s.Words[2])
		}
		keys = []vsKey{{fwmark: uint32(m)}}
	case len(s.Words) == 3 && s.Words[1] == "group":
		g := c.groups[s.Words[2]]
		if g == nil {
			return errAt(s, "virtual_server group %s: no virtual_server_group of that name", s.Words[2])
		}
		var err error
		if keys, err = groupKeys(g); err != nil {
			return err
		}
	case len(s.Words) == 3 || len(s.Words) == 2:
		a, err := netip.ParseAddr(s.Words[1])
		if err != nil {
			return errAt(s, "virtual_server %q: not an IP address", s.Words[1])
		}
		var p uint64
		if len(s.Words) == 3 {
			if p, err = parseUint(s.Words[2], 16); err != nil {
				return errAt(s, "virtual_server %s %q: not a port", s.Words[1], s.Words[2])
			}
		}
		keys = []vsKey{{addr: a.Unmap(), port: uint16(p)}}
	default:
		return errAt(s, "virtual_server: want IP [PORT], fwmark N or group NAME")
	}
	first := len(c.res.Document.Services)
	c.svc = first
	defer func() { c.svc = -1 }()
	tmpl, err := c.serviceBody(s, keys[0].fwmark != 0)
	if err != nil {
		return err
	}
	if len(tmpl.Destinations) == 0 {
		c.svc = -1
		c.note(s, "virtual_server %s: no real servers: keepalived leaves it out of the table, and so does the conversion", strings.Join(s.Words[1:], " "))
		return nil
	}
	for _, k := range keys {
		js := *tmpl
		js.SchedulerFlags = append([]string(nil), tmpl.SchedulerFlags...)
		js.Destinations = append([]desired.JSONDestination(nil), tmpl.Destinations...)
		if k.fwmark == 0 {
			for i := range js.Destinations {
				if js.Destinations[i].Port == 0 {
					js.Destinations[i].Port = k.port // keepalived's default: the service's port
				}
			}
			if k.port == 0 && js.Persistence == nil {
				// keepalived makes a service of port 0 persistent
				js.Persistence = &desired.JSONPersistence{Timeout: 360}
			}
		}
		if k.fwmark != 0 {
			js.FWMark = k.fwmark
			js.Protocol = ""
			if k.family != "" {
				js.Family = k.family
			}
			if js.Family == "" {
				js.Family = familyOfDests(js.Destinations)
			}
		} else {
			js.Address = k.addr.String()
			port := k.port
			js.Port = &port
			js.Family = "inet"
			if k.addr.Is6() {
				js.Family = "inet6"
			}
		}
		if js.Persistence != nil {
			p := *js.Persistence
			if js.Family == "inet" && p.Netmask != "" && !strings.Contains(p.Netmask, ".") {
				return errAt(firstOf(c.granAt, s), "persistence_granularity %s on an IPv4 service: keepalived reads it as the address 0.0.0.%s; write a dotted mask", p.Netmask, p.Netmask)
			}
			if p.Netmask == "" {
				p.Netmask = "255.255.255.255"
				if js.Family == "inet6" {
					p.Netmask = "128"
				}
			}
			js.Persistence = &p
		}
		for _, d := range js.Destinations {
			a, _ := netip.ParseAddr(d.Address)
			if (js.Family == "inet6") != a.Is6() && js.Destinations[0].Method != "tunnel" {
				return errAt(s, "virtual_server: real server %s is not of the service's family %s", d.Address, js.Family)
			}
		}
		c.res.Document.Services = append(c.res.Document.Services, js)
	}
	return nil
}

func familyOfDests(ds []desired.JSONDestination) string {
	for _, d := range ds {
		if a, err := netip.ParseAddr(d.Address); err == nil && a.Is6() {
			return "inet6"
		}
	}
	return "inet"
}

// groupKeys reads a virtual_server_group: "IP [PORT]", "RANGE [PORT]"
// ("A-N", where N replaces the last byte of an IPv4 or the last group of
// an IPv6 address; "A-B" with B a whole address; "A/LEN"), "fwmark N
// [inet|inet6]".
func groupKeys(g *Stmt) ([]vsKey, error) {
	var keys []vsKey
	for _, e := range g.Block {
		if e.Words[0] == "fwmark" && (len(e.Words) == 2 || len(e.Words) == 3) {
			m, err := parseUint(e.Words[1], 32)
			if err != nil || m == 0 {
				return nil, errAt(e, "fwmark %q: want a mark from 1", e.Words[1])
			}
			k := vsKey{fwmark: uint32(m)}
			if len(e.Words) == 3 {
				if e.Words[2] != "inet" && e.Words[2] != "inet6" {
					return nil, errAt(e, "fwmark %s %q: inet or inet6", e.Words[1], e.Words[2])
				}
				k.family = e.Words[2]
			}
			keys = append(keys, k)
			continue
		}
		if len(e.Words) != 2 && len(e.Words) != 1 {
			return nil, errAt(e, "virtual_server_group %s: want IP [PORT], RANGE [PORT] or fwmark N", g.Words[1])
		}
		var p uint64
		if len(e.Words) == 2 {
			var err error
			if p, err = parseUint(e.Words[1], 16); err != nil {
				return nil, errAt(e, "%q: not a port", e.Words[1])
			}
		}
		addrs, err := addrRange(e.Words[0])
		if err != nil {
			return nil, errAt(e, "%v", err)
		}
		for _, a := range addrs {
			keys = append(keys, vsKey{addr: a, port: uint16(p)})
		}
	}
	if len(keys) == 0 {
		return nil, errAt(g, "virtual_server_group %s: empty", g.Words[1])
	}
	return keys, nil
}

// maxRange bounds the addresses one group entry expands to.
const maxRange = 1 << 16

// addrRange reads "A", "A-N", "A-B" or "A/LEN" (see groupKeys).
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

func parseUint(w string, bits int) (uint64, error) {
	return strconv.ParseUint(w, 10, bits)
}

// timing holds the check settings a virtual_server passes to its real
// servers and a real server to its checks.
type timing struct {
	delayLoop, connectTimeout string
	retry                     int    // -1: the checker's default
	host                      string // virtualhost: HTTP_GET and SSL_GET's Host
}

// set reads one of the timer keywords a virtual server, a real server and
// a check share (a check's misc_timeout and nb_get_retry are synonyms);
// each level's value overrides the one above.
func (t *timing) set(b *Stmt, kw string, args []string) error {
	var err error
	switch kw {
	case "delay_loop":
		t.delayLoop, err = seconds(b, args)
	case "connect_timeout", "misc_timeout":
		t.connectTimeout, err = seconds(b, args)
	case "retry", "nb_get_retry":
		if len(args) != 1 {
			return errAt(b, "%s: want one value", kw)
		}
		n, perr := parseUint(args[0], 31)
		if perr != nil {
			return errAt(b, "retry %q: want a count", args[0])
		}
		t.retry = int(n)
	}
	return err
}

// methods maps keepalived's lb_kind to desired's method names.
var methods = map[string]string{"NAT": "masq", "DR": "route", "TUN": "tunnel"}

func (c *conv) serviceBody(s *Stmt, fwmark bool) (*desired.JSONService, error) {
	// keepalived's defaults: UDP (it says so in its log), wlc, NAT.
	js := &desired.JSONService{Protocol: "udp", Scheduler: "wlc"}
	c.granAt = nil
	method := "masq"
	var tun *desired.JSONTunnel
	t := timing{retry: -1}
	inhibitAll := false
	var sorry, sorryInhibit, sorryMethodAt, quorum, hysteresis, ops *Stmt
	sorryMethod, quorumN, hysteresisN := "", 1, 0
	var reals []*Stmt
	for _, b := range s.Block {
		kw, args := b.Words[0], b.Words[1:]
		one := func() (string, error) {
			if len(args) != 1 {
				return "", errAt(b, "%s: want one value", kw)
			}
			return args[0], nil
		}
		switch kw {
		case "protocol":
			v, err := one()
			if err != nil {
				return nil, err
			}
			switch p := strings.ToLower(v); p {
			case "tcp", "udp", "sctp":
				js.Protocol = p
			default:
				return nil, errAt(b, "protocol %q: TCP, UDP or SCTP", v)
			}
		case "lb_algo", "lvs_sched":
			v, err := one()
			if err != nil {
				return nil, err
			}
			js.Scheduler = v
		case "lb_kind", "lvs_method":
			var err error
			if method, tun, err = parseMethod(b, args); err != nil {
				return nil, err
			}
		case "persistence_timeout":
			to := uint64(360) // keepalived's default without a value
			if len(args) > 0 {
				var err error
				if to, err = parseUint(args[0], 32); err != nil || to == 0 {
					return nil, errAt(b, "persistence_timeout %q: want seconds from 1", args[0])
				}
			}
			if js.Persistence == nil {
				js.Persistence = &desired.JSONPersistence{}
			}
			js.Persistence.Timeout = uint32(to)
		case "persistence_granularity":
			v, err := one()
			if err != nil {
				return nil, err
			}
			if js.Persistence == nil {
				js.Persistence = &desired.JSONPersistence{Timeout: 360}
			}
			js.Persistence.Netmask = v
			c.granAt = b
		case "persistence_engine":
			v, err := one()
			if err != nil {
				return nil, err
			}
			js.PE = v
		case "ops":
			js.OnePacket, ops = true, b
		case "hashed", "flag-1", "flag-2", "flag-3", "sh-port", "sh-fallback", "mh-port", "mh-fallback":
			js.SchedulerFlags = append(js.SchedulerFlags, kw)
		case "ip_family":
			v, err := one()
			if err != nil {
				return nil, err
			}
			if v != "inet" && v != "inet6" {
				return nil, errAt(b, "ip_family %q: inet or inet6", v)
			}
			js.Family = v
		case "delay_loop", "connect_timeout", "retry":
			if err := t.set(b, kw, args); err != nil {
				return nil, err
			}
		case "inhibit_on_failure":
			v, err := boolArg(b, args)
			if err != nil {
				return nil, err
			}
			inhibitAll = v
		case "virtualhost":
			v, err := one()
			if err != nil {
				return nil, err
			}
			t.host = v
		case "sorry_server":
			sorry = b
		case "real_server":
			reals = append(reals, b)
		case "quorum", "hysteresis":
			v, err := one()
			if err != nil {
				return nil, err
			}
			n, err := parseUint(v, 31)
			if err != nil {
				return nil, errAt(b, "%s %q: want a count", kw, v)
			}
			if kw == "quorum" {
				quorum = b
				quorumN = int(n)
			} else {
				hysteresis = b
				hysteresisN = int(n)
			}
		case "sorry_server_inhibit":
			sorryInhibit = b
		case "sorry_server_lvs_method":
			var err error
			if sorryMethod, _, err = parseMethod(b, args); err != nil {
				return nil, err
			}
			sorryMethodAt = b
		default:
			c.ignore(b, "virtual_server")
		}
	}
	if js.Persistence != nil && !strings.Contains(js.Persistence.Netmask, ".") && js.Persistence.Netmask != "" {
		// an IPv6 prefix length: desired reads it as decimal text
		if _, err := strconv.Atoi(js.Persistence.Netmask); err != nil {
			return nil, errAt(s, "persistence_granularity %q: a dotted mask or a prefix length", js.Persistence.Netmask)
		}
	}
	if ops != nil && js.Protocol != "udp" && !fwmark {
		js.OnePacket = false
		c.note(ops, "ops: only for UDP; keepalived drops it for %s, and so does the conversion", strings.ToUpper(js.Protocol))
	}
	js.Destinations = []desired.JSONDestination{}
	for _, r := range reals {
		d, err := c.realServer(r, method, tun, t, inhibitAll)
		if err != nil {
			return nil, err
		}
		js.Destinations = append(js.Destinations, *d)
	}
	if hysteresis != nil && hysteresisN >= quorumN {
		hysteresisN = quorumN - 1 // as keepalived corrects it
	}
	if quorum != nil && quorumN > len(reals) {
		quorumN = len(reals) // as keepalived corrects it
	}
	if sorry != nil {
		if len(sorry.Words) != 3 && len(sorry.Words) != 2 {
			return nil, errAt(sorry, "sorry_server: want IP [PORT]")
		}
		a, err := netip.ParseAddr(sorry.Words[1])
		var p uint64
		var perr error
		if len(sorry.Words) == 3 {
			p, perr = parseUint(sorry.Words[2], 16)
		}
		if err != nil || perr != nil {
			return nil, errAt(sorry, "sorry_server %s: want IP [PORT]", strings.Join(sorry.Words[1:], " "))
		}
		js.WhenAllDown = desired.Sorry
		js.SorryServer = netip.AddrPortFrom(a.Unmap(), uint16(p)).String()
		if sorryInhibit != nil {
			if err := c.lossy(sorryInhibit, "sorry_server_inhibit: keepalived keeps the sorry server in the table at weight 0; lvsctl adds it only while every real server is down"); err != nil {
				return nil, err
			}
		}
		if sorryMethodAt != nil && len(js.Destinations) > 0 && sorryMethod != js.Destinations[0].Method {
			if err := c.lossy(sorryMethodAt, "sorry_server_lvs_method: lvsctl forwards to the sorry server as to the first real server (%s)", js.Destinations[0].Method); err != nil {
				return nil, err
			}
		}
		if quorumN > 1 {
			if err := c.lossy(quorum, "quorum %d: keepalived sends to the sorry server once the weights of the real servers up add to less than %d (less %d of hysteresis); lvsctl only once all are down", quorumN, quorumN, hysteresisN); err != nil {
				return nil, err
			}
		}
	} else {
		if sorryInhibit != nil || sorryMethodAt != nil {
			c.note(firstOf(sorryInhibit, sorryMethodAt), "%s: ignored: no sorry_server", firstOf(sorryInhibit, sorryMethodAt).Words[0])
		}
		if quorum != nil {
			c.note(quorum, "quorum: ignored: without a sorry_server it only runs quorum commands, which lvsctl does not")
		}
	}
	if hysteresis != nil && (sorry == nil || quorumN <= 1) {
		c.note(hysteresis, "hysteresis: ignored: it matters only with a quorum above 1 and a sorry_server")
	}
	if sorry == nil && anyChecked(js.Destinations) {
		// keepalived takes every failed server out; lvsctl's default
		// (keep) would keep the last ones in.
		js.WhenAllDown = desired.Zero
	}
	hoistCheck(js)
	return js, nil
}

// ignored are the keywords that change nothing in the IPVS table, by
// the block that may hold them, with why the conversion can leave them out.
var ignored = map[string]map[string]string{
	"virtual_server": {
		"delay_before_retry": whyRetryDelay, "warmup": whyWarmup, "alpha": whyAlpha,
		"omega": whyQuorumCmd, "quorum_up": whyQuorumCmd, "quorum_down": whyQuorumCmd,
		"ha_suspend": "it suspends checks while the director lacks the VIP; lvsctl always checks",
		"smtp_alert": whyAlert, "snmp_name": "",
	},
	"real_server": {
		"delay_before_retry": whyRetryDelay, "warmup": whyWarmup, "alpha": whyAlpha,
		"notify_up": whyNotify, "notify_down": whyNotify, "smtp_alert": whyAlert, "snmp_name": "",
	},
	"check": {
		"delay_before_retry": whyRetryDelay, "warmup": whyWarmup, "alpha": whyAlpha,
		"log_all_failures": "", "dynamic": "",
		"fast_recovery": "timing only: lvsctl checks its one URL every interval",
		"enable_sni":    "lvsctl sends the virtualhost as the TLS server name whenever one is given",
	},
	"url": {},
}

const (
	whyRetryDelay = "timing only: lvsctl probes every interval, retries included"
	whyWarmup     = "timing only: lvsctl spreads the first probes over one interval"
	whyAlpha      = "lvsctl serves a real server new to the table after its first passing check, and takes one the kernel already serves as up"
	whyQuorumCmd  = "lvsctl runs no commands on quorum changes"
	whyNotify     = "lvsctl logs each change and exports it as a metric; it runs no commands"
	whyAlert      = "lvsctl sends no mail"
)

// ignore notes a keyword the conversion leaves out: one that changes
// nothing in the table (with why), or one keepalived does not know in that
// block (keepalived ignores those too).
func (c *conv) ignore(b *Stmt, block string) {
	kw := b.Words[0]
	set := ignored[block]
	if set == nil {
		set = ignored["check"]
	}
	why, ok := set[kw]
	switch {
	case ok && why != "":
		c.note(b, "%s: ignored (%s)", kw, why)
	case ok:
		c.note(b, "%s: ignored", kw)
	default:
		c.note(b, "%s: unknown keyword in %s, ignored (as keepalived does)", kw, block)
	}
}

func firstOf(ss ...*Stmt) *Stmt {
	for _, s := range ss {
		if s != nil {
			return s
		}
	}
	return nil
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

// seconds reads keepalived's time in seconds (it takes fractions) as a Go
// duration.
func seconds(b *Stmt, args []string) (string, error) {
	if len(args) != 1 {
		return "", errAt(b, "%s: want one value", b.Words[0])
	}
	f, err := strconv.ParseFloat(args[0], 64)
	if err != nil || f <= 0 || f > 1e6 {
		return "", errAt(b, "%s %q: want seconds", b.Words[0], args[0])
	}
	return strconv.FormatFloat(f, 'f', -1, 64) + "s", nil
}

func (c *conv) realServer(r *Stmt, method string, tun *desired.JSONTunnel, t timing, inhibit bool) (*desired.JSONDestination, error) {
	// The port may be left out (port 0), as fwmark services do.
	if len(r.Words) != 3 && len(r.Words) != 2 {
		return nil, errAt(r, "real_server: want IP [PORT]")
	}
	a, err := netip.ParseAddr(r.Words[1])
	if err != nil {
		return nil, errAt(r, "real_server %q: not an IP address", r.Words[1])
	}
	var p uint64
	if len(r.Words) == 3 {
		if p, err = parseUint(r.Words[2], 16); err != nil {
			return nil, errAt(r, "real_server %s %q: not a port", r.Words[1], r.Words[2])
		}
	}
	d := &desired.JSONDestination{Address: a.Unmap().String(), Port: uint16(p), Method: method, Tunnel: tun, Weight: 1}
	var checks []*Stmt
	for _, b := range r.Block {
		kw, args := b.Words[0], b.Words[1:]
		num := func(bits int) (uint64, error) {
			if len(args) != 1 {
				return 0, errAt(b, "%s: want one value", kw)
			}
			n, err := parseUint(args[0], bits)
			if err != nil {
				return 0, errAt(b, "%s %q: not a count", kw, args[0])
			}
			return n, nil
		}
		switch kw {
		case "weight":
			n, err := num(31)
			if err != nil {
				return nil, err
			}
			d.Weight = int64(n)
		case "lvs_method":
			if d.Method, d.Tunnel, err = parseMethod(b, args); err != nil {
				return nil, err
			}
		case "uthreshold":
			n, err := num(32)
			if err != nil {
				return nil, err
			}
			d.UpperThreshold = uint32(n)
		case "lthreshold":
			n, err := num(32)
			if err != nil {
				return nil, err
			}
			d.LowerThreshold = uint32(n)
		case "inhibit_on_failure":
			if inhibit, err = boolArg(b, args); err != nil {
				return nil, err
			}
		case "virtualhost":
			if len(args) != 1 {
				return nil, errAt(b, "virtualhost: want one value")
			}
			t.host = args[0]
		case "delay_loop", "connect_timeout", "retry":
			if err := t.set(b, kw, args); err != nil {
				return nil, err
			}
		case "TCP_CHECK", "HTTP_GET", "SSL_GET", "DNS_CHECK", "UDP_CHECK", "MISC_CHECK":
			checks = append(checks, b)
		case "PING_CHECK", "SMTP_CHECK", "FILE_CHECK", "BFD_CHECK":
			if err := c.lossy(b, "%s: no such check in lvsctl; real server %s served unchecked", kw, d.Address); err != nil {
				return nil, err
			}
		default:
			c.ignore(b, "real_server")
		}
	}
	for i, ch := range checks {
		if i > 0 {
			if err := c.lossy(ch, "%s: lvsctl runs one check per real server; only the first (%s) is kept", ch.Words[0], checks[0].Words[0]); err != nil {
				return nil, err
			}
			continue
		}
		spec, err := c.check(ch, t)
		if err != nil {
			return nil, err
		}
		if d.Port == 0 && spec.Port == 0 && spec.Type != "exec" {
			// keepalived probes port 0, which fails; lvsctl would probe
			// the service's port.
			if err := c.lossy(ch, "%s of real server %s without a port or connect_port: keepalived probes port 0 and takes the server out; lvsctl probes the service's port", ch.Words[0], d.Address); err != nil {
				return nil, err
			}
		}
		if d.Method != "masq" && spec.Type != "exec" {
			// keepalived probes the real server's own address
			spec.Via = "direct"
		}
		d.Check = spec
	}
	if len(checks) > 0 && !inhibit {
		c.note(r, "real server %s: no inhibit_on_failure: keepalived deletes a failed server, lvsctl sets its weight to 0 (its connections finish)", d.Address)
	}
	return d, nil
}

// check converts one checker block.
//
// keepalived's retry N means N more attempts after a failed one (each
// delay_before_retry apart) before the server is taken out, so N+1 failures
// in a row: fall = retry + 1. Without retry, keepalived retries once (no
// retry for MISC_CHECK): fall 2 (1). One success brings a server back:
// rise 1. The interval is delay_loop (default 60 s) and the timeout
// connect_timeout (default 5 s), written out because lvsctl's defaults
// differ.
func (c *conv) check(ch *Stmt, t timing) (*health.Spec, error) {
	s := &health.Spec{Rise: 1}
	defaultRetry := 1
	switch ch.Words[0] {
	case "TCP_CHECK":
		s.Type = "tcp"
	case "HTTP_GET":
		s.Type = "http"
	case "SSL_GET":
		s.Type = "https"
		s.TLSSkipVerify = true // keepalived does not verify the certificate
	case "DNS_CHECK":
		s.Type = "dns"
		s.Query, s.Record = ".", "SOA" // keepalived's defaults
		defaultRetry = 3
	case "UDP_CHECK":
		s.Type = "udp"
	case "MISC_CHECK":
		s.Type = "exec"
		defaultRetry = 0
	}
	var urls []*Stmt
	requireReply := false
	if s.Type == "http" || s.Type == "https" {
		s.Host = t.host
	}
	for _, b := range ch.Block {
		kw, args := b.Words[0], b.Words[1:]
		one := func() (string, error) {
			if len(args) != 1 {
				return "", errAt(b, "%s: want one value", kw)
			}
			return args[0], nil
		}
		switch kw {
		case "connect_port":
			v, err := one()
			if err != nil {
				return nil, err
			}
			p, err := parseUint(v, 16)
			if err != nil {
				return nil, errAt(b, "connect_port %q: not a port", v)
			}
			s.Port = int(p)
		case "connect_timeout", "misc_timeout", "delay_loop", "retry", "nb_get_retry":
			if err := t.set(b, kw, args); err != nil {
				return nil, err
			}
		case "url":
			urls = append(urls, b)
		case "virtualhost":
			v, err := one()
			if err != nil {
				return nil, err
			}
			s.Host = v
		case "type":
			v, err := one()
			if err != nil {
				return nil, err
			}
			s.Record = strings.ToUpper(v)
		case "name":
			v, err := one()
			if err != nil {
				return nil, err
			}
			s.Query = v
		case "payload":
			h, err := hexString(b, args)
			if err != nil {
				return nil, err
			}
			s.Send = "hex:" + h
		case "require_reply":
			requireReply = true
			if len(args) > 0 {
				h, err := hexString(b, args)
				if err != nil {
					return nil, err
				}
				if strings.ContainsAny(h, "xX") {
					if err := c.lossy(b, "require_reply with X (any digit): lvsctl matches the bytes exactly"); err != nil {
						return nil, err
					}
					h = strings.NewReplacer("x", "0", "X", "0").Replace(h)
				}
				s.ExpectBytes = "hex:" + h
				c.note(b, "require_reply: keepalived compares the reply from its first byte, lvsctl finds the bytes anywhere in it")
			}
		case "misc_path":
			argv, err := splitCommand(strings.Join(args, " "))
			if err != nil {
				return nil, errAt(b, "misc_path: %v", err)
			}
			s.Command = argv
		case "user":
			if len(args) < 1 || len(args) > 2 {
				return nil, errAt(b, "user: want USER [GROUP]")
			}
			s.User = args[0]
			if len(args) == 2 {
				if err := c.lossy(b, "user %s %s: lvsctl runs the program with the user's own group", args[0], args[1]); err != nil {
					return nil, err
				}
			}
		case "misc_dynamic":
			if err := c.lossy(b, "misc_dynamic: lvsctl does not set weights from the exit status"); err != nil {
				return nil, err
			}
		case "connect_ip", "bindto", "bind_port", "bind_if", "fwmark", "min_reply_length", "max_reply_length", "tls_compliant", "http_protocol":
			if err := c.lossy(b, "%s: not expressible in an lvsctl check; ignored", kw); err != nil {
				return nil, err
			}
		default:
			c.ignore(b, ch.Words[0])
		}
	}
	if s.Type == "udp" && !requireReply {
		if err := c.lossy(ch, "UDP_CHECK without require_reply passes when no ICMP error comes back; lvsctl's udp check needs a reply"); err != nil {
			return nil, err
		}
	}
	if s.Type == "exec" && len(s.Command) == 0 {
		return nil, errAt(ch, "MISC_CHECK: no misc_path")
	}
	if s.Type == "exec" && s.User == "" {
		c.note(ch, "MISC_CHECK without user: keepalived runs it as keepalived_script (or root), lvsctl as nobody")
	}
	if (s.Type == "http" || s.Type == "https") && len(urls) == 0 {
		return nil, errAt(ch, "%s: no url block", ch.Words[0])
	}
	for i, u := range urls {
		if i > 0 {
			if err := c.lossy(u, "url: lvsctl checks one URL per real server; only the first is kept"); err != nil {
				return nil, err
			}
			continue
		}
		if err := c.url(u, s); err != nil {
			return nil, err
		}
	}
	if t.retry < 0 {
		t.retry = defaultRetry
	}
	s.Fall = t.retry + 1
	s.Interval, s.Timeout = t.delayLoop, t.connectTimeout
	if s.Interval == "" {
		s.Interval = "60s"
	}
	if s.Timeout == "" {
		s.Timeout = "5s"
	}
	iv, _ := time.ParseDuration(s.Interval)
	to, _ := time.ParseDuration(s.Timeout)
	if to >= iv {
		// keepalived waits delay_loop after a probe ends; lvsctl's interval
		// runs from start to start and must exceed the timeout.
		s.Interval = (iv + to).String()
		c.note(ch, "connect_timeout %s is not below delay_loop %s: the interval becomes %s (keepalived waits delay_loop after each probe ends)", to, iv, s.Interval)
	}
	return s, nil
}

func (c *conv) url(u *Stmt, s *health.Spec) error {
	var codes []string
	for _, b := range u.Block {
		kw, args := b.Words[0], b.Words[1:]
		switch kw {
		case "path":
			if len(args) != 1 {
				return errAt(b, "path: want one value")
			}
			s.Path = args[0]
		case "status_code":
			if len(args) == 0 {
				return errAt(b, "status_code: want codes")
			}
			codes = append(codes, args...)
		case "virtualhost":
			if len(args) != 1 {
				return errAt(b, "virtualhost: want one value")
			}
			s.Host = args[0]
		case "digest", "regex", "regex_no_match", "regex_options", "regex_stack", "regex_min_offset", "regex_max_offset":
			if err := c.lossy(b, "%s: lvsctl checks the status only, not the body", kw); err != nil {
				return err
			}
		default:
			c.ignore(b, "url")
		}
	}
	if len(codes) > 0 {
		s.Expect = strings.Join(codes, ",")
	} else {
		s.Expect = "200-299" // keepalived's default, narrower than lvsctl's
	}
	return nil
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

// parseMethod reads NAT, DR or TUN [type {ipip|gue port N|gre}
// [nocsum|csum|remcsum]]: the method and, for a GUE or GRE tunnel, its
// settings (ipip, the kernel's default, is nil).
func parseMethod(b *Stmt, args []string) (string, *desired.JSONTunnel, error) {
	bad := func() (string, *desired.JSONTunnel, error) {
		return "", nil, errAt(b, "%s %s: NAT, DR or TUN [type {ipip|gue port N|gre} [nocsum|csum|remcsum]]", b.Words[0], strings.Join(args, " "))
	}
	if len(args) == 0 {
		return bad()
	}
	m := methods[strings.ToUpper(args[0])]
	if m == "" || (len(args) > 1 && m != "tunnel") {
		return bad()
	}
	rest := args[1:]
	if len(rest) == 0 {
		return m, nil, nil
	}
	if len(rest) < 2 || rest[0] != "type" {
		return bad()
	}
	tun := &desired.JSONTunnel{Type: rest[1]}
	rest = rest[2:]
	switch tun.Type {
	case "ipip":
		if len(rest) > 0 {
			return bad()
		}
		return m, nil, nil
	case "gue":
		if len(rest) < 2 || rest[0] != "port" {
			return bad()
		}
		p, err := parseUint(rest[1], 16)
		if err != nil || p == 0 {
			return bad()
		}
		tun.Port, rest = uint16(p), rest[2:]
	case "gre":
	default:
		return bad()
	}
	tun.Checksum = "nocsum"
	if len(rest) == 1 && (rest[0] == "nocsum" || rest[0] == "csum" || rest[0] == "remcsum") {
		tun.Checksum, rest = rest[0], nil
	}
	if len(rest) > 0 || (tun.Type == "gre" && tun.Checksum == "remcsum") {
		return bad()
	}
	return m, tun, nil
}

// boolArg reads keepalived's optional <BOOL>: none is true.
func boolArg(b *Stmt, args []string) (bool, error) {
	if len(args) == 0 {
		return true, nil
	}
	switch strings.ToLower(args[0]) {
	case "on", "true", "yes":
		return true, nil
	case "off", "false", "no":
		return false, nil
	}
	return false, errAt(b, "%s %q: on, off, true, false, yes or no", b.Words[0], args[0])
}

// hexString reads keepalived's free-form HEX_STR: each word is read two
// digits to a byte, and a last digit alone is a byte of its own
// ("Ab12f 3" is AB 12 0F 03). X stands for any digit.
func hexString(b *Stmt, words []string) (string, error) {
	var out strings.Builder
	for _, w := range words {
		for i := 0; i < len(w); i += 2 {
			pair := w[i:min(i+2, len(w))]
			if len(pair) == 1 {
				pair = "0" + pair
			}
			for _, ch := range pair {
				if !strings.ContainsRune("0123456789abcdefABCDEFxX", ch) {
					return "", errAt(b, "%s %q: not hexadecimal", b.Words[0], w)
				}
			}
			out.WriteString(pair)
		}
	}
	if out.Len() == 0 {
		return "", errAt(b, "%s: want hexadecimal bytes", b.Words[0])
	}
	return strings.ToLower(out.String()), nil
}
