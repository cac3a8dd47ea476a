// Package ipvstest provides Fake, an in-memory ipvs.Client that behaves like
// the kernel's IPVS control plane of one fresh network namespace (Linux 6.1,
// net/netfilter/ipvs/ip_vs_ctl.c and ip_vs_sync.c): the same stored values,
// the same errnos, checked in the kernel's order, and the same dump order
// where the kernel's order is reproducible.
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
	"strings"

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

// DefaultPersistenceEngines are the persistence engines Debian 12's kernel
// provides.
var DefaultPersistenceEngines = []string{"sip"}

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
		pes:        set(DefaultPersistenceEngines),
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

// Info reports the configured version and connection table size.
func (f *Fake) Info() (ipvs.Info, error) {
	if err := f.injected(ipvs.CmdGetInfo); err != nil {
		return ipvs.Info{}, err
	}
	return f.info, nil
}

// Services lists address services, then fwmark services.
func (f *Fake) Services() ([]ipvs.ServiceEntry, error) {
	if err := f.injected(ipvs.CmdGetService); err != nil {
		return nil, err
	}
	var out []ipvs.ServiceEntry
	for _, fwm := range []bool{false, true} {
		for _, s := range f.services {
			if (s.svc.FWMark != 0) == fwm {
				out = append(out, s.svc)
			}
		}
	}
	return out, nil
}

// Service returns the service identified by key, or ESRCH.
func (f *Fake) Service(key ipvs.Service) (ipvs.ServiceEntry, error) {
	if err := f.injected(ipvs.CmdGetService); err != nil {
		return ipvs.ServiceEntry{}, err
	}
	if !validFamily(key.Family) {
		return ipvs.ServiceEntry{}, &ipvs.OpError{Op: ipvs.CmdGetService, Err: unix.EAFNOSUPPORT}
	}
	s := f.find(keyOf(&key))
	if s == nil {
		return ipvs.ServiceEntry{}, &ipvs.OpError{Op: ipvs.CmdGetService, Err: unix.ESRCH}
	}
	return s.svc, nil
}

// Destinations lists the service's destinations, most recently added
// first. A missing service has none (the kernel's dump ends silently).
func (f *Fake) Destinations(svc ipvs.Service) ([]ipvs.DestinationEntry, error) {
	if err := f.injected(ipvs.CmdGetDest); err != nil {
		return nil, err
	}
	if !validFamily(svc.Family) {
		return nil, nil
	}
	s := f.find(keyOf(&svc))
	if s == nil {
		return nil, nil
	}
	out := make([]ipvs.DestinationEntry, 0, len(s.dests))
	for _, d := range s.dests {
		out = append(out, *d)
	}
	return out, nil
}

// Fake hands out dumps as Conn does.
var _ ipvs.Dumper = (*Fake)(nil)

// DumpServices calls fn with each service in Services' order.
func (f *Fake) DumpServices(fn func(*ipvs.ServiceEntry) error) error {
	svcs, err := f.Services()
	if err != nil {
		return err
	}
	var s ipvs.ServiceEntry // reused, as Conn does
	var ferr error
	for i := range svcs {
		s = svcs[i]
		if ferr == nil {
			ferr = fn(&s)
		}
	}
	return ferr
}

// AppendDestinations appends the service's destinations to dst.
func (f *Fake) AppendDestinations(dst []ipvs.DestinationEntry, svc *ipvs.Service) ([]ipvs.DestinationEntry, error) {
	ds, err := f.Destinations(*svc)
	if err != nil {
		return dst, err
	}
	return append(dst, ds...), nil
}

// Timeouts reports the tcp, tcpfin and udp timeouts.
func (f *Fake) Timeouts() (ipvs.Timeouts, error) {
	if err := f.injected(ipvs.CmdGetConfig); err != nil {
		return ipvs.Timeouts{}, err
	}
	return f.timeouts, nil
}

