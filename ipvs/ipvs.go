// Package ipvs is the project's one boundary to the kernel's IP Virtual Server.
//
// It defines the values the kernel stores (services, destinations, sync
// daemons, timeouts), the Client interface every caller programs against, and
// the requests a Client executes. Two implementations exist: the generic
// netlink client in this package (Open) that talks to the running kernel
// (and reads IPv4 services' destinations with the kernel's older getsockopt
// interface where that answer is complete and much cheaper), and
// the in-memory fake in package ipvs/ipvstest. Package ipvs/conformance holds
// the suite that proves both answer alike: same results, same errnos, same
// order.
//
// Errors from the kernel are returned as unix.Errno values (wrapped in
// *OpError), so callers match them with errors.Is(err, unix.EEXIST) and map
// them to their own messages. The package never logs, exits or loads modules.
package ipvs

import (
	"net/netip"
	"strconv"
	"strings"
)

// Family is an address family as the kernel numbers them.
type Family uint16

// The address families IPVS serves.
const (
	AFInet  Family = 2  // AF_INET
	AFInet6 Family = 10 // AF_INET6
)

// String names the family as ip(8) does: "inet", "inet6", else "family N".
func (f Family) String() string { return enumName(familyNames[:], f, "family ") }

var familyNames = [...]string{AFInet: "inet", AFInet6: "inet6"}

// Protocol is the IP protocol a virtual service matches (0 for fwmark
// services).
type Protocol uint16

// IP protocols a virtual service can match.
const (
	ProtoTCP  Protocol = 6
	ProtoUDP  Protocol = 17
	ProtoSCTP Protocol = 132
)

// String names the protocol in lower case ("tcp", "udp", "sctp"), else
// "protocol N".
func (p Protocol) String() string { return enumName(protocolNames[:], p, "protocol ") }

var protocolNames = [...]string{ProtoTCP: "tcp", ProtoUDP: "udp", ProtoSCTP: "sctp"}

// ServiceFlags are a service's IP_VS_SVC_F_* bits.
type ServiceFlags uint32

// Service flag bits.
const (
	FlagPersistent ServiceFlags = 0x01
	FlagHashed     ServiceFlags = 0x02 // kernel-internal; reported, never meaningful to callers
	FlagOnePacket  ServiceFlags = 0x04
	FlagSched1     ServiceFlags = 0x08
	FlagSched2     ServiceFlags = 0x10
	FlagSched3     ServiceFlags = 0x20
)

var serviceFlagNames = [...]string{"persistent", "hashed", "one-packet", "sched1", "sched2", "sched3"}

// String names the set bits, joined by "|" ("persistent|sched1"), an
// unknown bit as its hexadecimal value; "0" when none is set.
func (f ServiceFlags) String() string {
	if f == 0 {
		return "0"
	}
	var parts []string
	for i, name := range serviceFlagNames {
		if f&(1<<i) != 0 {
			parts = append(parts, name)
		}
	}
	if rest := f &^ (1<<len(serviceFlagNames) - 1); rest != 0 {
		parts = append(parts, "0x"+strconv.FormatUint(uint64(rest), 16))
	}
	return strings.Join(parts, "|")
}

// FwdMethod is a destination's forwarding method with the other
// connection flags the kernel keeps beside it; the method is the low three
// bits (IP_VS_CONN_F_FWD_MASK).
type FwdMethod uint32

// Forwarding methods (IP_VS_CONN_F_FWD_MASK values).
const (
	FwdMasq   FwdMethod = 0
	FwdLocal  FwdMethod = 1
	FwdTunnel FwdMethod = 2
	FwdRoute  FwdMethod = 3
)

// Method is the forwarding method alone (the low three bits).
func (m FwdMethod) Method() FwdMethod { return m & 7 }

// String names the method as lvsctl's JSON does: "masq", "local",
// "tunnel", "route", else "method N".
func (m FwdMethod) String() string { return enumName(fwdNames[:], m.Method(), "method ") }

var fwdNames = [...]string{FwdMasq: "masq", FwdLocal: "local", FwdTunnel: "tunnel", FwdRoute: "route"}

// TunType is the tunnel type of a FwdTunnel destination.
type TunType uint8

// Tunnel types for FwdTunnel destinations.
const (
	TunIPIP TunType = 0
	TunGUE  TunType = 1
	TunGRE  TunType = 2
)

// String names the type as ipvsadm's --tun-type does: "ipip", "gue",
// "gre", else "type N".
func (t TunType) String() string { return enumName(tunTypeNames[:], t, "type ") }

