package ipvsadm

import (
	"errors"
	"net/netip"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/list"
	"github.com/lvskit/lvskit/save"
	"golang.org/x/sys/unix"
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
	return inv.requestIn(new(requestBuffer))
}

// requestBuffer holds the values a Request points to, so that a loop
// building one request after another need not allocate.
type requestBuffer struct {
	service  ipvs.Service
	dest     ipvs.Destination
	daemon   ipvs.Daemon
	timeouts ipvs.Timeouts
}

// RequestIn is Request with the values kept in b: the request is valid
// until b is used again.
func (inv *Invocation) requestIn(b *requestBuffer) (ipvs.Request, bool) {
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

// operation is the libipvs call ipvsadm makes for the command, which
// selects the error messages that apply.
func (c Command) operation() operation {
	switch c {
	case CmdAddService:
		return opAddService
	case CmdEditService:
		return opUpdateService
	case CmdDeleteService:
		return opDelService
	case CmdZero:
		return opZeroService
	case CmdAddServer:
		return opAddDest
	case CmdEditServer:
		return opUpdateDest
	case CmdDeleteServer:
		return opDelDest
	case CmdStartDaemon:
		return opStartDaemon
	case CmdStopDaemon:
		return opStopDaemon
	}
	return opGeneric
}

// changeOutcome is the outcome of a change the kernel answered with err
// (nil for success). One case is not an error although the kernel sends no
// acknowledgement: stopping a sync daemon whose thread has not run yet makes
// the kernel's handler return EINTR, which netlink answers with silence; the
// daemon is stopped all the same (ipvs.ErrNoAnswer). Debian's ipvsadm would
// wait forever there; we report the success the kernel carried out.
func changeOutcome(cmd Command, err error) Outcome {
	if err == nil || (cmd == CmdStopDaemon && errors.Is(err, ipvs.ErrNoAnswer)) {
		return Outcome{Kind: Success}
	}
	return kernelErrorOutcome(cmd, err)
}

// kernelErrorOutcome is the outcome of a change the kernel refused with
// err: ipvsadm prints the message and the line's status is 255.
func kernelErrorOutcome(cmd Command, err error) Outcome {
	return Outcome{Kind: KernelError, Stderr: commandErrorText(cmd, err) + "\n"}
}

// ListOptions are the listing options the invocation selects, with the
// format chosen by ipvsadm's precedence (stats, rate, thresholds,
// persistent-conn, tun-info).
func (inv *Invocation) ListOptions(p *Program) list.Options {
	o := list.Options{
		Numeric:  inv.Has(OptNumeric),
		Exact:    inv.Has(OptExact),
		NoSort:   inv.Has(OptNoSort),
		Resolver: p.resolver(),
	}
	switch {
	case inv.Has(OptStats):
		o.Format = list.Stats
	case inv.Has(OptRate):
		o.Format = list.Rate
	case inv.Has(OptThresholds):
		o.Format = list.Thresholds
	case inv.Has(OptPersistentConn):
		o.Format = list.PersistConn
	case inv.Has(OptTunInfo):
		o.Format = list.TunInfo
	}
	return o
}

// Execute runs a parsed command line: it sends the change, or writes the
// listing, save output or restore results. The returned outcome's messages
// have not been printed yet.
func (p *Program) Execute(inv *Invocation) Outcome {
	switch inv.Command {
	case CmdList:
		return p.list(inv)
	case CmdSave:
		// A save prints no counters: leave them undecoded.
		defer ipvs.SkipStats(p.Client, true)()
		return listOutcome(save.Write(p.Stdout, p.Client, inv.ListOptions(p)))
	case CmdRestore:
		if p.restoring {
			// ipvsadm refuses to nest restores.
			return *tryHelp(inv.Argv[0])
		}
		restore := p.RestoreEngine
		if restore == nil {
			restore = RestoreSequential
		}
		p.restoring = true
		defer func() { p.restoring = false }()
		return restore(p, inv.Argv[0])
	}
	req, ok := inv.Request()
	if !ok {
		return Outcome{Kind: Success}
	}
	return changeOutcome(inv.Command, p.Client.Exec(req))
}

// list runs -L in its variants: connections, one service, timeouts,
// daemons, or the whole table.
func (p *Program) list(inv *Invocation) Outcome {
	o := inv.ListOptions(p)
	if o.Format != list.Stats && o.Format != list.Rate {
		// Only --stats and --rate print the 64-bit counters.
		defer ipvs.SkipStats(p.Client, true)()
	}
	switch {
	case inv.Has(OptConnection):
		return listOutcome(list.Connections(p.Stdout, p.ConnFile, inv.Has(OptPersistentConn), o))
	case inv.Has(OptService):
		return listOutcome(list.Service(p.Stdout, p.Client, inv.ServiceKey(), o))
	case inv.Has(OptTimeout):
		t, err := p.Client.Timeouts()
		if err != nil {
			// ipvsadm exits 1 without a message.
			return Outcome{Kind: ListError}
		}
		return listOutcome(list.Timeouts(p.Stdout, t))
	case inv.Has(OptDaemon):
		ds, err := p.Client.Daemons()
		if err != nil {
			return Outcome{Kind: ListError}
		}
		return listOutcome(list.Daemons(p.Stdout, ds))
	}
	return p.listAll(o)
}

// listAll is the full listing, also what ipvsadm does without arguments.
func (p *Program) listAll(o list.Options) Outcome {
	return listOutcome(list.Table(p.Stdout, p.Client, p.Info, o))
}

// listOutcome turns a listing error into ipvsadm's exit-1 outcome: kernel
// errors get their ipvs_strerror text (all three listing calls map ESRCH to
// "No such service"), list.ErrSilent no text, others their own text.
func listOutcome(err error) Outcome {
	if err == nil {
		return Outcome{Kind: Success}
	}
	if errors.Is(err, list.ErrSilent) {
		return Outcome{Kind: ListError}
	}
	var opErr *ipvs.OpError
	var errno unix.Errno
	if errors.As(err, &opErr) || errors.As(err, &errno) {
		return Outcome{Kind: ListError, Stderr: errorText(opGetServices, err) + "\n"}
	}
	return Outcome{Kind: ListError, Stderr: err.Error() + "\n"}
}

// listDefaults are the listing options of a bare "ipvsadm": names, sorted,
// default format.
func listDefaults(p *Program) list.Options {
	return list.Options{Resolver: p.resolver()}
}
