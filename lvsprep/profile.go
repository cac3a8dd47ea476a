package lvsprep

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/lvskit/lvskit/netfilter"
)

// profile is what one role needs on a host: the steps, in the order they
// are applied (modules first, so that their sysctls and devices exist), and
// the key under which its state file is kept.
type profile struct {
	Name string // "director nat"
	// Key names the state file. It holds only what identifies an instance
	// (the VIP, or the route's family), so --undo needs no other flags.
	Key string
	// Args are the flags that built the profile, in a canonical order: a
	// state file remembers them, and re-applying with different ones is
	// refused rather than mixing two configurations.
	Args []string
	// Devs must exist before anything is changed.
	Devs []string
	// SNAT, when valid, must be an address of this host.
	SNAT netip.Addr
	// VIP, when valid, is a VIP whose services check audits for ECMP.
	VIP netip.Addr
	// VRRPVIP, when valid, is the VIP left to VRRP (--vrrp) on VRRPDev:
	// keepalived adds it on the director that is master and removes it
	// on the others, so no step holds it, and check only reports whether
	// this host holds it now.
	VRRPVIP netip.Prefix
	VRRPDev string
	Steps   []step
}

// leaveVIPToVRRP is p without its VIP step, for directors whose VIP
// moves between them by VRRP: applying it on every director prepares all
// of them alike, and the VIP is only on the one VRRP made master. The
// flag is recorded in the state file like the others.
func leaveVIPToVRRP(p profile) profile {
	for i, s := range p.Steps {
		if s.Kind == kindAddr {
			p.VRRPVIP, p.VRRPDev = s.Addr, s.Dev
			p.Steps = slices.Delete(slices.Clone(p.Steps), i, i+1)
			break
		}
	}
	p.Args = append(slices.Clone(p.Args), "--vrrp")
	return p
}

func (p profile) undoCommand() string {
	flags := p.keyFlags()
	return "lvsprep " + p.Name + " " + strings.Join(flags, " ") + " --undo"
}

// keyFlags are the flags --undo needs to find the state file again.
func (p profile) keyFlags() []string {
	var out []string
	for i := 0; i+1 < len(p.Args); i += 2 {
		if p.Args[i] == "--vip" || p.Args[i] == "--gateway" {
			out = append(out, p.Args[i], p.Args[i+1])
		}
	}
	return out
}

func familyOf(a netip.Addr) netfilter.Family {
	if a.Is6() {
		return netfilter.IPv6
	}
	return netfilter.IPv4
}

func forwardingStep(f netfilter.Family) step {
	s := step{Kind: kindSysctl, Value: "1", Why: "forward packets between clients and real servers"}
	if f == netfilter.IPv6 {
		s.Sysctl = "net/ipv6/conf/all/forwarding"
	} else {
		s.Sysctl = "net/ipv4/ip_forward"
	}
	return s
}

func hostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// arpSteps hide a VIP from ARP on the given interfaces: answer ARP only for
// addresses of the receiving interface (arp_ignore=1), and never use the VIP
// as the source of an ARP request (arp_announce=2), so only the director
// answers for it on the shared segment.
func arpSteps(devs ...string) []step {
	var out []step
	for _, d := range devs {
		out = append(out,
			step{Kind: kindSysctl, Sysctl: netfilter.SysctlPath("net", "ipv4", "conf", d, "arp_ignore"), Value: "1",
				Why: "answer ARP only for addresses of the asking interface, so the VIP stays the director's"},
			step{Kind: kindSysctl, Sysctl: netfilter.SysctlPath("net", "ipv4", "conf", d, "arp_announce"), Value: "2",
				Why: "never announce the VIP as an ARP source address"},
		)
	}
	return out
}

