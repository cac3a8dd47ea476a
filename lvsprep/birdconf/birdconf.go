// Package birdconf writes the BIRD 2 configurations of a BGP ECMP group.
package birdconf

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// DefaultDevice is the interface whose addresses a director announces:
// the one `lvsctl run` keeps its servable VIPs on (package announce).
const DefaultDevice = "lvs-announce"

// MinHold is the shortest BGP hold time BIRD accepts (RFC 4271: 0 or at
// least 3 s; 0, no hold time, would never withdraw a silent director).
const MinHold = 3

// Director is one director's side of the group: one BGP session to the
// router on a shared link, exporting only the routes of the announcing
// protocol and importing nothing.
type Director struct {
	// RouterID is BIRD's router id and the session's local address: the
	// director's IPv4 address on the link to the router.
	RouterID netip.Addr
	AS       uint32
	Router   netip.Addr
	RouterAS uint32
	// Device is the interface whose addresses are announced by protocol
	// direct (DefaultDevice when empty). Ignored when Static is set.
	Device string
	// Static, when set, announces these VIPs unconditionally by protocol
	// static instead: the recipe without `lvsctl run`.
	Static []netip.Addr
	// IPv6 adds the ipv6 channels (implied by an IPv6 address in Static),
	// carried by the IPv4 session. BIRD sends the director's first global
	// (or ULA) IPv6 address on the link as the routes' next hop, taken
	// when the session comes up: without one it announces no IPv6 route
	// ("Missing next hop address").
	IPv6 bool
	// Hold is the BGP hold time in seconds, at least MinHold.
	Hold int
	// BFD adds a BFD session beside the BGP one.
	BFD bool
	// Log is the log target: "" for syslog, or "stderr" (the lab's).
	Log string
}

// Router is the router's side: one session per director, host routes
// only imported, and the directors' equal routes merged into one
// multipath kernel route.
type Router struct {
	// RouterID is BIRD's router id and the sessions' local address: the
	// router's IPv4 address on the directors' link.
	RouterID   netip.Addr
	AS         uint32
	DirectorAS uint32
	Directors  []netip.Addr
	// Prefixes are accepted from the directors besides host routes: those
	// of services announced under a prefix (a desired state's
	// `announce: PREFIX`).
	Prefixes []netip.Prefix
	// IPv6 accepts IPv6 routes too, over the same sessions. Their next
	// hop, a director's IPv6 address on the link, must be in a prefix of
	// the router's own on that link, or BIRD refuses the route ("not
	// directly reachable").
	IPv6 bool
	Hold int
	BFD  bool
	Log  string
}

// proto names the protocol announcing a family's routes: protocol direct
// has both channels under one name; protocol static has one channel, so
// IPv6 gets its own.
func (d Director) proto(v6 bool) string {
	if v6 && len(d.Static) > 0 {
		return "announced6"
	}
	return "announced"
}

// Config returns the director's bird.conf, or why the fields cannot make
// one.
func (d Director) Config() (string, error) {
	if err := checkIPv4("router id", d.RouterID); err != nil {
		return "", err
	}
	if err := checkIPv4("router", d.Router); err != nil {
		return "", err
	}
	if d.AS == 0 || d.RouterAS == 0 {
		return "", errors.New("AS numbers are 1-4294967295")
	}
	if err := checkHold(d.Hold); err != nil {
		return "", err
	}
	dev := d.Device
	if dev == "" {
		dev = DefaultDevice
	}
	if strings.ContainsAny(dev, "\"\\\n") {
		return "", fmt.Errorf("device %q: not an interface name", dev)
	}
	var v4, v6 []netip.Addr
	for _, a := range d.Static {
		if !a.IsValid() || a.Zone() != "" {
			return "", fmt.Errorf("static VIP %v: not an address", a)
		}
		if a.Unmap().Is4() {
			v4 = append(v4, a.Unmap())
		} else {
			v6 = append(v6, a)
		}
	}
	ipv6 := d.IPv6 || len(v6) > 0
	var b strings.Builder
	header(&b, d.RouterID, d.Log, d.BFD)
	if len(d.Static) == 0 {
		// protocol direct makes a route of every address on the device,
		// and takes it back when the address or the device goes: the
		// route follows `lvsctl run`'s health checks and its life.
		fmt.Fprintf(&b, "protocol direct announced {\n\tipv4;\n")
		if ipv6 {
			b.WriteString("\tipv6;\n")
		}
		fmt.Fprintf(&b, "\tinterface \"%s\";\n}\n", dev)
	} else {
		// unreachable: the route exists only to be exported; BIRD has no
		// kernel protocol here, so it never reaches the director's table.
		staticProto(&b, "announced", "ipv4", v4, 32)
		staticProto(&b, "announced6", "ipv6", v6, 128)
	}
	fmt.Fprintf(&b, "protocol bgp uplink {\n\tlocal %s as %d;\n\tneighbor %s as %d;\n", d.RouterID, d.AS, d.Router, d.RouterAS)
	session(&b, d.Hold, d.BFD)
	// Nothing is imported: the director routes by its own table. Only the
	// announcing protocol's routes are exported, never a route that
	// another protocol may add to this config later.
	fmt.Fprintf(&b, "\tipv4 { import none; export where proto = \"%s\"; };\n", d.proto(false))
	if ipv6 {
		fmt.Fprintf(&b, "\tipv6 { import none; export where proto = \"%s\"; };\n", d.proto(true))
	}
	b.WriteString("}\n")
	return b.String(), nil
}