var tunTypeNames = [...]string{TunIPIP: "ipip", TunGUE: "gue", TunGRE: "gre"}

// TunFlags are a tunnel's checksum flags (one value, not bits).
type TunFlags uint16

// Tunnel checksum flags.
const (
	TunFlagNoCsum  TunFlags = 0
	TunFlagCsum    TunFlags = 1
	TunFlagRemCsum TunFlags = 2
)

// String names the flags as ipvsadm's options do without their "--tun-"
// ("nocsum", "csum", "remcsum"), else "flags N".
func (f TunFlags) String() string { return enumName(tunFlagNames[:], f, "flags ") }

var tunFlagNames = [...]string{TunFlagNoCsum: "nocsum", TunFlagCsum: "csum", TunFlagRemCsum: "remcsum"}

// DaemonState is a connection-synchronisation daemon's role.
type DaemonState uint32

// Sync daemon states.
const (
	DaemonMaster DaemonState = 1
	DaemonBackup DaemonState = 2
)

// String names the state as ipvsadm does: "master", "backup", else
// "state N".
func (s DaemonState) String() string { return enumName(daemonStateNames[:], s, "state ") }

var daemonStateNames = [...]string{DaemonMaster: "master", DaemonBackup: "backup"}

// Stats are a service's or destination's counters and estimated rates, as the
// kernel's 64-bit statistics report them.
type Stats struct {
	Conns, InPkts, OutPkts, InBytes, OutBytes uint64
	CPS, InPPS, OutPPS, InBPS, OutBPS         uint64
}

// Service is a virtual service. A service is identified either by FWMark
// (non-zero) and Family, or by Family, Protocol, Addr and Port.
type Service struct {
	Family    Family
	Protocol  Protocol   // 0 for fwmark services
	Addr      netip.Addr // invalid (zero) for fwmark services
	Port      uint16
	FWMark    uint32
	Scheduler string
	PEName    string
	Flags     ServiceFlags // FlagHashed is stripped when reading
	Timeout   uint32       // persistence timeout in seconds
	// Netmask is the persistence granularity: for IPv4 the mask as a
	// big-endian number (255.255.255.0 is 0xffffff00), for IPv6 a prefix length.
	Netmask uint32
}

// ServiceEntry is a service as the kernel lists it: its configuration and
// its counters. Configuration and counters are apart so that what is
// written (requests, desired rule sets) carries no counters.
type ServiceEntry struct {
	Service
	Stats Stats
}

// Destination is a real server of a service: its identity and
// configuration, what a request sets.
//
// The fields are laid out to pack (56 bytes): a desired rule set holds
// one per real server.
type Destination struct {
	Addr       netip.Addr
	Family     Family // may differ from the service's for tunnelled servers
	Port       uint16
	TunPort    uint16
	TunFlags   TunFlags
	FwdMethod  FwdMethod
	Weight     uint32 // the kernel stores an int; ipvsadm accepts 0..2147483647
	UThreshold uint32
	LThreshold uint32
	TunType    TunType
}

// DestCounters are what the kernel observes of a destination: its
// connections and traffic.
type DestCounters struct {
	ActiveConns  uint32
	InactConns   uint32
	PersistConns uint32
	Stats        Stats
}

// DestinationEntry is a destination as the kernel lists it: its
// configuration and its counters.
type DestinationEntry struct {
	Destination
	DestCounters
}

// Info is what GET_INFO reports: the IPVS version (0x010201 is 1.2.1) and the
// size of the connection hash table.
type Info struct {
	Version     uint32
	ConnTabSize uint32
}

// Timeouts are the connection timeouts in seconds; 0 in a request means
// "leave unchanged".
type Timeouts struct {
	TCP, TCPFin, UDP uint32
}

// Daemon is a connection-synchronisation daemon. Zero MaxLen, Port, TTL and
// an invalid Group mean "kernel default" in a start request.
type Daemon struct {
	State     DaemonState
	Interface string
	SyncID    uint32
	MaxLen    uint16
	Group     netip.Addr
	Port      uint16
	TTL       uint8
}

// Op is a request's kind, the operation an OpError names; the values are
// the kernel's IPVS_CMD_* numbers (cmdline.Command is ipvsadm's own
// command-line command, a different thing).
type Op uint8

// The commands a Request can carry.
const (
	CmdNewService Op = 1
	CmdSetService Op = 2
	CmdDelService Op = 3
	CmdNewDest    Op = 5
	CmdSetDest    Op = 6
	CmdDelDest    Op = 7
	CmdNewDaemon  Op = 9
	CmdDelDaemon  Op = 10
	CmdSetConfig  Op = 12
	CmdZero       Op = 16
	CmdFlush      Op = 17
)

