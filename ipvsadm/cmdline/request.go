package cmdline

import (
	"net/netip"

	"github.com/lvskit/lvskit/ipvs"
)

// ServiceKey is the service as ipvsadm sends it to identify it: family and
// fwmark for fwmark services (no protocol, no address), otherwise family,
// protocol, address and port, plus the settings given on the line.
func (inv *Invocation) ServiceKey() ipvs.Service {
	var s ipvs.Service
	inv.putServiceKey(&s)
	return s
}

// putServiceKey writes ServiceKey to *s without a copy in between.
func (inv *Invocation) putServiceKey(s *ipvs.Service) {
	*s = inv.Service
	if s.FWMark != 0 {
		s.Protocol = 0
		s.Addr = netip.Addr{}
		s.Port = 0
	} else if !s.Addr.IsValid() {
		// No service option: ipvsadm's zeroed structure.
		if s.Family == ipvs.AFInet6 {
			s.Addr = netip.IPv6Unspecified()
		} else {
			s.Addr = netip.IPv4Unspecified()
		}
	}
}

// Request returns the change the invocation asks the kernel for, and false
// for commands that only read (list, save), restore, help and version.
func (inv *Invocation) Request() (ipvs.Request, bool) {
	return inv.RequestIn(new(RequestBuffer))
}

// RequestBuffer holds the values a Request points to, so that a loop
// building one request after another need not allocate.
type RequestBuffer struct {
	service  ipvs.Service
	dest     ipvs.Destination
	daemon   ipvs.Daemon
	timeouts ipvs.Timeouts
}

// RequestIn is Request with the values kept in b: the request is valid
// until b is used again.
func (inv *Invocation) RequestIn(b *RequestBuffer) (ipvs.Request, bool) {
	svc, dest := &b.service, &b.dest
	inv.putServiceKey(svc)
	*dest = inv.Dest
	switch inv.Command {
	case CmdAddService:
		return ipvs.Request{Cmd: ipvs.CmdNewService, Service: svc}, true
	case CmdEditService:
		return ipvs.Request{Cmd: ipvs.CmdSetService, Service: svc}, true
	case CmdDeleteService:
		return ipvs.Request{Cmd: ipvs.CmdDelService, Service: svc}, true
	case CmdZero:
		// libipvs sends the service only when something identifies one, so
		// "-Z -t 0.0.0.0:0" zeroes every counter.
		if svc.FWMark == 0 && svc.Addr.IsUnspecified() && svc.Port == 0 {
			return ipvs.Request{Cmd: ipvs.CmdZero}, true
		}
		return ipvs.Request{Cmd: ipvs.CmdZero, Service: svc}, true
	case CmdAddServer:
		return ipvs.Request{Cmd: ipvs.CmdNewDest, Service: svc, Dest: dest}, true
	case CmdEditServer:
		return ipvs.Request{Cmd: ipvs.CmdSetDest, Service: svc, Dest: dest}, true
	case CmdDeleteServer:
		return ipvs.Request{Cmd: ipvs.CmdDelDest, Service: svc, Dest: dest}, true
	case CmdFlush:
		return ipvs.Request{Cmd: ipvs.CmdFlush}, true
	case CmdSetTimeouts:
		b.timeouts = inv.Timeouts
		return ipvs.Request{Cmd: ipvs.CmdSetConfig, Timeouts: &b.timeouts}, true
	case CmdStartDaemon:
		b.daemon = inv.Daemon
		return ipvs.Request{Cmd: ipvs.CmdNewDaemon, Daemon: &b.daemon}, true
	case CmdStopDaemon:
		// ipvsadm sends only the state, an empty interface and the syncid.
		b.daemon = ipvs.Daemon{State: inv.Daemon.State, SyncID: inv.Daemon.SyncID}
		return ipvs.Request{Cmd: ipvs.CmdDelDaemon, Daemon: &b.daemon}, true
	}
	return ipvs.Request{}, false
}
