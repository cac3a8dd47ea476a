// Package ipvstest provides Fake, an in-memory ipvs.Client that behaves like
// the kernel.
//
// Fake is the kernel's IPVS control plane of one fresh network namespace
// (Linux 6.1, net/netfilter/ipvs/ip_vs_ctl.c and ip_vs_sync.c): the same
// stored values, the same errnos, checked in the kernel's order, and the
// same dump order where the kernel's order is reproducible.
//
// It lets everything above package ipvs be tested on a host without IPVS.
// Package ipvs/conformance runs one suite against Fake and, in the lab,
// against the real kernel, so the two cannot drift apart unnoticed.
//
// What the fake cannot reproduce: the order of a service dump (the kernel
// walks a hash table whose keys mix in a kernel pointer); the fake lists
// address services in insertion order, then fwmark services in insertion
// order, and callers must not depend on it. Traffic does not exist, so
// counters stay zero unless a test sets them (SetServiceStats,
// SetDestinationCounters).
package ipvstest

import (
	"net/netip"

	"github.com/lvskit/lvskit/ipvs"
	"golang.org/x/sys/unix"
)

// Kernel constants the fake's checks depend on.
const (
	ipvsVersion     = 0x010201 // IP_VS_VERSION_CODE: 1.2.1
	connTabSize     = 4096     // default ip_vs_conn_tab_bits 12
	schedNameMax    = 15       // IP_VS_SCHEDNAME_MAXLEN - 1
	peNameMax       = 16       // IP_VS_PENAME_MAXLEN
	ifNameMax       = 15       // IP_VS_IFNAME_MAXLEN - 1
	defaultHZ       = 250      // Debian's CONFIG_HZ
	syncGroup       = "224.0.0.81"
	syncPort        = 8848
	loopbackMTU     = 65536
	defaultMTU      = 1500
	ipv4UDPHeaders  = 20 + 8
	ipv6UDPHeaders  = 40 + 8
	intMax          = 1<<31 - 1
	fwdMask         = 7
	tunnelTypeGUE   = 1
	defaultTCP      = 900
	defaultTCPFin   = 120
	defaultUDP      = 300
	stateMaster     = 1
	stateBackup     = 2
	backupMinMaxLen = 1024
)

// DefaultSchedulers are the schedulers Debian 12's kernel provides.
var DefaultSchedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "fo", "ovf", "mh"}

// defaultPersistenceEngines are the persistence engines Debian 12's kernel
// provides.
var defaultPersistenceEngines = []string{"sip"}

// Option configures a Fake.
type Option func(*Fake)

// WithInterfaces sets the network interfaces of the fake namespace (default
// just "lo"). Sync daemons need one; "lo" has the loopback MTU (65536),
// others 1500.
func WithInterfaces(names ...string) Option {
	return func(f *Fake) {
		f.ifaces = map[string]int{}
		for _, n := range names {
			mtu := defaultMTU
			if n == "lo" {
				mtu = loopbackMTU
			}
			f.ifaces[n] = mtu
		}
	}
}

// WithInfo sets what Info reports (default version 1.2.1, size 4096).
func WithInfo(info ipvs.Info) Option {
	return func(f *Fake) { f.info = info }
}