// The commands behind the Client's read methods. Exec does not accept them;
// they name the operation in an OpError (and in ipvstest.Fake.FailNext).
const (
	CmdGetService Op = 4  // Services, Service
	CmdGetDest    Op = 8  // Destinations
	CmdGetDaemon  Op = 11 // Daemons
	CmdGetConfig  Op = 13 // Timeouts
	CmdGetInfo    Op = 15 // Info
)

var opNames = [...]string{
	CmdNewService: "NEW_SERVICE",
	CmdSetService: "SET_SERVICE",
	CmdDelService: "DEL_SERVICE",
	CmdGetService: "GET_SERVICE",
	CmdNewDest:    "NEW_DEST",
	CmdSetDest:    "SET_DEST",
	CmdDelDest:    "DEL_DEST",
	CmdGetDest:    "GET_DEST",
	CmdNewDaemon:  "NEW_DAEMON",
	CmdDelDaemon:  "DEL_DAEMON",
	CmdGetDaemon:  "GET_DAEMON",
	CmdSetConfig:  "SET_CONFIG",
	CmdGetConfig:  "GET_CONFIG",
	14:            "SET_INFO",
	CmdGetInfo:    "GET_INFO",
	CmdZero:       "ZERO",
	CmdFlush:      "FLUSH",
}

// String returns the kernel's name for the operation without the IPVS_CMD_
// prefix, e.g. "NEW_SERVICE".
func (o Op) String() string { return enumName(opNames[:], o, "IPVS_CMD_") }

// Writes reports whether Exec accepts the operation (it changes the tables).
func (o Op) Writes() bool {
	switch o {
	case CmdNewService, CmdSetService, CmdDelService, CmdNewDest, CmdSetDest,
		CmdDelDest, CmdNewDaemon, CmdDelDaemon, CmdSetConfig, CmdZero, CmdFlush:
		return true
	}
	return false
}

// OpError is the error every Client method returns: the operation that
// failed and why. Err is a unix.Errno when the kernel (or the fake, acting as
// the kernel) refused the request, so callers test it with errors.Is.
type OpError struct {
	Op  Op
	Err error
}

func (e *OpError) Error() string { return "ipvs " + e.Op.String() + ": " + e.Err.Error() }

// Unwrap returns the underlying error, usually a unix.Errno.
func (e *OpError) Unwrap() error { return e.Err }

// Request is one change to the kernel's tables. Which fields matter depends
// on Cmd: Service for service and destination commands and for Zero (nil
// zeroes every counter), Dest for destination commands, Daemon for daemon
// commands, Timeouts for CmdSetConfig.
//
// A Request is sent as given: a nil Service, Dest or Daemon where the
// command needs one reaches the kernel without that attribute, and the kernel
// answers EINVAL. In particular a Zero request with a non-nil Service always
// names that service, even 0.0.0.0:0; ipvsadm's habit of zeroing everything
// for an all-zero service is ipvsadm's (libipvs's) rule, so its caller passes
// a nil Service then.
type Request struct {
	Cmd      Op
	Service  *Service
	Dest     *Destination
	Daemon   *Daemon
	Timeouts *Timeouts
}

// Reader reads one network namespace's IPVS tables: what listing,
// saving and planning need, and all a read-only double implements.
type Reader interface {
	// Info reports the IPVS version and connection table size.
	Info() (Info, error)
	// Services lists every service in the kernel's dump order, which is
	// hash order and not reproducible; callers sort.
	Services() ([]ServiceEntry, error)
	// Service fetches the one service identified by key (ESRCH if absent).
	Service(key Service) (ServiceEntry, error)
	// Destinations lists a service's destinations in the kernel's dump
	// order (most recently added first). Only svc's identity is used. A
	// missing service has no destinations and no error, as the kernel ends
	// such a dump silently; ipvsadm fetches the service first for ESRCH.
	Destinations(svc Service) ([]DestinationEntry, error)
	// Timeouts reports the tcp, tcpfin and udp timeouts.
	Timeouts() (Timeouts, error)
	// Daemons lists the running sync daemons, master first.
	Daemons() ([]Daemon, error)
}

