// Package cmdline parses ipvsadm 1.31's command line and restore lines
// into invocations.
//
// Parser.Parse checks an argument vector as ipvsadm does before it talks
// to the kernel: a libpopt-compatible walk (popt.go) over ipvsadm's option
// table and command/option matrix, which are data (OptionTable, Allowed)
// so that man pages and completions can enumerate them; value parsing with
// the C library's leniency (values.go); ipvsadm's checks and defaults. A
// line that ends there gets an Outcome (usage, version or ipvsadm's
// message; its Kind decides the exit status, outcome.go). ParseFast and
// LineTemplate read the lines of a saved rules file without allocating,
// exactly as Parse would (fastparse.go). An Invocation knows the kernel
// request it stands for (request.go); sending it is package ipvsadm's.
package cmdline

import (
	"math/bits"
	"strings"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/names"
)

// Invocation is a command line that passed every check ipvsadm makes before
// talking to the kernel: the command, the options given and the values
// they produced, with ipvsadm's defaults filled in.
type Invocation struct {
	// Argv is the command line, Argv[0] being the program name.
	Argv    []string
	Command Command
	// Options holds the option bits given on the line.
	Options optionSet
	// Service is the virtual service named by -t/-u/--sctp-service/-f with
	// the -s/-p/-M/--pe/-o/-b settings. For -f its Protocol is TCP, as in
	// ipvsadm (used for port-name lookups); ServiceKey and Request drop it.
	Service ipvs.Service
	// Dest is the real server of -a/-e/-d.
	Dest ipvs.Destination
	// Daemon is the sync daemon of --start-daemon/--stop-daemon.
	Daemon ipvs.Daemon
	// Timeouts are the --set values.
	Timeouts ipvs.Timeouts
}

// Has reports whether option o was given.
func (inv *Invocation) Has(o Option) bool { return inv.Options.Has(o) }

// Parser holds what parsing depends on besides the command line.
type Parser struct {
	// Resolver answers host and service name questions; nil means the
	// system's (names.NewResolver), made at the first question.
	Resolver *names.Resolver
	// Posix is popt's POSIXLY_CORRECT mode: set it when POSIXLY_CORRECT or
	// POSIX_ME_HARDER is present in the environment (even if empty).
	Posix bool
}

// resolver returns the parser's name resolver, the system's files when
// none was given.
func (p *Parser) resolver() *names.Resolver {
	if p.Resolver == nil {
		p.Resolver = names.NewResolver()
	}
	return p.Resolver
}