func set(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// Fake is an in-memory IPVS of one network namespace. It implements
// ipvs.Client and ipvs.Dumper. Like the real client it is not safe for
// concurrent use.
type Fake struct {
	info       ipvs.Info
	schedulers map[string]bool
	pes        map[string]bool
	ifaces     map[string]int // name → MTU
	hz         uint32

	services   []*service // insertion order
	byKey      map[serviceKey]*service
	timeouts   ipvs.Timeouts
	master     *ipvs.Daemon
	backup     *ipvs.Daemon
	mixedDests int // destinations whose family differs from their service's
	failures   map[ipvs.Op][]error
	closed     bool
}

type service struct {
	svc   ipvs.ServiceEntry
	key   serviceKey
	dests []*ipvs.DestinationEntry // most recently added first, as the kernel lists them
}

// serviceKey is what the kernel compares to find a service: the family and
// fwmark, or the family, protocol, address (4 bytes for IPv4) and port.
type serviceKey struct {
	family   ipvs.Family
	fwmark   uint32
	protocol ipvs.Protocol
	addr     [16]byte
	port     uint16
}

// New returns a fake IPVS with an empty table, default timeouts and no
// sync daemons.
func New(opts ...Option) *Fake {
	f := &Fake{
		info:       ipvs.Info{Version: ipvsVersion, ConnTabSize: connTabSize},
		schedulers: set(DefaultSchedulers),
		pes:        set(defaultPersistenceEngines),
		ifaces:     map[string]int{"lo": loopbackMTU},
		hz:         defaultHZ,
		timeouts:   ipvs.Timeouts{TCP: defaultTCP, TCPFin: defaultTCPFin, UDP: defaultUDP},
		failures:   map[ipvs.Op][]error{},
		byKey:      map[serviceKey]*service{},
	}
	for _, o := range opts {
		o(f)
	}
	return f
}

// FailNext makes the next operation of kind op fail with err (typically a
// unix.Errno) instead of running; calls queue up. Read operations use
// ipvs.CmdGetService (Services and Service), CmdGetDest, CmdGetDaemon,
// CmdGetConfig and CmdGetInfo.
func (f *Fake) FailNext(op ipvs.Op, err error) {
	f.failures[op] = append(f.failures[op], err)
}

// FailNth makes the n-th next operation of kind op (from 1) fail with
// err; the ones before it run.
func (f *Fake) FailNth(op ipvs.Op, n int, err error) {
	for range n - 1 {
		f.failures[op] = append(f.failures[op], nil)
	}
	f.FailNext(op, err)
}

func (f *Fake) injected(op ipvs.Op) error {
	if f.closed {
		return &ipvs.OpError{Op: op, Err: unix.EBADF}
	}
	q := f.failures[op]
	if len(q) == 0 {
		return nil
	}
	err := q[0]
	f.failures[op] = q[1:]
	if err == nil {
		return nil
	}
	return &ipvs.OpError{Op: op, Err: err}
}

// SetServiceStats sets the counters the service identified by key reports,
// standing in for traffic the fake cannot see.
func (f *Fake) SetServiceStats(key ipvs.Service, stats ipvs.Stats) error {
	s := f.find(keyOf(&key))
	if s == nil {
		return &ipvs.OpError{Op: ipvs.CmdGetService, Err: unix.ESRCH}
	}
	s.svc.Stats = stats
	return nil
}

// SetDestinationCounters sets the counters n of the destination of svc
// with d's family, address and port.
func (f *Fake) SetDestinationCounters(svc ipvs.Service, d ipvs.Destination, n ipvs.DestCounters) error {
	s := f.find(keyOf(&svc))
	if s == nil {
		return &ipvs.OpError{Op: ipvs.CmdGetDest, Err: unix.ESRCH}
	}
	family := d.Family
	if family == 0 {
		family = s.svc.Family
	}
	dst := s.lookupDest(family, inetAddr(d.Addr, family), d.Port)
	if dst == nil {
		return &ipvs.OpError{Op: ipvs.CmdGetDest, Err: unix.ENOENT}
	}
	dst.DestCounters = n
	return nil
}

// SetServiceOrder puts the services identified by keys first, in that
// order, and the others after them in their order. The kernel dumps
// services in the order of its hash buckets, which depends on the network
// namespace's address and so cannot be derived; a test that replays a
// recorded listing gives the order the listing shows. A key no service has
// is an error.
func (f *Fake) SetServiceOrder(keys []ipvs.Service) error {
	ordered := make([]*service, 0, len(f.services))
	placed := make(map[*service]bool, len(keys))
	for i := range keys {
		s := f.find(keyOf(&keys[i]))
		if s == nil {
			return &ipvs.OpError{Op: ipvs.CmdGetService, Err: unix.ESRCH}
		}
		if !placed[s] {
			placed[s] = true
			ordered = append(ordered, s)
		}
	}
	for _, s := range f.services {
		if !placed[s] {
			ordered = append(ordered, s)
		}
	}
	f.services = ordered
	return nil
}

// Close makes every later call fail with EBADF.
func (f *Fake) Close() error {
	f.closed = true
	return nil
}

func (f *Fake) find(k serviceKey) *service { return f.byKey[k] }

func validFamily(af ipvs.Family) bool { return af == ipvs.AFInet || af == ipvs.AFInet6 }

// keyOf builds the lookup key from what a request carries: the fwmark
// alone, or protocol, address and port.
func keyOf(s *ipvs.Service) serviceKey {
	k := serviceKey{family: s.Family}
	if s.FWMark != 0 {
		k.fwmark = s.FWMark
		return k
	}
	k.protocol = s.Protocol
	k.addr = inetAddr(s.Addr, s.Family)
	k.port = s.Port
	return k
}

// inetAddr is the address as the kernel holds it (union nf_inet_addr),
// reduced to what it compares: four bytes for IPv4, sixteen for IPv6.
func inetAddr(a netip.Addr, family ipvs.Family) [16]byte {
	var raw [16]byte
	switch {
	case !a.IsValid():
	case family == ipvs.AFInet6 && a.Is6():
		raw = a.As16()
	case a.Is4() || a.Is4In6():
		v4 := a.Unmap().As4()
		copy(raw[:], v4[:])
	default:
		raw = a.As16()
	}
	if family != ipvs.AFInet6 {
		clear(raw[4:])
	}
	return raw
}

func addrFromKey(raw [16]byte, family ipvs.Family) netip.Addr {
	if family == ipvs.AFInet6 {
		return netip.AddrFrom16(raw)
	}
	return netip.AddrFrom4([4]byte(raw[:4]))
}
