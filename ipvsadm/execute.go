package ipvsadm

import (
	"errors"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/cmdline"
	"github.com/lvskit/lvskit/ipvsadm/list"
	"github.com/lvskit/lvskit/save"
	"golang.org/x/sys/unix"
)

// operationOf is the libipvs call ipvsadm makes for command c, which
// selects the error messages that apply.
func operationOf(c cmdline.Command) operation {
	switch c {
	case cmdline.CmdAddService:
		return opAddService
	case cmdline.CmdEditService:
		return opUpdateService
	case cmdline.CmdDeleteService:
		return opDelService
	case cmdline.CmdZero:
		return opZeroService
	case cmdline.CmdAddServer:
		return opAddDest
	case cmdline.CmdEditServer:
		return opUpdateDest
	case cmdline.CmdDeleteServer:
		return opDelDest
	case cmdline.CmdStartDaemon:
		return opStartDaemon
	case cmdline.CmdStopDaemon:
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
func changeOutcome(cmd cmdline.Command, err error) cmdline.Outcome {
	if err == nil || (cmd == cmdline.CmdStopDaemon && errors.Is(err, ipvs.ErrNoAnswer)) {
		return cmdline.Outcome{Kind: cmdline.Success}
	}
	return kernelErrorOutcome(cmd, err)
}

// kernelErrorOutcome is the outcome of a change the kernel refused with
// err: ipvsadm prints the message and the line's status is 255.
func kernelErrorOutcome(cmd cmdline.Command, err error) cmdline.Outcome {
	return cmdline.Outcome{Kind: cmdline.KernelError, Stderr: commandErrorText(cmd, err) + "\n"}
}

// ListOptions are the listing options invocation inv selects, with the
// format chosen by ipvsadm's precedence (stats, rate, thresholds,
// persistent-conn, tun-info).
func (p *Program) ListOptions(inv *cmdline.Invocation) list.Options {
	o := list.Options{
		Numeric:  inv.Has(cmdline.OptNumeric),
		Exact:    inv.Has(cmdline.OptExact),
		NoSort:   inv.Has(cmdline.OptNoSort),
		Resolver: p.resolver(),
	}
	switch {
	case inv.Has(cmdline.OptStats):
		o.Format = list.Stats
	case inv.Has(cmdline.OptRate):
		o.Format = list.Rate
	case inv.Has(cmdline.OptThresholds):
		o.Format = list.Thresholds
	case inv.Has(cmdline.OptPersistentConn):
		o.Format = list.PersistConn
	case inv.Has(cmdline.OptTunInfo):
		o.Format = list.TunInfo
	}
	return o
}

// Execute runs a parsed command line: it sends the change, or writes the
// listing, save output or restore results. The returned outcome's messages
// have not been printed yet.
func (p *Program) Execute(inv *cmdline.Invocation) cmdline.Outcome {
	switch inv.Command {
	case cmdline.CmdList:
		return p.list(inv)
	case cmdline.CmdSave:
		// A save prints no counters: leave them undecoded.
		defer ipvs.SkipStats(p.Client, true)()
		return listOutcome(save.Write(p.Stdout, p.Client, p.ListOptions(inv)))
	case cmdline.CmdRestore:
		if p.restoring {
			// ipvsadm refuses to nest restores.
			return *cmdline.TryHelpOutcome(inv.Argv[0])
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
		return cmdline.Outcome{Kind: cmdline.Success}
	}
	return changeOutcome(inv.Command, p.Client.Exec(req))
}

// list runs -L in its variants: connections, one service, timeouts,
// daemons, or the whole table.
func (p *Program) list(inv *cmdline.Invocation) cmdline.Outcome {
	o := p.ListOptions(inv)
	if o.Format != list.Stats && o.Format != list.Rate {
		// Only --stats and --rate print the 64-bit counters.
		defer ipvs.SkipStats(p.Client, true)()
	}
	switch {
	case inv.Has(cmdline.OptConnection):
		return listOutcome(list.Connections(p.Stdout, p.ConnFile, inv.Has(cmdline.OptPersistentConn), o))
	case inv.Has(cmdline.OptService):
		return listOutcome(list.Service(p.Stdout, p.Client, inv.ServiceKey(), o))
	case inv.Has(cmdline.OptTimeout):
		t, err := p.Client.Timeouts()
		if err != nil {
			// ipvsadm exits 1 without a message.
			return cmdline.Outcome{Kind: cmdline.ListError}
		}
		return listOutcome(list.Timeouts(p.Stdout, t))
	case inv.Has(cmdline.OptDaemon):
		ds, err := p.Client.Daemons()
		if err != nil {
			return cmdline.Outcome{Kind: cmdline.ListError}
		}
		return listOutcome(list.Daemons(p.Stdout, ds))
	}
	return p.listAll(o)
}

// listAll is the full listing, also what ipvsadm does without arguments.
func (p *Program) listAll(o list.Options) cmdline.Outcome {
	return listOutcome(list.Table(p.Stdout, p.Client, p.Info, o))
}

// listOutcome turns a listing error into ipvsadm's exit-1 outcome: kernel
// errors get their ipvs_strerror text (all three listing calls map ESRCH to
// "No such service"), list.ErrSilent no text, others their own text.
func listOutcome(err error) cmdline.Outcome {
	if err == nil {
		return cmdline.Outcome{Kind: cmdline.Success}
	}
	if errors.Is(err, list.ErrSilent) {
		return cmdline.Outcome{Kind: cmdline.ListError}
	}
	var opErr *ipvs.OpError
	var errno unix.Errno
	if errors.As(err, &opErr) || errors.As(err, &errno) {
		return cmdline.Outcome{Kind: cmdline.ListError, Stderr: errorText(opGetServices, err) + "\n"}
	}
	return cmdline.Outcome{Kind: cmdline.ListError, Stderr: err.Error() + "\n"}
}

// listDefaults are the listing options of a bare "ipvsadm": names, sorted,
// default format.
func listDefaults(p *Program) list.Options {
	return list.Options{Resolver: p.resolver()}
}