// Parse checks one command line the way ipvsadm 1.31 does before executing
// anything. It returns the invocation to execute, or the outcome that ends
// the line here (usage, version, or a diagnostic not yet printed). argv[0]
// is the program name used in messages.
func (p *Parser) Parse(argv []string) (*Invocation, *Outcome) {
	if len(argv) == 0 {
		argv = []string{"ipvsadm"}
	}
	prog := argv[0]
	pp := newPoptParser(argv, p.Posix)

	first, arg, done, perr := pp.nextOption()
	if done || perr != nil || first.Command == NoCommand {
		return nil, TryHelpOutcome(prog)
	}
	inv := &Invocation{Argv: argv, Command: first.Command}
	inv.Dest.Weight = 1
	inv.Dest.FwdMethod = ipvs.FwdRoute
	inv.Service.Netmask = 0xffffffff

	switch first.Command {
	case CmdHelp:
		return nil, &Outcome{Kind: Informational, Stdout: Usage(prog)}
	case CmdVersion:
		return nil, &Outcome{Kind: Informational, Stdout: VersionLine + "\n"}
	case CmdStartDaemon, CmdStopDaemon:
		switch *arg {
		case "master":
			inv.Daemon.State = ipvs.DaemonMaster
		case "backup":
			inv.Daemon.State = ipvs.DaemonBackup
		default:
			if first.Command == CmdStartDaemon {
				return nil, invalid("illegal start-daemon parameter specified")
			}
			return nil, invalid("illegal start_daemon specified")
		}
	}

	schedFlagsArg := ""
	for {
		opt, arg, done, perr := pp.nextOption()
		if done {
			break
		}
		if perr != nil {
			return nil, &Outcome{Kind: PoptError, Stderr: perr.message() + "\n"}
		}
		if opt.Command != NoCommand {
			return nil, invalid("invalid option `" + pp.badOpt() + "'")
		}
		if opt.Option != NoOption {
			if inv.Options.Has(opt.Option) {
				return nil, invalid("multiple '" + opt.Option.Name() + "' options specified")
			}
			inv.Options.add(opt.Option)
		}
		if opt.Option == OptSchedFlags {
			// ipvsadm parses the flags only after all options, against the
			// final scheduler.
			schedFlagsArg = truncate(*arg, schedFlagsArgMax)
			continue
		}
		if o := inv.apply(opt, arg, p); o != nil {
			return nil, o
		}
	}

	if inv.Command == CmdSetTimeouts {
		var values [3]string
		for i := range values {
			v, ok := pp.takeLeftover()
			if !ok {
				return nil, invalid("--set option requires 3 timeout values")
			}
			values[i] = v
		}
		var parsed [3]uint32
		for i, v := range values {
			n, ok := stringToNumber(v, 0, maxTimeout)
			if !ok {
				return nil, invalid("invalid timeout value `" + v + "' specified")
			}
			parsed[i] = uint32(n)
		}
		inv.Timeouts = ipvs.Timeouts{TCP: parsed[0], TCPFin: parsed[1], UDP: parsed[2]}
	}
	if w, ok := pp.takeLeftover(); ok {
		return nil, invalid("unexpected argument " + w)
	}
	if schedFlagsArg != "" {
		r := parseSchedFlags(inv.Service.Scheduler, schedFlagsArg)
		switch {
		case r.crash:
			return nil, &Outcome{Kind: Crash}
		case r.failure != "":
			return nil, invalid(r.failure)
		}
		inv.Service.Flags &^= ipvs.FlagSched1 | ipvs.FlagSched2 | ipvs.FlagSched3
		inv.Service.Flags |= r.flags
	}
	if o := checkMatrix(inv.Command, inv.Options); o != nil {
		return nil, o
	}
	if o := inv.checkSemantics(); o != nil {
		return nil, o
	}
	return inv, nil
}

// RestoreArgv is the argument vector of a line's fields: prog, then a copy
// of each field.
func RestoreArgv(prog string, fields [][]byte) []string {
	argv := make([]string, 1, 1+len(fields))
	argv[0] = prog
	for _, f := range fields {
		argv = append(argv, string(f))
	}
	return argv
}

// TryHelpOutcome is ipvsadm's tryhelp_exit for program name prog: the
// outcome of a line whose first option is missing or not a command, and
// of -R met while restoring.
func TryHelpOutcome(prog string) *Outcome {
	return &Outcome{Kind: TryHelp, Stderr: "Try `" + prog + " -h' or '" + prog + " --help' for more information.\n"}
}

// apply records one non-command option and parses its value, in the order
// ipvsadm does (the option bit was set before, so a repeated option is
// reported even when its value is bad). Each option sets part of the
// service, the real server or the sync daemon: the helper for that part
// parses it, and the other two leave it alone.
func (inv *Invocation) apply(opt *OptionSpec, arg *string, p *Parser) *Outcome {
	value := ""
	if arg != nil {
		value = *arg
	}
	if o := inv.applyService(opt.Long, arg, value, p); o != nil {
		return o
	}
	if o := inv.applyDest(opt.Long, value, p); o != nil {
		return o
	}
	if o := inv.applyDaemon(opt.Long, value); o != nil {
		return o
	}
	// numeric, connection, timeout, daemon, stats, rate, thresholds,
	// persistent-conn, nosort, sort, exact, tun-info only set their bit.
	return nil
}