func staticProto(b *strings.Builder, name, channel string, vips []netip.Addr, bits int) {
	if len(vips) == 0 {
		return
	}
	fmt.Fprintf(b, "protocol static %s {\n\t%s;\n", name, channel)
	for _, a := range vips {
		fmt.Fprintf(b, "\troute %s/%d unreachable;\n", a, bits)
	}
	b.WriteString("}\n")
}

// Config returns the router's bird.conf, or why the fields cannot make
// one.
func (r Router) Config() (string, error) {
	if err := checkIPv4("router id", r.RouterID); err != nil {
		return "", err
	}
	if r.AS == 0 || r.DirectorAS == 0 {
		return "", errors.New("AS numbers are 1-4294967295")
	}
	if err := checkHold(r.Hold); err != nil {
		return "", err
	}
	if len(r.Directors) == 0 {
		return "", errors.New("no director")
	}
	seen := map[netip.Addr]bool{}
	for _, a := range r.Directors {
		if err := checkIPv4("director", a); err != nil {
			return "", err
		}
		if seen[a] || a == r.RouterID {
			return "", fmt.Errorf("director %s: given twice, or the router's own address", a)
		}
		seen[a] = true
	}
	ipv6 := r.IPv6
	for _, p := range r.Prefixes {
		if !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
			return "", fmt.Errorf("prefix %v: not a prefix with its host bits 0", p)
		}
		ipv6 = ipv6 || p.Addr().Is6()
	}
	var b strings.Builder
	header(&b, r.RouterID, r.Log, r.BFD)
	// merge paths: the directors' equal routes to a VIP become one
	// multipath route, which the kernel spreads by its multipath hash
	// (net.ipv4.fib_multipath_hash_policy); without it BIRD installs one
	// director's route only. Only BGP's routes go to the kernel, and
	// nothing comes from it.
	for _, f := range families(ipv6) {
		fmt.Fprintf(&b, "protocol kernel {\n\t%s { import none; export where source = RTS_BGP; };\n\tmerge paths on;\n}\n", f.channel)
	}
	// One template, so every session has the same timers and filters.
	// direct: the directors share the router's link, so a session ends
	// when that link goes down, without waiting for the hold time.
	fmt.Fprintf(&b, "template bgp director {\n\tlocal %s as %d;\n", r.RouterID, r.AS)
	session(&b, r.Hold, r.BFD)
	// A director may announce host routes only (its VIPs): a mistake on
	// one director can never pull a subnet, or the default route, to it.
	// The prefixes listed are accepted too, exactly those. The router
	// announces nothing.
	for _, f := range families(ipv6) {
		cond := fmt.Sprintf("net.len = %d", f.bits)
		for _, p := range r.Prefixes {
			if p.Addr().Is6() == (f.bits == 128) {
				cond += fmt.Sprintf(" || net = %s", p)
			}
		}
		fmt.Fprintf(&b, "\t%s { import where %s; export none; };\n", f.channel, cond)
	}
	b.WriteString("}\n")
	for _, a := range r.Directors {
		fmt.Fprintf(&b, "protocol bgp director_%s from director { neighbor %s as %d; }\n",
			strings.ReplaceAll(a.String(), ".", "_"), a, r.DirectorAS)
	}
	return b.String(), nil
}

type family struct {
	channel string
	bits    int
}

func families(ipv6 bool) []family {
	if ipv6 {
		return []family{{"ipv4", 32}, {"ipv6", 128}}
	}
	return []family{{"ipv4", 32}}
}

// header is what both sides start with: the router id, the log, the
// device protocol (which tells BIRD about interfaces and their
// addresses, needed by direct sessions and protocol direct) and BFD.
func header(b *strings.Builder, id netip.Addr, log string, bfd bool) {
	fmt.Fprintf(b, "router id %s;\n", id)
	if log == "" {
		// Debian's default: everything but debug and trace.
		b.WriteString("log syslog { info, remote, warning, error, auth, fatal, bug };\n")
	} else {
		fmt.Fprintf(b, "log %s all;\n", log)
	}
	// scan time: BIRD also learns of changes from netlink at once; the
	// scan is a fallback.
	b.WriteString("protocol device { scan time 10; }\n")
	if bfd {
		// A failure is detected after 3 missed packets 300 ms apart,
		// well inside the hold time; why not faster: decision 0017.
		b.WriteString("protocol bfd {\n\tinterface \"*\" { min rx interval 300 ms; min tx interval 300 ms; multiplier 3; };\n}\n")
	}
}

// session writes a BGP session's timers and options, the lab's proven
// ones (e2e/ecmp_lab_test.go). A director that stops BIRD cleanly ends
// its session with a notification and is withdrawn at once; one that
// dies without a word is withdrawn when the hold time runs out, so it is
// short (BIRD's default is 240 s). Keepalives go three times per hold
// time, as RFC 4271 suggests (BIRD's default: 80 s). A session that ended
// is retried after a second (BIRD waits 5 s before connecting and 60 s
// after an error), and the error wait grows to at most 5 s if the
// session keeps failing.
func session(b *strings.Builder, hold int, bfd bool) {
	fmt.Fprintf(b, "\tdirect;\n\thold time %d;\n\tkeepalive time %d;\n\tconnect delay time 1;\n\tconnect retry time 1;\n\terror wait time 1, 5;\n",
		hold, max(1, hold/3))
	if bfd {
		b.WriteString("\tbfd on;\n")
	}
}

func checkIPv4(what string, a netip.Addr) error {
	if !a.IsValid() || !a.Unmap().Is4() {
		return fmt.Errorf("%s %v: not an IPv4 address (BGP runs over IPv4 here)", what, a)
	}
	return nil
}

func checkHold(hold int) error {
	if hold < MinHold || hold > 65535 {
		return fmt.Errorf("hold time %d: out of range %d-65535 seconds", hold, MinHold)
	}
	return nil
}
