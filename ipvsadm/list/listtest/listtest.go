// Package listtest holds what listing tests need beside the fake kernel.
//
// Beside ipvs/ipvstest, it has a Table read back from ipvsadm's own numeric
// listings (any format), and read-only doubles serving tables as written
// down.
//
// The transcript replays use the Table for what a recording VM had and the
// fake cannot produce: the counters and rates traffic left, and the order
// the kernel's hash buckets dump services in. Client serves a Table a
// test wrote down directly, services and destinations in the order given
// and with any counters, without building it through requests;
// Generated (generated.go) serves large synthetic tables without holding
// them.
//
// Facts gathered from several outputs are merged; two outputs that disagree
// about a value are reported as an error, so a test cannot silently compare
// against a table that never existed. Scaled counters (802514K) are kept
// only as long as no exact value is known.
package listtest

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/notation"
)

// Table is an IPVS table in kernel dump order.
type Table struct {
	Info     ipvs.Info
	Services []*Entry

	byKey  map[string]*Entry
	facts  map[string]string // fact name → value text, to find disagreements
	approx map[*uint64]uint64
	exact  map[*uint64]bool
}

// Entry is one service and its destinations in dump order.
type Entry struct {
	Svc   ipvs.Service
	Stats ipvs.Stats // the service's counters
	Dests []*ipvs.DestinationEntry

	key    string
	byDest map[string]*ipvs.DestinationEntry
}

// New returns an empty table with the version and size Debian 12's kernel
// reports.
func New() *Table {
	return &Table{
		Info:   ipvs.Info{Version: 0x010201, ConnTabSize: 4096},
		byKey:  map[string]*Entry{},
		facts:  map[string]string{},
		approx: map[*uint64]uint64{},
		exact:  map[*uint64]bool{},
	}
}

// listing formats, recognised from title lines.
type format int

const (
	fmtNone format = iota
	fmtDefault
	fmtTunInfo
	fmtStats
	fmtRate
	fmtThresholds
	fmtPersistConn
)

// Add merges everything text says about the table. text may hold several
// numeric listings (with or without header, any format); lines of the form
// "rc=N" (from "echo rc=$?") are ignored.
func (t *Table) Add(text string) error {
	f := fmtNone
	var cur *Entry
	for n, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		var err error
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "rc="):
			continue
		case strings.HasPrefix(line, "IP Virtual Server version "):
			err = t.header(line)
		case strings.HasPrefix(line, "Prot LocalAddress:Port"):
			f = titleFormat(line)
			cur = nil
		case line == "  -> RemoteAddress:Port":
		case strings.HasPrefix(line, "  -> RemoteAddress:Port"):
			if strings.Contains(line, "TunnelInfo") {
				f = fmtTunInfo
			}
		case strings.HasPrefix(line, "  -> "):
			if cur == nil {
				err = fmt.Errorf("destination without service")
				break
			}
			err = t.destLine(cur, f, line)
		default:
			if f == fmtNone {
				err = fmt.Errorf("service line outside a listing")
				break
			}
			cur, err = t.serviceLine(f, line)
		}
		if err != nil {
			return fmt.Errorf("line %d %q: %w", n+1, line, err)
		}
	}
	return nil
}

func titleFormat(line string) format {
	switch {
	case strings.Contains(line, "Conns"):
		return fmtStats
	case strings.Contains(line, "CPS"):
		return fmtRate
	case strings.Contains(line, "Uthreshold"):
		return fmtThresholds
	case strings.Contains(line, "PersistConn"):
		return fmtPersistConn
	}
	return fmtDefault
}

func (t *Table) header(line string) error {
	var a, b, c, size uint32
	if _, err := fmt.Sscanf(line, "IP Virtual Server version %d.%d.%d (size=%d)", &a, &b, &c, &size); err != nil {
		return err
	}
	t.Info = ipvs.Info{Version: a<<16 | b<<8 | c, ConnTabSize: size}
	return nil
}

