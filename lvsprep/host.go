package lvsprep

import (
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/lvskit/lvskit/internal/netnsid"
	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/netfilter"
)

// Host is everything lvsprep reads and changes on a machine. Main uses the
// real one; tests build one from netfilter's fakes.
type Host struct {
	Sysctl  netfilter.Sysctl
	Links   netfilter.Links
	Modules netfilter.Modules
	// IPTables returns the rule table client for a family; it is called only
	// when a profile has rules, because the real one needs the iptables
	// command.
	IPTables func(netfilter.Family) (netfilter.IPTables, error)
	// IPVS opens the kernel's IPVS tables, which check reads for the ECMP
	// profile.
	IPVS func() (ipvs.Client, error)
	// IsRoot reports whether changes may be attempted.
	IsRoot func() bool
	Now    func() time.Time
	// StateDir is the default for --state-dir.
	StateDir string
	// UID is a user whose state files are trusted besides root's: the
	// effective user, so that a read-only run by another user (check,
	// status, --dry-run) can read its own; -1 trusts root alone.
	UID int
	// Identity tells which network namespace instance lvsprep runs in
	// (nil: not checked).
	Identity func() (netnsid.Identity, error)
	// SourceAddr returns the address this host sends from to reach an
	// address, from its routing table; it sends nothing.
	SourceAddr func(to netip.Addr) (netip.Addr, error)

	ipt map[netfilter.Family]netfilter.IPTables
}

func (h *Host) iptables(f netfilter.Family) (netfilter.IPTables, error) {
	if ipt, ok := h.ipt[f]; ok {
		return ipt, nil
	}
	ipt, err := h.IPTables(f)
	if err != nil {
		return nil, err
	}
	if h.ipt == nil {
		h.ipt = map[netfilter.Family]netfilter.IPTables{}
	}
	h.ipt[f] = ipt
	return ipt, nil
}

// RealHost is the machine lvsprep runs on, in the current network
// namespace, with mods loading and unloading kernel modules (the command
// passes one that runs modprobe(8)).
func RealHost(mods netfilter.Modules) *Host {
	return &Host{
		Sysctl:     netfilter.ProcSys{},
		Links:      netfilter.Netlink{},
		Modules:    mods,
		IPTables:   netfilter.NewIPTables,
		IPVS:       openIPVS,
		IsRoot:     func() bool { return os.Geteuid() == 0 },
		Now:        time.Now,
		StateDir:   netnsid.Dir(defaultStateDir),
		UID:        os.Geteuid(),
		Identity:   netnsid.Current,
		SourceAddr: sourceAddr,
	}
}

func openIPVS() (ipvs.Client, error) {
	c, err := ipvs.Open()
	if err != nil {
		return nil, err
	}
	return c, nil
}

// sourceAddr asks the kernel which address a datagram to "to" would leave
// from: connecting a UDP socket chooses the route and source and sends
// nothing.
func sourceAddr(to netip.Addr) (netip.Addr, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(to, 179)))
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}