// Daemons lists the running sync daemons, master first.
func (f *Fake) Daemons() ([]ipvs.Daemon, error) {
	if err := f.injected(ipvs.CmdGetDaemon); err != nil {
		return nil, err
	}
	var out []ipvs.Daemon
	if f.master != nil {
		out = append(out, *f.master)
	}
	if f.backup != nil {
		out = append(out, *f.backup)
	}
	return out, nil
}

// Exec applies one change with the kernel's checks, in the kernel's order.
func (f *Fake) Exec(req ipvs.Request) error {
	if err := f.injected(req.Cmd); err != nil {
		return err
	}
	if err := f.exec(&req); err != 0 {
		return &ipvs.OpError{Op: req.Cmd, Err: err}
	}
	return nil
}

// Pipeline returns a pipeline that executes each request as it is
// submitted; the window does not matter to an in-memory table.
func (f *Fake) Pipeline(window int) ipvs.Pipeline { return &pipeline{f: f} }

// Close makes every later call fail with EBADF.
func (f *Fake) Close() error {
	f.closed = true
	return nil
}

type pipeline struct{ f *Fake }

func (p *pipeline) Submit(req ipvs.Request, done func(error)) error {
	if p.f.closed {
		return &ipvs.OpError{Op: req.Cmd, Err: unix.EBADF}
	}
	err := p.f.Exec(req)
	if done != nil {
		done(err)
	}
	return nil
}

func (p *pipeline) Flush() error {
	if p.f.closed {
		return &ipvs.OpError{Op: ipvs.CmdFlush, Err: unix.EBADF}
	}
	return nil
}

// exec follows ip_vs_genl_set_cmd and ip_vs_genl_set_daemon.
func (f *Fake) exec(req *ipvs.Request) unix.Errno {
	switch req.Cmd {
	case ipvs.CmdNewDaemon:
		return f.newDaemon(req.Daemon)
	case ipvs.CmdDelDaemon:
		return f.delDaemon(req.Daemon)
	case ipvs.CmdFlush:
		f.services = nil
		clear(f.byKey)
		f.mixedDests = 0
		return 0
	case ipvs.CmdSetConfig:
		return f.setConfig(req.Timeouts)
	case ipvs.CmdZero:
		if req.Service == nil {
			for _, s := range f.services {
				s.zero()
			}
			return 0
		}
	case ipvs.CmdNewService, ipvs.CmdSetService, ipvs.CmdDelService,
		ipvs.CmdNewDest, ipvs.CmdSetDest, ipvs.CmdDelDest:
	default:
		// Exec takes changes only; the netlink client refuses the rest
		// before sending anything.
		return unix.EINVAL
	}

	// Every remaining command needs a service (ip_vs_genl_parse_service).
	u := req.Service
	if u == nil {
		return unix.EINVAL
	}
	sched, err := nulString(u.Scheduler, schedNameMax)
	if err != 0 {
		return err
	}
	pe, err := nulString(u.PEName, peNameMax)
	if err != 0 {
		return err
	}
	if !validFamily(u.Family) {
		return unix.EAFNOSUPPORT
	}
	key := keyOf(u)
	s := f.find(key)
	if req.Cmd != ipvs.CmdNewService && s == nil {
		return unix.ESRCH
	}

	var ud ipvs.Destination
	if req.Cmd == ipvs.CmdNewDest || req.Cmd == ipvs.CmdSetDest || req.Cmd == ipvs.CmdDelDest {
		if req.Dest == nil {
			return unix.EINVAL
		}
		ud = *req.Dest
		if req.Cmd == ipvs.CmdDelDest {
			// Only the identifying fields are read for a delete.
			ud = ipvs.Destination{Family: ud.Family, Addr: ud.Addr, Port: ud.Port}
		}
		ud.FwdMethod &= fwdMask
		if ud.Family == 0 {
			ud.Family = s.svc.Family
		}
		if !validFamily(ud.Family) {
			return unix.EAFNOSUPPORT
		}
		if ud.Family != s.svc.Family && req.Cmd != ipvs.CmdDelDest {
			if f.master != nil || f.backup != nil {
				return unix.EINVAL // sync protocol cannot carry mixed families
			}
			if ud.FwdMethod != ipvs.FwdTunnel {
				return unix.EINVAL
			}
		}
	}

	switch req.Cmd {
	case ipvs.CmdNewService:
		if s != nil {
			return unix.EEXIST
		}
		return f.addService(u, key, sched, pe)
	case ipvs.CmdSetService:
		return f.editService(s, u, sched, pe)
	case ipvs.CmdDelService:
		f.delService(s)
		return 0
	case ipvs.CmdZero:
		s.zero()
		return 0
	case ipvs.CmdNewDest:
		return f.addDest(s, &ud)
	case ipvs.CmdSetDest:
		return f.editDest(s, &ud)
	case ipvs.CmdDelDest:
		return f.delDest(s, &ud)
	}
	return unix.EINVAL
}