// directorNAT prepares a VS/NAT director: the VIP on dev, forwarding (the
// real servers' replies are routed back through the director, where IPVS
// rewrites them), and masquerading of the real servers' subnet so their own
// outbound connections (updates, DNS) reach the outside.
//
// With ftp, the kernel's FTP helper for IPVS (ip_vs_ftp) is loaded too: in
// VS/NAT it rewrites the real server's address in FTP's passive-mode replies
// and expects the data connection, for services on port 21.
func directorNAT(vip netip.Prefix, dev string, rsNet netip.Prefix, outDev string, ftp bool) profile {
	f := familyOf(vip.Addr())
	rsNet = rsNet.Masked()
	rule := []string{"-s", rsNet.String(), "!", "-d", rsNet.String()}
	if outDev != "" {
		rule = append(rule, "-o", outDev)
	}
	rule = append(rule, "-j", "MASQUERADE")
	args := []string{"--vip", vip.String(), "--dev", dev, "--rs-net", rsNet.String()}
	devs := []string{dev}
	if outDev != "" {
		args = append(args, "--out-dev", outDev)
		devs = append(devs, outDev)
	}
	var steps []step
	if ftp {
		args = append(args, "--ftp")
		steps = append(steps, step{Kind: kindModule, Module: "ip_vs_ftp",
			Why: "FTP helper: rewrites passive-mode replies and expects the data connection"})
	}
	return profile{
		Name: "director nat",
		Key:  "director-nat-" + vip.Addr().String(),
		Args: args,
		Devs: devs,
		Steps: append(steps,
			forwardingStep(f),
			step{Kind: kindAddr, Dev: dev, Addr: vip, Why: "the virtual IP that clients connect to"},
			step{Kind: kindRule, Family: f, Table: "nat", Chain: "POSTROUTING", Rule: rule,
				Why: "real servers' own outbound traffic leaves with the director's address"},
		),
	}
}

// directorDirect prepares a VS/DR or VS/TUN director ("dr" or "tun"): it
// needs the VIP, since IPVS itself forwards the frames (DR) or
// encapsulates the packets (TUN), and the replies bypass it. lvsctl run's
// checks of such real servers go through the VIP and get their answers
// from it, an address of the director's own, which an IPv4 interface
// drops unless it accepts local sources (accept_local).
func directorDirect(mode string, vip netip.Prefix, dev string) profile {
	steps := []step{{Kind: kindAddr, Dev: dev, Addr: vip, Why: "the virtual IP that clients connect to"}}
	if vip.Addr().Is4() {
		steps = append(steps, step{Kind: kindSysctl, Sysctl: netfilter.SysctlPath("net", "ipv4", "conf", dev, "accept_local"), Value: "1",
			Why: "accept the real servers' answers from the VIP to lvsctl run's health probes through it"})
	}
	return profile{
		Name:  "director " + mode,
		Key:   "director-" + mode + "-" + vip.Addr().String(),
		Args:  []string{"--vip", vip.String(), "--dev", dev},
		Devs:  []string{dev},
		Steps: steps,
	}
}