// applyService parses an option of the virtual service (-t, -u,
// --sctp-service, -f, -s, -p, -M, -6, -o, --pe) into inv.Service; other
// options it leaves alone. arg is the option's value, nil if none.
func (inv *Invocation) applyService(name string, arg *string, value string, p *Parser) *Outcome {
	svc := &inv.Service
	switch name {
	case "tcp-service", "udp-service", "sctp-service":
		switch name {
		case "tcp-service":
			svc.Protocol = ipvs.ProtoTCP
		case "udp-service":
			svc.Protocol = ipvs.ProtoUDP
		default:
			svc.Protocol = ipvs.ProtoSCTP
		}
		h, ok := parseHostAddress(value, svc.Protocol, p.resolver())
		if !ok {
			return invalid("illegal virtual server address[:port] specified")
		}
		svc.Family, svc.Addr = h.family, h.addr
		if h.family == ipvs.AFInet6 {
			svc.Netmask = 128
		}
		if h.hasPort {
			svc.Port = h.port
		}
	case "fwmark-service":
		svc.Family = ipvs.AFInet
		svc.Protocol = ipvs.ProtoTCP
		mark, ok := parseFwmark(value)
		if !ok {
			return invalid("invalid fwmark value `" + value + "' specified")
		}
		svc.FWMark = mark
	case "scheduler":
		svc.Scheduler = truncate(value, schedNameMax)
	case "persistent":
		svc.Flags |= ipvs.FlagPersistent
		svc.Timeout = defaultPersist
		if arg != nil {
			n, ok := stringToNumber(value, 1, maxTimeout)
			if !ok {
				return invalid("invalid timeout value `" + value + "' specified")
			}
			svc.Timeout = uint32(n)
		}
	case "netmask":
		if svc.Family != ipvs.AFInet6 {
			mask, ok := parseNetmask4(value, p.resolver())
			if !ok {
				return invalid("illegal virtual server persistent mask specified")
			}
			svc.Netmask = mask
		} else {
			// ipvsadm stores atoi's int in an unsigned field, so negative
			// values fail the upper bound.
			svc.Netmask = uint32(cAtoi(value))
			if svc.Netmask < 1 || svc.Netmask > 128 {
				return invalid("illegal ipv6 netmask specified")
			}
		}
	case "ipv6":
		if svc.FWMark == 0 {
			// ipvsadm's message already ends in a newline, and fail()
			// adds another.
			return invalid("-6 used before -f\n")
		}
		svc.Family = ipvs.AFInet6
		svc.Netmask = 128
	case "ops":
		svc.Flags |= ipvs.FlagOnePacket
	case "pe":
		svc.PEName = truncate(value, peNameMax)
	}
	return nil
}

// applyDest parses an option of the real server (-r, -m, -i, -g, -w, -x,
// -y, the tunnel options) into inv.Dest; other options it leaves alone.
func (inv *Invocation) applyDest(name, value string, p *Parser) *Outcome {
	svc, dest := &inv.Service, &inv.Dest
	switch name {
	case "real-server":
		h, ok := parseHostAddress(value, svc.Protocol, p.resolver())
		if !ok {
			return invalid("illegal real server address[:port] specified")
		}
		dest.Family, dest.Addr, dest.Port = h.family, h.addr, svc.Port
		if h.hasPort {
			dest.Port = h.port
		}
	case "masquerading":
		dest.FwdMethod = ipvs.FwdMasq
	case "ipip":
		dest.FwdMethod = ipvs.FwdTunnel
	case "gatewaying":
		dest.FwdMethod = ipvs.FwdRoute
	case "weight":
		n, ok := stringToNumber(value, 0, maxWeight)
		if !ok {
			return invalid("illegal weight specified")
		}
		dest.Weight = uint32(n)
	case "u-threshold":
		n, ok := stringToNumber(value, 0, maxWeight)
		if !ok {
			return invalid("illegal u_threshold specified")
		}
		dest.UThreshold = uint32(n)
	case "l-threshold":
		n, ok := stringToNumber(value, 0, maxWeight)
		if !ok {
			return invalid("illegal l_threshold specified")
		}
		dest.LThreshold = uint32(n)
	case "tun-type":
		t, ok := parseTunType(value)
		if !ok {
			return invalid("illegal tunnel type specified")
		}
		dest.TunType = t
	case "tun-port":
		n, ok := stringToNumber(value, 1, 65535)
		if !ok {
			return invalid("illegal tunnel port specified")
		}
		dest.TunPort = uint16(n)
	case "tun-nocsum":
		dest.TunFlags |= ipvs.TunFlagNoCsum
	case "tun-csum":
		dest.TunFlags |= ipvs.TunFlagCsum
	case "tun-remcsum":
		dest.TunFlags |= ipvs.TunFlagRemCsum
	}
	return nil
}

