package ipvstest

// The changes: Exec, its pipeline, and each command's checks in kernel order.

import (
	"net/netip"
	"strings"

	"github.com/lvskit/lvskit/ipvs"
	"golang.org/x/sys/unix"
)

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