// addService follows ip_vs_add_service.
func (f *Fake) addService(u *ipvs.Service, key serviceKey, sched, pe string) unix.Errno {
	if sched != "none" && !f.schedulers[sched] {
		return unix.ENOENT
	}
	if pe != "" && !f.pes[pe] {
		return unix.ENOENT
	}
	if u.Family == ipvs.AFInet6 && (u.Netmask < 1 || u.Netmask > 128) {
		return unix.EINVAL
	}
	s := &service{key: key}
	s.svc.Service = ipvs.Service{
		Family:    u.Family,
		FWMark:    u.FWMark,
		Scheduler: sched,
		PEName:    pe,
		Flags:     u.Flags &^ ipvs.FlagHashed,
		Timeout:   f.roundTimeout(u.Timeout),
		Netmask:   u.Netmask,
	}
	if u.FWMark == 0 {
		s.svc.Protocol = u.Protocol
		s.svc.Addr = addrFromKey(key.addr, u.Family)
		s.svc.Port = u.Port
	}
	f.services = append(f.services, s)
	f.byKey[s.key] = s
	return 0
}

// editService follows ip_vs_edit_service: the new values replace the old,
// including flags (ipvsadm's mask is all ones) and the persistence engine.
func (f *Fake) editService(s *service, u *ipvs.Service, sched, pe string) unix.Errno {
	if sched != "none" && !f.schedulers[sched] {
		return unix.ENOENT
	}
	if pe != "" && !f.pes[pe] {
		return unix.ENOENT
	}
	if u.Family == ipvs.AFInet6 && (u.Netmask < 1 || u.Netmask > 128) {
		return unix.EINVAL
	}
	s.svc.Scheduler = sched
	s.svc.PEName = pe
	s.svc.Flags = u.Flags &^ ipvs.FlagHashed
	s.svc.Timeout = f.roundTimeout(u.Timeout)
	s.svc.Netmask = u.Netmask
	return 0
}

// roundTimeout stores seconds as jiffies in 32 bits and reads them back,
// as the kernel does with svc->timeout.
func (f *Fake) roundTimeout(sec uint32) uint32 {
	return (sec * f.hz) / f.hz
}

func (f *Fake) delService(s *service) {
	for _, d := range s.dests {
		if d.Family != s.svc.Family {
			f.mixedDests--
		}
	}
	for i, x := range f.services {
		if x == s {
			f.services = append(f.services[:i], f.services[i+1:]...)
			break
		}
	}
	delete(f.byKey, s.key)
}

func (s *service) zero() {
	s.svc.Stats = ipvs.Stats{}
	for _, d := range s.dests {
		d.Stats = ipvs.Stats{}
	}
}

// checkDest holds the checks ip_vs_add_dest and ip_vs_edit_dest share.
func checkDest(ud *ipvs.Destination) unix.Errno {
	if ud.Weight > intMax {
		return unix.ERANGE // the kernel's int weight is negative
	}
	if ud.LThreshold > ud.UThreshold {
		return unix.ERANGE
	}
	if ud.TunType == tunnelTypeGUE && ud.TunPort == 0 {
		return unix.EINVAL
	}
	return 0
}