// applyDaemon parses an option of the sync daemon (--mcast-interface,
// --syncid, --mcast-group, --mcast-port, --mcast-ttl, --sync-maxlen) into
// inv.Daemon; other options it leaves alone.
func (inv *Invocation) applyDaemon(name, value string) *Outcome {
	daemon := &inv.Daemon
	switch name {
	case "mcast-interface":
		daemon.Interface = truncate(value, ifNameMax)
	case "syncid":
		n, ok := stringToNumber(value, 0, 255)
		if !ok {
			return invalid("illegal syncid specified")
		}
		daemon.SyncID = uint32(n)
	case "mcast-group":
		group, msg := parseMcastGroup(value)
		if msg != "" {
			return invalid(msg)
		}
		daemon.Group = group
	case "mcast-port":
		n, ok := stringToNumber(value, 1, 65535)
		if !ok {
			return invalid("illegal mcast-port specified")
		}
		daemon.Port = uint16(n)
	case "mcast-ttl":
		n, ok := stringToNumber(value, 1, 255)
		if !ok {
			return invalid("illegal mcast-ttl specified")
		}
		daemon.TTL = uint8(n)
	case "sync-maxlen":
		n, ok := stringToNumber(value, 1, maxSyncMaxLen)
		if !ok {
			return invalid("illegal sync-maxlen specified")
		}
		daemon.MaxLen = uint16(n)
	}
	return nil
}

// checkMatrix is ipvsadm's generic_opt_check: walk the options in column
// order and report the first missing compulsory option, illegal option or
// second exclusive option.
func checkMatrix(cmd Command, given optionSet) *Outcome {
	if cmd >= 0 && int(cmd) < NumMatrixCommands {
		// Most lines are fine: say so without walking the columns.
		m := &matrixMasks[cmd]
		if given&m.illegal == 0 && m.required&^given == 0 && bits.OnesCount64(uint64(given&m.oneOf)) <= 1 {
			return nil
		}
	}
	count := 0
	var first Option
	for o := Option(0); int(o) < numOptions; o++ {
		a := Allowed(cmd, o)
		if !given.Has(o) {
			if a == Required {
				return invalid("You need to supply the '" + o.Name() + "' option for the '" + cmd.Name() + "' command")
			}
			continue
		}
		switch a {
		case Illegal:
			return invalid("Illegal '" + o.Name() + "' option with the '" + cmd.Name() + "' command")
		case OneOf:
			count++
			if count == 1 {
				first = o
				continue
			}
			return invalid("The option '" + o.Name() + "' conflicts with the '" + first.Name() + "' option in the '" + cmd.Name() + "' command")
		}
	}
	return nil
}