// fact records that name has value; a different earlier value is an error.
func (t *Table) fact(name, value string) error {
	if old, ok := t.facts[name]; ok && old != value {
		return fmt.Errorf("%s: %q here, %q elsewhere", name, value, old)
	}
	t.facts[name] = value
	return nil
}

// setUint records an exact number.
func (t *Table) setUint(name string, dst *uint64, v uint64) error {
	if err := t.fact(name, strconv.FormatUint(v, 10)); err != nil {
		return err
	}
	*dst = v
	t.exact[dst] = true
	return nil
}

// setLargeNum records a number printed by largenum: exact when it has no
// unit suffix, else an approximation used only while no exact value is
// known.
func (t *Table) setLargeNum(name string, dst *uint64, text string) error {
	units := map[byte]uint64{'K': 1e3, 'M': 1e6, 'G': 1e9, 'T': 1e12}
	if m, ok := units[text[len(text)-1]]; ok {
		v, err := strconv.ParseUint(text[:len(text)-1], 10, 64)
		if err != nil {
			return err
		}
		if !t.exact[dst] {
			*dst = v * m
		}
		t.approx[dst] = v * m
		return nil
	}
	v, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return err
	}
	return t.setUint(name, dst, v)
}

// entry returns the service with the given designator, creating it.
func (t *Table) entry(svc ipvs.Service) *Entry {
	key := ServiceKey(&svc)
	if e, ok := t.byKey[key]; ok {
		return e
	}
	if svc.Family == ipvs.AFInet {
		svc.Netmask = 0xffffffff
	} else {
		svc.Netmask = 128
	}
	e := &Entry{Svc: svc, key: key, byDest: map[string]*ipvs.DestinationEntry{}}
	t.byKey[key] = e
	t.Services = append(t.Services, e)
	return e
}

// dest returns the destination of e at addr:port, creating it.
func (e *Entry) dest(addr netip.Addr, port uint16) *ipvs.DestinationEntry {
	key := addrPortKey(addr, port)
	if d, ok := e.byDest[key]; ok {
		return d
	}
	fam := ipvs.AFInet
	if addr.Is6() {
		fam = ipvs.AFInet6
	}
	d := &ipvs.DestinationEntry{Destination: ipvs.Destination{Family: fam, Addr: addr, Port: port, Weight: 1, FwdMethod: ipvs.FwdRoute}}
	e.byDest[key] = d
	e.Dests = append(e.Dests, d)
	return d
}

// ServiceKey names a service the way the numeric listing does, e.g.
// "TCP 10.0.0.1:80", "FWM 2 IPv6".
func ServiceKey(s *ipvs.Service) string {
	if s.FWMark != 0 {
		k := "FWM " + strconv.FormatUint(uint64(s.FWMark), 10)
		if s.Family == ipvs.AFInet6 {
			k += " IPv6"
		}
		return k
	}
	return strconv.Itoa(int(s.Protocol)) + " " + addrPortKey(s.Addr, s.Port)
}

func addrPortKey(a netip.Addr, port uint16) string {
	return netip.AddrPortFrom(a, port).String()
}

// parseAddrPort reads "a.b.c.d:port" or "[v6]:port".
func parseAddrPort(s string) (netip.Addr, uint16, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.Addr{}, 0, err
	}
	return ap.Addr(), ap.Port(), nil
}

// serviceDesignator parses the designator at the start of fields and
// returns the service identity and the remaining fields.
func serviceDesignator(fields []string) (ipvs.Service, []string, error) {
	var s ipvs.Service
	if len(fields) < 2 {
		return s, nil, fmt.Errorf("short service line")
	}
	if fields[0] == "FWM" {
		mark, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return s, nil, err
		}
		s.FWMark, s.Family = uint32(mark), ipvs.AFInet
		rest := fields[2:]
		if len(rest) > 0 && rest[0] == "IPv6" {
			s.Family = ipvs.AFInet6
			rest = rest[1:]
		}
		return s, rest, nil
	}
	proto, ok := notation.ProtocolNamed(fields[0])
	if !ok {
		return s, nil, fmt.Errorf("unknown protocol %q", fields[0])
	}
	addr, port, err := parseAddrPort(fields[1])
	if err != nil {
		return s, nil, err
	}
	s.Protocol, s.Addr, s.Port, s.Family = proto, addr, port, ipvs.AFInet
	if addr.Is6() {
		s.Family = ipvs.AFInet6
	}
	return s, fields[2:], nil
}

