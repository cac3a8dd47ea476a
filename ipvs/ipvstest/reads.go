package ipvstest

// The reads: Info, the service and destination dumps, timeouts, daemons.

import (
	"github.com/lvskit/lvskit/ipvs"
	"golang.org/x/sys/unix"
)

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
