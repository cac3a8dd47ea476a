package cmdline

import (
	"strings"

	"github.com/lvskit/lvskit/ipvs"
)

// Command is one of the ipvsadm commands a command line can select. The
// values follow ipvsadm's own numbering, which is also the row order of the
// command/option matrix; Help and Version come after the matrix rows because
// they never reach it (they print and exit as the first option).
type Command int

// The commands, in matrix row order.
const (
	NoCommand Command = iota - 1
	CmdAddService
	CmdEditService
	CmdDeleteService
	CmdFlush
	CmdList
	CmdAddServer
	CmdDeleteServer
	CmdEditServer
	CmdSetTimeouts
	CmdStartDaemon
	CmdStopDaemon
	CmdRestore
	CmdSave
	CmdZero
	CmdHelp
	CmdVersion
)

// NumMatrixCommands is the number of commands that have a matrix row.
const NumMatrixCommands = int(CmdZero) + 1

var commandNames = [...]string{
	CmdAddService:    "add-service",
	CmdEditService:   "edit-service",
	CmdDeleteService: "delete-service",
	CmdFlush:         "flush",
	CmdList:          "list",
	CmdAddServer:     "add-server",
	CmdDeleteServer:  "delete-server",
	CmdEditServer:    "edit-server",
	CmdSetTimeouts:   "set",
	CmdStartDaemon:   "start-daemon",
	CmdStopDaemon:    "stop-daemon",
	CmdRestore:       "restore",
	CmdSave:          "save",
	CmdZero:          "zero",
	CmdHelp:          "help",
	CmdVersion:       "version",
}

// Name is the command's name as ipvsadm's messages spell it ("flush" for -C,
// "set" for --set).
func (c Command) Name() string {
	if c < 0 || int(c) >= len(commandNames) {
		return ""
	}
	return commandNames[c]
}

// Option is one of the option bits ipvsadm records while parsing. Its value
// is the bit's index, which is also the column order of the matrix and the
// order in which the matrix check reports problems.
type Option int

// The option bits, in matrix column order.
const (
	NoOption Option = iota - 1
	OptNumeric
	OptConnection
	OptService
	OptScheduler
	OptPersistent
	OptNetmask
	OptRealServer
	OptForward
	OptWeight
	OptUThreshold
	OptLThreshold
	OptMcastInterface
	OptTimeout
	OptDaemon
	OptStats
	OptRate
	OptThresholds
	OptPersistentConn
	OptNoSort
	OptSyncID
	OptExact
	OptOps
	OptPE
	OptSchedFlags
	OptMcastGroup
	OptMcastPort
	OptMcastTTL
	OptSyncMaxLen
	OptTunInfo
	OptTunType
	OptTunPort
	OptTunNoCsum
	OptTunCsum
	OptTunRemCsum
)

// numOptions is the number of option bits (matrix columns).
const numOptions = int(OptTunRemCsum) + 1

var optionNames = [numOptions]string{
	"numeric", "connection", "service-address", "scheduler", "persistent",
	"netmask", "real-server", "forwarding-method", "weight", "u-threshold",
	"l-threshold", "mcast-interface", "timeout", "daemon", "stats", "rate",
	"thresholds", "persistent-conn", "nosort", "syncid", "exact", "ops", "pe",
	"sched-flags", "mcast-group", "mcast-port", "mcast-ttl", "sync-maxlen",
	"tun-info", "tun-type", "tun-port", "tun-nocsum", "tun-csum", "tun-remcsum",
}

// Name is the option's name as ipvsadm's messages spell it
// ("service-address" for -t/-u/--sctp-service/-f).
func (o Option) Name() string {
	if o < 0 || int(o) >= numOptions {
		return ""
	}
	return optionNames[o]
}

// optionSet is a set of option bits.
type optionSet uint64

// Has reports whether o is in the set.
func (s optionSet) Has(o Option) bool { return o >= 0 && s&(1<<uint(o)) != 0 }