// addDest follows ip_vs_add_dest and ip_vs_new_dest.
func (f *Fake) addDest(s *service, ud *ipvs.Destination) unix.Errno {
	if err := checkDest(ud); err != 0 {
		return err
	}
	addr := inetAddr(ud.Addr, ud.Family)
	if s.lookupDest(ud.Family, addr, ud.Port) != nil {
		return unix.EEXIST
	}
	if !usableDestAddr(addr, ud.Family) {
		return unix.EINVAL
	}
	d := &ipvs.DestinationEntry{}
	d.Destination = ipvs.Destination{
		Family:     ud.Family,
		Addr:       addrFromKey(addr, ud.Family),
		Port:       ud.Port,
		FwdMethod:  ud.FwdMethod,
		Weight:     ud.Weight,
		TunType:    ud.TunType,
		TunPort:    ud.TunPort,
		TunFlags:   ud.TunFlags,
		UThreshold: ud.UThreshold,
		LThreshold: ud.LThreshold,
	}
	if d.Family != s.svc.Family {
		f.mixedDests++
	}
	s.dests = append([]*ipvs.DestinationEntry{d}, s.dests...)
	return 0
}

// editDest follows ip_vs_edit_dest; the destination keeps its position.
func (f *Fake) editDest(s *service, ud *ipvs.Destination) unix.Errno {
	if err := checkDest(ud); err != 0 {
		return err
	}
	d := s.lookupDest(ud.Family, inetAddr(ud.Addr, ud.Family), ud.Port)
	if d == nil {
		return unix.ENOENT
	}
	d.FwdMethod = ud.FwdMethod
	d.Weight = ud.Weight
	d.TunType, d.TunPort, d.TunFlags = ud.TunType, ud.TunPort, ud.TunFlags
	d.UThreshold, d.LThreshold = ud.UThreshold, ud.LThreshold
	return 0
}

func (f *Fake) delDest(s *service, ud *ipvs.Destination) unix.Errno {
	addr := inetAddr(ud.Addr, ud.Family)
	for i, d := range s.dests {
		if d.Family == ud.Family && inetAddr(d.Addr, d.Family) == addr && d.Port == ud.Port {
			if d.Family != s.svc.Family {
				f.mixedDests--
			}
			s.dests = append(s.dests[:i], s.dests[i+1:]...)
			return 0
		}
	}
	return unix.ENOENT
}

func (s *service) lookupDest(family ipvs.Family, addr [16]byte, port uint16) *ipvs.DestinationEntry {
	for _, d := range s.dests {
		if d.Family == family && inetAddr(d.Addr, d.Family) == addr && d.Port == port {
			return d
		}
	}
	return nil
}

// setConfig follows ip_vs_genl_set_config and ip_vs_set_timeout: values
// are checked together against INT_MAX/HZ, then each non-zero one is set.
func (f *Fake) setConfig(t *ipvs.Timeouts) unix.Errno {
	if t == nil {
		return 0
	}
	limit := uint32(intMax / f.hz)
	if t.TCP > limit || t.TCPFin > limit || t.UDP > limit {
		return unix.EINVAL
	}
	if t.TCP != 0 {
		f.timeouts.TCP = t.TCP
	}
	if t.TCPFin != 0 {
		f.timeouts.TCPFin = t.TCPFin
	}
	if t.UDP != 0 {
		f.timeouts.UDP = t.UDP
	}
	return 0
}