// Client reads and changes one network namespace's IPVS tables. A Client is
// not safe for concurrent use.
type Client interface {
	Reader
	// Exec performs one change and waits for the kernel's answer. Commands
	// that do not change anything (reads, unknown numbers) fail with EINVAL
	// without reaching the kernel. A stop of a sync daemon whose thread had
	// not run yet can fail with ErrNoAnswer wrapping unix.EINTR: the kernel
	// stopped it but sent no answer (see ErrNoAnswer).
	Exec(req Request) error
	// Pipeline returns a way to send many changes without waiting for each
	// answer, with at most window requests in flight.
	Pipeline(window int) Pipeline
	// Close releases the connection.
	Close() error
}

// Pipeline sends changes ahead of their answers. Answers are delivered in
// submission order, each to the done function given with its request, from
// within Submit or Flush. Every submitted request gets exactly one answer: its
// kernel result, or, if the transport fails first, the transport error.
// Submit does not keep req, or what it points to, once it returns (as
// io.Writer does not keep its bytes), so callers may reuse them.
type Pipeline interface {
	// Submit queues req; it blocks while window requests are unanswered,
	// delivering answers as they arrive. The returned error is a transport
	// failure, after which the pipeline is unusable.
	Submit(req Request, done func(error)) error
	// Flush waits until every submitted request has been answered.
	Flush() error
}

// Dumper is implemented by clients that can hand out dump results without
// an allocation per call: a listing of 10,000 services then holds one
// copy of the services and one reused slice of destinations. Conn and
// ipvstest.Fake implement it; DumpServices and AppendDestinations fall
// back to the Client methods for clients that do not.
type Dumper interface {
	// DumpServices calls fn with every service in dump order (as
	// Services). The *Service is reused: it is valid only during the
	// call. Once fn returns an error it is not called again, and that
	// error is returned.
	DumpServices(fn func(*ServiceEntry) error) error
	// AppendDestinations appends svc's destinations to dst in dump order
	// (as Destinations) and returns the extended slice; dst is returned
	// unchanged with an error.
	AppendDestinations(dst []DestinationEntry, svc *Service) ([]DestinationEntry, error)
}

// SkipStats asks c to leave the 64-bit Stats out of its listings (skip
// false: read them again), when it can (Conn can; the fake always
// reports them). It returns a function that restores the setting c had
// before, so calls nest.
func SkipStats(c Reader, skip bool) (undo func()) {
	s, ok := c.(interface{ SkipStats(bool) bool })
	if !ok {
		return func() {}
	}
	was := s.SkipStats(skip)
	return func() { s.SkipStats(was) }
}

// DumpServices calls fn with each of c's services in dump order, through
// Dumper when c implements it.
func DumpServices(c Reader, fn func(*ServiceEntry) error) error {
	if d, ok := c.(Dumper); ok {
		return d.DumpServices(fn)
	}
	svcs, err := c.Services()
	if err != nil {
		return err
	}
	for i := range svcs {
		if err := fn(&svcs[i]); err != nil {
			return err
		}
	}
	return nil
}

// AppendDestinations appends svc's destinations to dst, through Dumper
// when c implements it.
func AppendDestinations(c Reader, dst []DestinationEntry, svc *Service) ([]DestinationEntry, error) {
	if d, ok := c.(Dumper); ok {
		return d.AppendDestinations(dst, svc)
	}
	ds, err := c.Destinations(*svc)
	if err != nil {
		return dst, err
	}
	return append(dst, ds...), nil
}

// EachDestinations calls fn with the destinations of service(0) …
// service(n-1) in that order, as AppendDestinations reads them, holding
// one service's at a time in a reused slice (valid only during the
// call). Once fn fails it is not called again and its error is returned.
// A Conn reads IPv4 services in batches, chain by chain (see
// Conn.EachDestinations).
func EachDestinations(c Reader, n int, service func(i int) *Service, fn func(i int, dests []DestinationEntry) error) error {
	if b, ok := c.(interface {
		EachDestinations(int, func(int) *Service, func(int, []DestinationEntry) error) error
	}); ok {
		return b.EachDestinations(n, service, fn)
	}
	var dests []DestinationEntry
	for i := range n {
		var err error
		if dests, err = AppendDestinations(c, dests[:0], service(i)); err != nil {
			return err
		}
		if err := fn(i, dests); err != nil {
			return err
		}
	}
	return nil
}

// enumName is the name of v in names, indexed by value, else prefix and
// v's number: how each enumeration of the package names its values. Not
// generated with stringer: its fallback, FwdMethod(5), would change the
// words that errors and listings give for values a newer kernel adds.
func enumName[T ~uint8 | ~uint16 | ~uint32](names []string, v T, prefix string) string {
	if uint64(v) < uint64(len(names)) && names[v] != "" {
		return names[v]
	}
	return prefix + strconv.FormatUint(uint64(v), 10)
}