func (s *optionSet) add(o Option) { *s |= 1 << uint(o) }

// ArgKind says whether an option takes an argument.
type ArgKind int

// Argument kinds, as popt knows them.
const (
	ArgNone     ArgKind = iota // a flag
	ArgRequired                // always takes a value: attached, after '=', or the next word
	ArgOptional                // takes an attached value, or the next word unless it starts with '-'
)

// OptionSpec describes one command-line option of ipvsadm 1.31.
type OptionSpec struct {
	Long    string  // long name without the dashes
	Short   string  // short letters ("Ll" for --list), empty if none
	Arg     ArgKind // whether a value follows
	ArgName string  // the value's placeholder in documentation
	Command Command // the command this option selects, NoCommand if none
	Option  Option  // the bit it records, NoOption if none (-6, --sort, commands)
	Help    string  // one-line description
	// Documented is true for options ipvsadm -h lists (all but --version).
	Documented bool
	// ShortUndocumented is true when the short letter works but -h does
	// not show it (-X for --exact).
	ShortUndocumented bool
}

// OptionTable is ipvsadm 1.31's option table, in ipvsadm's order. Every long
// name and short letter is unique, so popt's first-match search finds the
// same entry whatever the order.
var OptionTable = []OptionSpec{
	{Long: "add-service", Short: "A", Command: CmdAddService, Option: NoOption, Help: "add virtual service with options", Documented: true},
	{Long: "edit-service", Short: "E", Command: CmdEditService, Option: NoOption, Help: "edit virtual service with options", Documented: true},
	{Long: "delete-service", Short: "D", Command: CmdDeleteService, Option: NoOption, Help: "delete virtual service", Documented: true},
	{Long: "clear", Short: "C", Command: CmdFlush, Option: NoOption, Help: "clear the whole table", Documented: true},
	{Long: "list", Short: "Ll", Command: CmdList, Option: NoOption, Help: "list the table", Documented: true},
	{Long: "zero", Short: "Z", Command: CmdZero, Option: NoOption, Help: "zero counters in a service or all services", Documented: true},
	{Long: "add-server", Short: "a", Command: CmdAddServer, Option: NoOption, Help: "add real server with options", Documented: true},
	{Long: "edit-server", Short: "e", Command: CmdEditServer, Option: NoOption, Help: "edit real server with options", Documented: true},
	{Long: "delete-server", Short: "d", Command: CmdDeleteServer, Option: NoOption, Help: "delete real server", Documented: true},
	{Long: "set", Command: CmdSetTimeouts, Option: NoOption, ArgName: "tcp tcpfin udp", Help: "set connection timeout values", Documented: true},
	{Long: "help", Short: "h", Command: CmdHelp, Option: NoOption, Help: "display this help message", Documented: true},
	{Long: "version", Short: "v", Command: CmdVersion, Option: NoOption, Help: "display the version"},
	{Long: "restore", Short: "R", Command: CmdRestore, Option: NoOption, Help: "restore rules from stdin", Documented: true},
	{Long: "save", Short: "S", Command: CmdSave, Option: NoOption, Help: "save rules to stdout", Documented: true},
	{Long: "start-daemon", Arg: ArgRequired, ArgName: "master|backup", Command: CmdStartDaemon, Option: NoOption, Help: "start connection sync daemon", Documented: true},
	{Long: "stop-daemon", Arg: ArgRequired, ArgName: "master|backup", Command: CmdStopDaemon, Option: NoOption, Help: "stop connection sync daemon", Documented: true},
	{Long: "tcp-service", Short: "t", Arg: ArgRequired, ArgName: "service-address", Command: NoCommand, Option: OptService, Help: "service-address is host[:port]", Documented: true},
	{Long: "udp-service", Short: "u", Arg: ArgRequired, ArgName: "service-address", Command: NoCommand, Option: OptService, Help: "service-address is host[:port]", Documented: true},
	{Long: "sctp-service", Arg: ArgRequired, ArgName: "service-address", Command: NoCommand, Option: OptService, Help: "service-address is host[:port]", Documented: true},
	{Long: "fwmark-service", Short: "f", Arg: ArgRequired, ArgName: "fwmark", Command: NoCommand, Option: OptService, Help: "fwmark is an integer greater than zero", Documented: true},
	{Long: "scheduler", Short: "s", Arg: ArgRequired, ArgName: "scheduler", Command: NoCommand, Option: OptScheduler, Help: "one of " + schedulerList + ", the default scheduler is wlc.", Documented: true},
	{Long: "persistent", Short: "p", Arg: ArgOptional, ArgName: "timeout", Command: NoCommand, Option: OptPersistent, Help: "persistent service", Documented: true},
	{Long: "netmask", Short: "M", Arg: ArgRequired, ArgName: "netmask", Command: NoCommand, Option: OptNetmask, Help: "persistent granularity mask", Documented: true},
	{Long: "real-server", Short: "r", Arg: ArgRequired, ArgName: "server-address", Command: NoCommand, Option: OptRealServer, Help: "server-address is host (and port)", Documented: true},
	{Long: "masquerading", Short: "m", Command: NoCommand, Option: OptForward, Help: "masquerading (NAT)", Documented: true},
	{Long: "ipip", Short: "i", Command: NoCommand, Option: OptForward, Help: "ipip encapsulation (tunneling)", Documented: true},
	{Long: "gatewaying", Short: "g", Command: NoCommand, Option: OptForward, Help: "gatewaying (direct routing) (default)", Documented: true},
	{Long: "weight", Short: "w", Arg: ArgRequired, ArgName: "weight", Command: NoCommand, Option: OptWeight, Help: "capacity of real server", Documented: true},
	{Long: "u-threshold", Short: "x", Arg: ArgRequired, ArgName: "uthreshold", Command: NoCommand, Option: OptUThreshold, Help: "upper threshold of connections", Documented: true},
	{Long: "l-threshold", Short: "y", Arg: ArgRequired, ArgName: "lthreshold", Command: NoCommand, Option: OptLThreshold, Help: "lower threshold of connections", Documented: true},
	{Long: "numeric", Short: "n", Command: NoCommand, Option: OptNumeric, Help: "numeric output of addresses and ports", Documented: true},
	{Long: "connection", Short: "c", Command: NoCommand, Option: OptConnection, Help: "output of current IPVS connections", Documented: true},
	{Long: "mcast-interface", Arg: ArgRequired, ArgName: "interface", Command: NoCommand, Option: OptMcastInterface, Help: "multicast interface for connection sync", Documented: true},
	{Long: "syncid", Arg: ArgRequired, ArgName: "sid", Command: NoCommand, Option: OptSyncID, Help: "syncid for connection sync (default=255)", Documented: true},
	{Long: "timeout", Command: NoCommand, Option: OptTimeout, Help: "output of timeout (tcp tcpfin udp)", Documented: true},
	{Long: "daemon", Command: NoCommand, Option: OptDaemon, Help: "output of daemon information", Documented: true},
	{Long: "stats", Command: NoCommand, Option: OptStats, Help: "output of statistics information", Documented: true},
	{Long: "rate", Command: NoCommand, Option: OptRate, Help: "output of rate information", Documented: true},
	{Long: "thresholds", Command: NoCommand, Option: OptThresholds, Help: "output of thresholds information", Documented: true},
	{Long: "persistent-conn", Command: NoCommand, Option: OptPersistentConn, Help: "output of persistent connection info", Documented: true},
	{Long: "nosort", Command: NoCommand, Option: OptNoSort, Help: "disable sorting output of service/server entries", Documented: true},
	{Long: "sort", Command: NoCommand, Option: NoOption, Help: "does nothing, for backwards compatibility", Documented: true},
	{Long: "exact", Short: "X", Command: NoCommand, Option: OptExact, Help: "expand numbers (display exact values)", Documented: true, ShortUndocumented: true},
	{Long: "ipv6", Short: "6", Command: NoCommand, Option: NoOption, Help: "fwmark entry uses IPv6", Documented: true},
	{Long: "ops", Short: "o", Command: NoCommand, Option: OptOps, Help: "one-packet scheduling", Documented: true},
	{Long: "pe", Arg: ArgRequired, ArgName: "engine", Command: NoCommand, Option: OptPE, Help: "alternate persistence engine may be " + peList + ", not set by default.", Documented: true},
	{Long: "sched-flags", Short: "b", Arg: ArgRequired, ArgName: "flags", Command: NoCommand, Option: OptSchedFlags, Help: "scheduler flags (comma-separated)", Documented: true},
	{Long: "mcast-group", Arg: ArgRequired, ArgName: "address", Command: NoCommand, Option: OptMcastGroup, Help: "IPv4/IPv6 group (default=224.0.0.81)", Documented: true},
	{Long: "mcast-port", Arg: ArgRequired, ArgName: "port", Command: NoCommand, Option: OptMcastPort, Help: "UDP port (default=8848)", Documented: true},
	{Long: "mcast-ttl", Arg: ArgRequired, ArgName: "ttl", Command: NoCommand, Option: OptMcastTTL, Help: "Multicast TTL (default=1)", Documented: true},
	{Long: "sync-maxlen", Arg: ArgRequired, ArgName: "length", Command: NoCommand, Option: OptSyncMaxLen, Help: "Max sync message length (default=1472)", Documented: true},
	{Long: "tun-info", Command: NoCommand, Option: OptTunInfo, Help: "output of tunnel information", Documented: true},
	{Long: "tun-type", Arg: ArgRequired, ArgName: "type", Command: NoCommand, Option: OptTunType, Help: "one of ipip|gue|gre, the default tunnel type is ipip.", Documented: true},
	{Long: "tun-port", Arg: ArgRequired, ArgName: "port", Command: NoCommand, Option: OptTunPort, Help: "tunnel destination port", Documented: true},
	{Long: "tun-nocsum", Command: NoCommand, Option: OptTunNoCsum, Help: "tunnel encapsulation without checksum", Documented: true},
	{Long: "tun-csum", Command: NoCommand, Option: OptTunCsum, Help: "tunnel encapsulation with checksum", Documented: true},
	{Long: "tun-remcsum", Command: NoCommand, Option: OptTunRemCsum, Help: "tunnel encapsulation with remote checksum", Documented: true},
}