// newDaemon follows ip_vs_genl_new_daemon and start_sync_thread.
func (f *Fake) newDaemon(u *ipvs.Daemon) unix.Errno {
	if u == nil {
		return unix.EINVAL
	}
	ifname, err := nulString(u.Interface, ifNameMax)
	if err != 0 {
		return err
	}
	c := ipvs.Daemon{State: u.State, Interface: ifname, SyncID: u.SyncID, MaxLen: u.MaxLen, Port: u.Port, TTL: u.TTL}
	family := ipvs.Family(0)
	switch {
	case u.Group.Is6() && !u.Group.Is4In6():
		if !u.Group.IsMulticast() {
			return unix.EINVAL
		}
		c.Group, family = u.Group, ipvs.AFInet6
	case u.Group.IsValid():
		g := u.Group.Unmap()
		if !g.IsMulticast() {
			return unix.EINVAL
		}
		c.Group, family = g, ipvs.AFInet
	}
	if f.mixedDests > 0 {
		return unix.EINVAL
	}
	if family == 0 {
		c.Group, family = netip.MustParseAddr(syncGroup), ipvs.AFInet
	}
	if c.Port == 0 {
		c.Port = syncPort
	}
	if c.TTL == 0 {
		c.TTL = 1
	}
	mtu, ok := f.ifaces[c.Interface]
	if !ok {
		return unix.ENODEV
	}
	hlen := ipv4UDPHeaders
	if family == ipvs.AFInet6 {
		hlen = ipv6UDPHeaders
	}
	useMTU, minMTU := defaultMTU, 1
	if c.State == stateBackup {
		useMTU, minMTU = min(max(mtu, defaultMTU), 65535), backupMinMaxLen
	}
	if c.MaxLen != 0 {
		c.MaxLen = uint16(min(max(int(c.MaxLen), minMTU), 65535-hlen))
	} else {
		c.MaxLen = uint16(useMTU - hlen)
	}
	switch c.State {
	case stateMaster:
		if f.master != nil {
			return unix.EEXIST
		}
		f.master = &c
	case stateBackup:
		if f.backup != nil {
			return unix.EEXIST
		}
		f.backup = &c
	default:
		return unix.EINVAL
	}
	return 0
}

// delDaemon follows ip_vs_genl_del_daemon and stop_sync_thread.
func (f *Fake) delDaemon(u *ipvs.Daemon) unix.Errno {
	if u == nil {
		return unix.EINVAL
	}
	if _, err := nulString(u.Interface, ifNameMax); err != 0 {
		return err
	}
	switch u.State {
	case stateMaster:
		if f.master == nil {
			return unix.ESRCH
		}
		f.master = nil
	case stateBackup:
		if f.backup == nil {
			return unix.ESRCH
		}
		f.backup = nil
	default:
		return unix.EINVAL
	}
	return 0
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

// usableDestAddr follows ip_vs_new_dest's address checks in a namespace
// whose only interface is lo (127.0.0.1/8, ::1): IPv4 must be local or
// unicast (inet_addr_type), IPv6 unicast and not link-local unless local.
func usableDestAddr(raw [16]byte, family ipvs.Family) bool {
	a := addrFromKey(raw, family)
	if family == ipvs.AFInet6 {
		switch {
		case a.IsUnspecified(), a.IsMulticast(), a.IsLinkLocalUnicast():
			return false
		case a.Is4In6(): // IPV6_ADDR_MAPPED is not unicast
			return false
		}
		return true
	}
	v4 := a.As4()
	switch {
	case v4 == [4]byte{}: // RTN_BROADCAST; the rest of 0.0.0.0/8 is unicast since Linux 5.3
		return false
	case v4 == [4]byte{255, 255, 255, 255}:
		return false
	case a.IsMulticast():
		return false
	case v4 == [4]byte{127, 255, 255, 255}: // lo's broadcast route
		return false
	}
	return true
}

// nulString applies the kernel's NLA_NUL_STRING policy to a string sent
// NUL-terminated: the first NUL must come within max+1 bytes (else
// EINVAL), the whole attribute must fit max characters (else ERANGE), and
// the kernel uses the text up to the first NUL.
func nulString(s string, max int) (string, unix.Errno) {
	nul := strings.IndexByte(s, 0)
	if nul < 0 {
		nul = len(s)
	}
	if nul > max {
		return "", unix.EINVAL
	}
	if len(s) > max {
		return "", unix.ERANGE
	}
	return s[:nul], 0
}