// schedFlagBits turns a listing's flag text back into bits. An empty text
// can only come from the SCHED3 bit under sh or mh.
func schedFlagBits(text string) (ipvs.ServiceFlags, error) {
	if text == "" {
		return ipvs.FlagSched3, nil
	}
	bits := map[string]ipvs.ServiceFlags{
		"flag-1": ipvs.FlagSched1, "flag-2": ipvs.FlagSched2, "flag-3": ipvs.FlagSched3,
		"sh-fallback": ipvs.FlagSched1, "sh-port": ipvs.FlagSched2,
		"mh-fallback": ipvs.FlagSched1, "mh-port": ipvs.FlagSched2,
	}
	var f ipvs.ServiceFlags
	for _, item := range strings.Split(text, ",") {
		b, ok := bits[item]
		if !ok {
			return 0, fmt.Errorf("unknown scheduler flag %q", item)
		}
		f |= b
	}
	return f, nil
}

// parseMask reads a listing's or rule's mask for a service family.
func parseMask(family ipvs.Family, text string) (uint32, error) {
	if family == ipvs.AFInet6 {
		v, err := strconv.ParseUint(text, 10, 32)
		return uint32(v), err
	}
	a, err := netip.ParseAddr(text)
	if err != nil || !a.Is4() {
		return 0, fmt.Errorf("bad mask %q", text)
	}
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]), nil
}

func (t *Table) serviceLine(f format, line string) (*Entry, error) {
	id, rest, err := serviceDesignator(strings.Fields(line))
	if err != nil {
		return nil, err
	}
	e := t.entry(id)
	s := &e.Svc
	k := e.key + "/"
	switch f {
	case fmtStats, fmtRate:
		return e, t.statColumns(k, &e.Stats, f, rest, false)
	}
	if len(rest) == 0 {
		return nil, fmt.Errorf("no scheduler")
	}
	if err := t.fact(k+"sched", rest[0]); err != nil {
		return nil, err
	}
	s.Scheduler = rest[0]
	rest = rest[1:]
	var flags ipvs.ServiceFlags
	if len(rest) > 0 && strings.HasPrefix(rest[0], "(") {
		bits, err := schedFlagBits(strings.TrimSuffix(strings.TrimPrefix(rest[0], "("), ")"))
		if err != nil {
			return nil, err
		}
		flags |= bits
		rest = rest[1:]
	}
	for len(rest) > 0 {
		switch {
		case rest[0] == "persistent" && len(rest) > 1:
			v, err := strconv.ParseUint(rest[1], 10, 32)
			if err != nil {
				return nil, err
			}
			flags |= ipvs.FlagPersistent
			if err := t.fact(k+"timeout", rest[1]); err != nil {
				return nil, err
			}
			s.Timeout = uint32(v)
			rest = rest[2:]
		case rest[0] == "mask" && len(rest) > 1:
			m, err := parseMask(s.Family, rest[1])
			if err != nil {
				return nil, err
			}
			if err := t.fact(k+"mask", rest[1]); err != nil {
				return nil, err
			}
			s.Netmask = m
			rest = rest[2:]
		case rest[0] == "pe" && len(rest) > 1:
			if err := t.fact(k+"pe", rest[1]); err != nil {
				return nil, err
			}
			s.PEName = rest[1]
			rest = rest[2:]
		case rest[0] == "ops":
			flags |= ipvs.FlagOnePacket
			rest = rest[1:]
		default:
			return nil, fmt.Errorf("unexpected %q", rest[0])
		}
	}
	if err := t.fact(k+"flags", strconv.FormatUint(uint64(flags), 10)); err != nil {
		return nil, err
	}
	s.Flags = flags
	return e, nil
}