// schedulerList and peList are the names ipvsadm's help text offers; they are
// compile-time strings in ipvsadm, not what the kernel supports.
const (
	schedulerList = "rr|wrr|lc|wlc|lblc|lblcr|dh|sh|sed|nq|fo|ovf|mh"
	peList        = "sip"
)

// Allowance is what the matrix says about one option with one command.
type Allowance byte

// Matrix cell values, spelled as in ipvsadm's own table.
const (
	Optional Allowance = '.' // may be given
	Required Allowance = '+' // must be given
	Illegal  Allowance = 'x' // must not be given
	OneOf    Allowance = '1' // at most one of the command's OneOf options
)

// matrix is ipvsadm's commands_v_options table: one row per command, one
// character per option bit in column order.
//
//	column:  0 numeric          9 u-threshold    18 nosort        27 sync-maxlen
//	         1 connection      10 l-threshold    19 syncid        28 tun-info
//	         2 service-address 11 mcast-interface 20 exact        29 tun-type
//	         3 scheduler       12 timeout        21 ops           30 tun-port
//	         4 persistent      13 daemon         22 pe            31 tun-nocsum
//	         5 netmask         14 stats          23 sched-flags   32 tun-csum
//	         6 real-server     15 rate           24 mcast-group   33 tun-remcsum
//	         7 forwarding      16 thresholds     25 mcast-port
//	         8 weight          17 persistent-conn 26 mcast-ttl
var matrix = [NumMatrixCommands]string{
	//                  0123456789012345678901234567890123
	CmdAddService:    "xx+...xxxxxxxxxxxxxxx...xxxxxxxxxx",
	CmdEditService:   "xx+...xxxxxxxxxxxxxxx...xxxxxxxxxx",
	CmdDeleteService: "xx+xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	CmdFlush:         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	CmdList:          ".11xxxxxxxxx11.......xxxxxxx.xxxxx",
	CmdAddServer:     "xx+xxx+....xxxxxxxxxxxxxxxxxx.....",
	CmdDeleteServer:  "xx+xxx+xxxxxxxxxxxxxxxxxxxxxxxxxxx",
	CmdEditServer:    "xx+xxx+....xxxxxxxxxxxxxxxxxx.....",
	CmdSetTimeouts:   "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	CmdStartDaemon:   "xxxxxxxxxxx.xxxxxxx.xxxx....xxxxxx",
	CmdStopDaemon:    "xxxxxxxxxxxxxxxxxxx.xxxxxxxxxxxxxx",
	CmdRestore:       "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	CmdSave:          ".xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	CmdZero:          "xx.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
}