// directorECMP prepares a director that is one of several behind a router
// spreading packets over them with ECMP (each announces the VIP over BGP,
// with BIRD for example). Any director may receive any packet of a flow, so
// every one must pick the same real server without asking the others, and
// forward packets of connections it never saw start:
//
//   - the mh (Maglev hashing) scheduler, loaded here, gives every director
//     the same choice for a flow; check verifies that every service on the
//     VIP uses it with mh-port;
//   - sloppy_tcp and sloppy_sctp let IPVS create a connection from any
//     packet, not only from a SYN (or INIT), after ECMP moved a flow here;
//   - schedule_icmp lets IPVS forward ICMP errors (fragmentation needed)
//     about connections this director does not know;
//   - DR and TUN send replies straight to the clients, so a director sees
//     one direction of each flow, possibly from its middle: no conntrack
//     entries for IPVS connections (vs.conntrack=0) and none for the VIP's
//     packets at all (a raw-table CT --notrack rule), which conntrack would
//     otherwise hold as half-open or invalid;
//   - the VIP as a host address on lo (or a dummy interface given as dev),
//     hidden from ARP, so only the router's BGP routes draw traffic to it;
//   - accept_local on every interface: lvsctl run's probes through the VIP
//     get their answers from it, an address of the director's own.
func directorECMP(vip netip.Addr, dev string) profile {
	f := familyOf(vip)
	steps := []step{
		{Kind: kindModule, Module: "ip_vs", Why: "IPVS itself; its sysctls exist once it is loaded"},
		{Kind: kindModule, Module: "ip_vs_mh", Why: "the Maglev hashing scheduler: every director picks the same real server for a flow"},
		{Kind: kindSysctl, Sysctl: "net/ipv4/vs/sloppy_tcp", Value: "1",
			Why: "forward TCP connections this director did not see start (ECMP moved them here)"},
		{Kind: kindSysctl, Sysctl: "net/ipv4/vs/sloppy_sctp", Value: "1",
			Why: "the same for SCTP associations"},
		{Kind: kindSysctl, Sysctl: "net/ipv4/vs/schedule_icmp", Value: "1",
			Why: "forward ICMP errors (fragmentation needed) about connections this director does not know"},
		{Kind: kindSysctl, Sysctl: "net/ipv4/vs/conntrack", Value: "0",
			Why: "DR and TUN need no conntrack entries for IPVS connections; this director sees one direction only"},
		{Kind: kindLinkUp, Dev: dev, Why: "addresses on " + dev + " are local only while it is up"},
		{Kind: kindAddr, Dev: dev, Addr: hostPrefix(vip), Why: "the VIP, routed here by the router's ECMP route, never claimed on a segment"},
	}
	if vip.Is4() {
		steps = append(steps, arpSteps("all")...)
		steps = append(steps, step{Kind: kindSysctl, Sysctl: "net/ipv4/conf/all/accept_local", Value: "1",
			Why: "accept the real servers' answers from the VIP to lvsctl run's health probes through it"})
	}
	steps = append(steps, step{Kind: kindRule, Family: f, Table: "raw", Chain: "PREROUTING",
		Rule: []string{"-d", hostPrefix(vip).String(), "-j", "CT", "--notrack"},
		Why:  "no conntrack entry for the VIP's packets: this director sees one direction of each flow, maybe from its middle"})
	return profile{
		Name:  "director ecmp",
		Key:   "director-ecmp-" + vip.String(),
		Args:  []string{"--vip", vip.String(), "--dev", dev},
		Devs:  []string{dev},
		VIP:   vip,
		Steps: steps,
	}
}

// directorFullNAT prepares a full-NAT director: VS/NAT (masquerading)
// services whose packets to the real servers also get their client source
// rewritten to snat, a director address, so the real servers answer the
// director without any route change. The rewrite is an iptables SNAT rule
// matching IPVS connections of the VIP (-m ipvs); it applies only when IPVS
// keeps conntrack entries (net.ipv4.vs.conntrack=1).
func directorFullNAT(vip netip.Prefix, dev string, snat netip.Addr, proto string, port int) profile {
	f := familyOf(vip.Addr())
	rule := []string{"-m", "ipvs", "--vaddr", hostPrefix(vip.Addr()).String()}
	args := []string{"--vip", vip.String(), "--dev", dev, "--snat", snat.String()}
	if port != 0 {
		rule = append(rule, "--vproto", proto, "--vport", strconv.Itoa(port))
		args = append(args, "--proto", proto, "--port", strconv.Itoa(port))
	}
	rule = append(rule, "--vmethod", "MASQ", "-j", "SNAT", "--to-source", snat.String())
	return profile{
		Name: "director fullnat",
		Key:  "director-fullnat-" + vip.Addr().String(),
		Args: args,
		Devs: []string{dev},
		SNAT: snat,
		Steps: []step{
			{Kind: kindModule, Module: "ip_vs", Why: "IPVS itself; its sysctls exist once it is loaded"},
			{Kind: kindModule, Module: "xt_ipvs", Why: "the iptables match for IPVS connections (-m ipvs)"},
			forwardingStep(f),
			{Kind: kindSysctl, Sysctl: "net/ipv4/vs/conntrack", Value: "1",
				Why: "keep conntrack entries for IPVS connections, so the SNAT rule applies to them"},
			{Kind: kindAddr, Dev: dev, Addr: vip, Why: "the virtual IP that clients connect to"},
			{Kind: kindRule, Family: f, Table: "nat", Chain: "POSTROUTING", Rule: rule,
				Why: "rewrite the client's address to the director's on the way to the real servers"},
		},
	}
}