// matrixMasks are the matrix rows as option sets, for checkMatrix's
// quick answer.
var matrixMasks = func() (rows [NumMatrixCommands]struct{ required, illegal, oneOf optionSet }) {
	for c := range rows {
		for o := Option(0); int(o) < numOptions; o++ {
			switch Allowed(Command(c), o) {
			case Required:
				rows[c].required.add(o)
			case Illegal:
				rows[c].illegal.add(o)
			case OneOf:
				rows[c].oneOf.add(o)
			}
		}
	}
	return rows
}()

// tunnelOptionSet holds the tunnelOptions.
var tunnelOptionSet = func() (set optionSet) {
	for _, o := range tunnelOptions {
		set.add(o)
	}
	return set
}()

// checkSemantics applies ipvsadm's checks and defaults that come after the
// matrix, in its order.
func (inv *Invocation) checkSemantics() *Outcome {
	svc, dest := &inv.Service, &inv.Dest
	switch inv.Command {
	case CmdAddService, CmdEditService:
		if svc.FWMark == 0 && svc.Port == 0 && svc.Flags&ipvs.FlagPersistent == 0 {
			return invalid("Zero port specified for non-persistent service")
		}
		if svc.Flags&ipvs.FlagOnePacket != 0 && svc.FWMark == 0 && svc.Protocol != ipvs.ProtoUDP {
			return invalid("One-Packet Scheduling is only for UDP virtual services")
		}
		if svc.Scheduler == "" {
			svc.Scheduler = defaultScheduler
		}
	case CmdStartDaemon:
		if inv.Daemon.Interface == "" {
			inv.Daemon.Interface = defaultInterface
		}
	case CmdAddServer, CmdEditServer:
		// Direct routing and tunnelling cannot change the port.
		if svc.FWMark == 0 && (dest.FwdMethod == ipvs.FwdTunnel || dest.FwdMethod == ipvs.FwdRoute) {
			dest.Port = svc.Port
		}
		if dest.Family != svc.Family && dest.FwdMethod != ipvs.FwdTunnel {
			return invalid("Different address family is allowed only for tunneling servers")
		}
		tunnelOpts := inv.Has(OptTunType) || inv.Has(OptTunPort) || inv.Has(OptTunNoCsum) ||
			inv.Has(OptTunCsum) || inv.Has(OptTunRemCsum)
		if tunnelOpts && dest.FwdMethod != ipvs.FwdTunnel {
			return invalid("Tunnel options conflict with forward method")
		}
		if o := checkTunnel(dest.TunType, inv.Options); o != nil {
			return o
		}
	case CmdList:
		if (inv.Has(OptConnection) || inv.Has(OptTimeout) || inv.Has(OptDaemon)) &&
			(inv.Has(OptStats) || inv.Has(OptRate) || inv.Has(OptThresholds)) ||
			(inv.Has(OptTimeout) || inv.Has(OptDaemon)) && inv.Has(OptPersistentConn) {
			return invalid("options conflicts in the list command")
		}
	}
	return nil
}

// checkTunnel is ipvsadm's tunnel_opt_check for tunnel type t.
func checkTunnel(t ipvs.TunType, given optionSet) *Outcome {
	if int(t) >= len(tunnelTypes) {
		return nil
	}
	if given&tunnelOptionSet == 0 && strings.IndexByte(tunnelMatrix[t], byte(Required)) < 0 {
		return nil // nothing given, nothing required
	}
	typeName := tunnelTypes[t]
	count := 0
	var first Option
	for _, o := range tunnelOptions {
		a := tunnelAllowed(t, o)
		if !given.Has(o) {
			if a == Required {
				return invalid("You need to supply the '" + o.Name() + "' option for the '" + typeName + "' tunnel type")
			}
			continue
		}
		switch a {
		case Illegal:
			return invalid("Illegal '" + o.Name() + "' option with the '" + typeName + "' tunnel type")
		case OneOf:
			count++
			if count == 1 {
				first = o
				continue
			}
			return invalid("The option '" + o.Name() + "' conflicts with the '" + first.Name() + "' option in the '" + typeName + "' tunnel type")
		}
	}
	return nil
}