// statColumns reads the five --stats or --rate numbers of a line.
func (t *Table) statColumns(k string, st *ipvs.Stats, f format, cols []string, dest bool) error {
	if len(cols) != 5 {
		return fmt.Errorf("want 5 numbers, have %d", len(cols))
	}
	names := [5]string{"conns", "inpkts", "outpkts", "inbytes", "outbytes"}
	dsts := [5]*uint64{&st.Conns, &st.InPkts, &st.OutPkts, &st.InBytes, &st.OutBytes}
	if f == fmtRate {
		names = [5]string{"cps", "inpps", "outpps", "inbps", "outbps"}
		dsts = [5]*uint64{&st.CPS, &st.InPPS, &st.OutPPS, &st.InBPS, &st.OutBPS}
	}
	for i, c := range cols {
		if f == fmtRate && dest && i < 3 {
			// Destination rates are printed unscaled.
			v, err := strconv.ParseUint(c, 10, 64)
			if err != nil {
				return err
			}
			if err := t.setUint(k+names[i], dsts[i], v); err != nil {
				return err
			}
			continue
		}
		if err := t.setLargeNum(k+names[i], dsts[i], c); err != nil {
			return err
		}
	}
	return nil
}

func (t *Table) destLine(e *Entry, f format, line string) error {
	fields := strings.Fields(strings.TrimPrefix(line, "  -> "))
	if len(fields) == 0 {
		return fmt.Errorf("empty destination line")
	}
	addr, port, err := parseAddrPort(fields[0])
	if err != nil {
		return err
	}
	d := e.dest(addr, port)
	k := e.key + "/" + fields[0] + "/"
	cols := fields[1:]
	nums := func(names ...string) ([]uint32, error) {
		if len(cols) != len(names) {
			return nil, fmt.Errorf("want %d columns, have %d", len(names), len(cols))
		}
		out := make([]uint32, len(cols))
		for i, c := range cols {
			v, err := strconv.ParseInt(c, 10, 64)
			if err != nil {
				return nil, err
			}
			if err := t.fact(k+names[i], c); err != nil {
				return nil, err
			}
			out[i] = uint32(v)
		}
		return out, nil
	}
	switch f {
	case fmtStats, fmtRate:
		return t.statColumns(k, &d.Stats, f, cols, true)
	case fmtThresholds:
		v, err := nums("uthresh", "lthresh", "active", "inactive")
		if err != nil {
			return err
		}
		d.UThreshold, d.LThreshold, d.ActiveConns, d.InactConns = v[0], v[1], v[2], v[3]
		return nil
	case fmtPersistConn:
		v, err := nums("weight", "persist", "active", "inactive")
		if err != nil {
			return err
		}
		d.Weight, d.PersistConns, d.ActiveConns, d.InactConns = v[0], v[1], v[2], v[3]
		return nil
	}
	if len(cols) == 0 {
		return fmt.Errorf("no forwarding method")
	}
	fwd, ok := notation.MethodNamed(cols[0])
	if !ok {
		return fmt.Errorf("unknown forwarding method %q", cols[0])
	}
	if err := t.fact(k+"fwd", cols[0]); err != nil {
		return err
	}
	d.FwdMethod = fwd
	cols = cols[1:]
	if f == fmtTunInfo {
		if len(cols) == 0 {
			return fmt.Errorf("no tunnel info")
		}
		if err := t.tunInfo(k, &d.Destination, cols[0]); err != nil {
			return err
		}
		cols = cols[1:]
	}
	v, err := nums("weight", "active", "inactive")
	if err != nil {
		return err
	}
	d.Weight, d.ActiveConns, d.InactConns = v[0], v[1], v[2]
	return nil
}