// realServerDR prepares a VS/DR real server: the VIP on lo as a host
// address, so packets the director forwards unchanged at layer 2 are
// accepted, hidden from ARP on every interface and on dev, the interface
// facing the director.
func realServerDR(vip netip.Addr, dev string) profile {
	steps := []step{
		{Kind: kindLinkUp, Dev: "lo", Why: "addresses on lo are local only while it is up"},
		{Kind: kindAddr, Dev: "lo", Addr: hostPrefix(vip), Why: "accept packets for the VIP without owning it on the wire"},
	}
	if vip.Is4() {
		steps = append(steps, arpSteps("all", dev)...)
	}
	return profile{
		Name:  "realserver dr",
		Key:   "realserver-dr-" + vip.String(),
		Args:  []string{"--vip", vip.String(), "--dev", dev},
		Devs:  []string{dev},
		Steps: steps,
	}
}

// realServerTUN prepares a VS/TUN real server: the IP-in-IP tunnel module,
// its catch-all device up with the VIP, so decapsulated packets for the VIP
// are accepted, and reverse-path filtering relaxed where it would drop them
// (the client's address is not routed via the tunnel). The VIP is also
// hidden from ARP, on every interface and on dev when given, for real
// servers that share a segment with the director or clients.
func realServerTUN(vip netip.Addr, dev string) profile {
	args := []string{"--vip", vip.String()}
	var devs []string
	if dev != "" {
		args = append(args, "--dev", dev)
		devs = []string{dev}
	}
	var steps []step
	if vip.Is4() {
		steps = []step{
			{Kind: kindModule, Module: "ipip", Why: "IP-in-IP decapsulation; creates tunl0"},
			{Kind: kindLinkUp, Dev: "tunl0", Why: "receive encapsulated packets from the director"},
			{Kind: kindAddr, Dev: "tunl0", Addr: hostPrefix(vip), Why: "accept decapsulated packets for the VIP"},
			{Kind: kindSysctl, Sysctl: "net/ipv4/conf/tunl0/rp_filter", Value: "0",
				Why: "the client is not reachable via tunl0; a reverse-path check there would drop its packets"},
			{Kind: kindSysctl, Sysctl: "net/ipv4/conf/all/rp_filter", Value: "2", Accept: []string{"0"},
				Why: "the kernel uses the larger of all and tunl0: strict (1) on all would still drop them"},
		}
		steps = append(steps, arpSteps(append([]string{"all"}, devs...)...)...)
	} else {
		steps = []step{
			{Kind: kindModule, Module: "ip6_tunnel", Why: "IPv6-in-IPv6 decapsulation; creates ip6tnl0"},
			{Kind: kindLinkUp, Dev: "ip6tnl0", Why: "receive encapsulated packets from the director"},
			{Kind: kindAddr, Dev: "ip6tnl0", Addr: hostPrefix(vip), Why: "accept decapsulated packets for the VIP"},
		}
	}
	return profile{
		Name:  "realserver tun",
		Key:   "realserver-tun-" + vip.String(),
		Args:  args,
		Devs:  devs,
		Steps: steps,
	}
}

// realServerNAT prepares a VS/NAT real server: its default route via the
// director, so replies go back through it to be rewritten. Other default
// routes of the family are removed (and put back by --undo), since any of
// them could carry replies past the director.
func realServerNAT(gateway netip.Addr, dev string) profile {
	args := []string{"--gateway", gateway.String()}
	var devs []string
	if dev != "" {
		args = append(args, "--dev", dev)
		devs = []string{dev}
	}
	f := familyOf(gateway)
	return profile{
		Name: "realserver nat",
		Key:  "realserver-nat-" + f.String(),
		Args: args,
		Devs: devs,
		Steps: []step{{Kind: kindRoute, Route: &netfilter.Route{Gateway: gateway, Dev: dev},
			Why: "replies must go back through the director to be rewritten"}},
	}
}

// describe is a one-line summary of a profile for messages.
func (p profile) describe() string {
	return fmt.Sprintf("%s %s", p.Name, strings.Join(p.Args, " "))
}