// Allowed returns the matrix cell for command c and option o.
func Allowed(c Command, o Option) Allowance {
	if c < 0 || int(c) >= NumMatrixCommands || o < 0 || int(o) >= numOptions {
		return Illegal
	}
	return Allowance(matrix[c][o])
}

// tunnelTypes and tunnelMatrix are ipvsadm's tunnel_types_v_options table:
// for each tunnel type, the allowance of tun-port, tun-nocsum, tun-csum and
// tun-remcsum (checked in that order).
var tunnelTypes = [...]string{"ipip", "gue", "gre"}

var tunnelOptions = [...]Option{OptTunPort, OptTunNoCsum, OptTunCsum, OptTunRemCsum}

var tunnelMatrix = [len(tunnelTypes)]string{
	"xxxx", // ipip
	"+111", // gue
	"x11x", // gre
}

// tunnelAllowed returns the tunnel-type matrix cell for tunnel type t
// (ipvs.TunIPIP, TunGUE, TunGRE) and one of the options tun-port,
// tun-nocsum, tun-csum, tun-remcsum; Optional for any other option.
func tunnelAllowed(t ipvs.TunType, o Option) Allowance {
	for i, to := range tunnelOptions {
		if to == o && int(t) < len(tunnelMatrix) {
			return Allowance(tunnelMatrix[t][i])
		}
	}
	return Optional
}

// findLong returns the option whose long name is name (exactly; popt does
// not accept abbreviations).
func findLong(name string) *OptionSpec {
	for i := range OptionTable {
		if OptionTable[i].Long == name {
			return &OptionTable[i]
		}
	}
	return nil
}

// findShort returns the option with short letter c.
func findShort(c byte) *OptionSpec {
	if c == 0 {
		return nil
	}
	for i := range OptionTable {
		if strings.IndexByte(OptionTable[i].Short, c) >= 0 {
			return &OptionTable[i]
		}
	}
	return nil
}

// optionsFor lists the options that command c accepts after it, in table
// order: those the matrix does not make illegal, plus --sort and -6, which
// every command accepts (-6 only after -f). Help and version take nothing.
func optionsFor(c Command) []OptionSpec {
	if c < 0 || int(c) >= NumMatrixCommands {
		return nil
	}
	var out []OptionSpec
	for _, o := range OptionTable {
		if o.Command != NoCommand {
			continue
		}
		if o.Option == NoOption || Allowed(c, o.Option) != Illegal {
			out = append(out, o)
		}
	}
	return out
}