var (
	tunTypes  = map[string]ipvs.TunType{"ipip": ipvs.TunIPIP, "gue": ipvs.TunGUE, "gre": ipvs.TunGRE}
	csumTexts = map[string]ipvs.TunFlags{"-c": ipvs.TunFlagNoCsum, "+c": ipvs.TunFlagCsum, "r+c": ipvs.TunFlagRemCsum}
)

// tunInfo reads a --tun-info column: n/a, ipip, gue:<port>:<csum>, gre:<csum>.
func (t *Table) tunInfo(k string, d *ipvs.Destination, text string) error {
	if text == "n/a" {
		return nil
	}
	parts := strings.Split(text, ":")
	typ, ok := tunTypes[parts[0]]
	if !ok {
		return fmt.Errorf("unknown tunnel info %q", text)
	}
	d.TunType = typ
	switch {
	case typ == ipvs.TunGUE && len(parts) == 3:
		p, err := strconv.ParseUint(parts[1], 10, 16)
		if err != nil {
			return err
		}
		d.TunPort = uint16(p)
		d.TunFlags = csumTexts[parts[2]]
	case typ == ipvs.TunGRE && len(parts) == 2:
		d.TunFlags = csumTexts[parts[1]]
	case typ == ipvs.TunIPIP && len(parts) == 1:
	default:
		return fmt.Errorf("bad tunnel info %q", text)
	}
	return t.fact(k+"tun", fmt.Sprint(d.TunType, d.TunPort, d.TunFlags))
}

// Client serves a Table as an ipvs.Reader.
type Client struct {
	T *Table
	// Timeout and DaemonList are what Timeouts and Daemons report.
	Timeout    ipvs.Timeouts
	DaemonList []ipvs.Daemon
	// DestCalls counts Destinations calls, for streaming checks.
	DestCalls int
}

var _ ipvs.Reader = (*Client)(nil)

// Info reports the table's version and size.
func (c *Client) Info() (ipvs.Info, error) { return c.T.Info, nil }

// Services returns copies of the services in table order.
func (c *Client) Services() ([]ipvs.ServiceEntry, error) {
	out := make([]ipvs.ServiceEntry, len(c.T.Services))
	for i, e := range c.T.Services {
		out[i] = ipvs.ServiceEntry{Service: e.Svc, Stats: e.Stats}
	}
	return out, nil
}

// find returns the entry matching key as the kernel matches services:
// fwmark and family, or family, protocol, address and port.
func (c *Client) find(key ipvs.Service) *Entry {
	for _, e := range c.T.Services {
		s := &e.Svc
		if key.FWMark != 0 {
			if s.FWMark == key.FWMark && s.Family == key.Family {
				return e
			}
			continue
		}
		if s.FWMark == 0 && s.Family == key.Family && s.Protocol == key.Protocol && s.Addr == key.Addr && s.Port == key.Port {
			return e
		}
	}
	return nil
}

// Service returns the service matching key, or ESRCH.
func (c *Client) Service(key ipvs.Service) (ipvs.ServiceEntry, error) {
	if e := c.find(key); e != nil {
		return ipvs.ServiceEntry{Service: e.Svc, Stats: e.Stats}, nil
	}
	return ipvs.ServiceEntry{}, unix.ESRCH
}

// Destinations returns copies of a service's destinations in table order.
func (c *Client) Destinations(svc ipvs.Service) ([]ipvs.DestinationEntry, error) {
	c.DestCalls++
	e := c.find(svc)
	if e == nil {
		return nil, unix.ESRCH
	}
	out := make([]ipvs.DestinationEntry, len(e.Dests))
	for i, d := range e.Dests {
		out[i] = *d
	}
	return out, nil
}

// Timeouts returns c.Timeout.
func (c *Client) Timeouts() (ipvs.Timeouts, error) { return c.Timeout, nil }

// Daemons returns c.DaemonList.
func (c *Client) Daemons() ([]ipvs.Daemon, error) { return c.DaemonList, nil }
