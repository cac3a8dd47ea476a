package lvsprep

import (
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"

	"github.com/alecthomas/kong"

	"github.com/lvskit/lvskit/lvsprep/birdconf"
)

// The bird commands print a BIRD 2 configuration (lvsprep/birdconf) to
// stdout and change nothing: they read the host only to find the default
// router id and, for a director's --ipv6, whether BIRD will have an IPv6
// next hop to give (a warning when not). Every flag is checked before
// anything is printed.

type birdCmds struct {
	Director birdDirectorCmd `cmd:"" help:"A director's bird.conf: the addresses on --device (lvsctl run's VIPs) announced to the router, nothing imported."`
	Router   birdRouterCmd   `cmd:"" help:"The router's bird.conf: a session per director, host routes only imported, one multipath route per VIP."`
}

type birdDirectorCmd struct {
	Router   string   `name:"router" required:"" placeholder:"ADDR" help:"The router's IPv4 address on the link to this director."`
	RouterAS string   `name:"router-as" required:"" placeholder:"ASN" help:"The router's AS number."`
	AS       string   `name:"as" required:"" placeholder:"ASN" help:"The directors' AS number."`
	RouterID string   `name:"router-id" placeholder:"ADDR" help:"BIRD's router id and the session's local address (default: the address this host uses to reach --router)."`
	Device   string   `name:"device" default:"${announcedev}" placeholder:"IFACE" help:"Interface whose addresses are announced: lvsctl run's (default: ${default})."`
	Static   []string `name:"static" placeholder:"VIP" help:"Announce this VIP always, by protocol static instead of --device: for directors without lvsctl run. Repeatable."`
	IPv6     bool     `name:"ipv6" help:"Announce IPv6 addresses too, over the same IPv4 session; their next hop is this host's IPv6 address (not link-local) on the link to --router."`
	Hold     int      `name:"hold" default:"3" placeholder:"SECONDS" help:"BGP hold time: a director that dies silently is withdrawn after it; at least 3 (default: ${default})."`
	BFD      bool     `name:"bfd" help:"Add BFD to the session: a silent director is withdrawn within 0.9 s."`
}

type birdRouterCmd struct {
	AS         string   `name:"as" required:"" placeholder:"ASN" help:"The router's AS number."`
	DirectorAS string   `name:"director-as" required:"" placeholder:"ASN" help:"The directors' AS number."`
	Director   []string `name:"director" required:"" placeholder:"ADDR" help:"A director's IPv4 address on the router's link. Repeat for each director."`
	Prefix     []string `name:"prefix" placeholder:"PREFIX" help:"Accept this prefix from the directors besides host routes: a service's announce: PREFIX. Repeatable."`
	RouterID   string   `name:"router-id" placeholder:"ADDR" help:"BIRD's router id and the sessions' local address (default: the address this host uses to reach the first --director)."`
	IPv6       bool     `name:"ipv6" help:"Accept IPv6 VIPs (/128) too; each director's next hop must be in an IPv6 prefix of this host's on the link."`
	Hold       int      `name:"hold" default:"3" placeholder:"SECONDS" help:"BGP hold time: a director that dies silently is withdrawn after it; at least 3 (default: ${default})."`
	BFD        bool     `name:"bfd" help:"Add BFD to the sessions: a silent director is withdrawn within 0.9 s."`
}

// birdConfig is a bird command: it builds its configuration from the
// flags, reading h only for the default router id.
type birdConfig interface {
	config(h *Host) (string, error)
}

func printBird(kctx *kong.Context, h *Host, out, errOut io.Writer) error {
	b, ok := kctx.Selected().Target.Addr().Interface().(birdConfig)
	if !ok {
		return fmt.Errorf("internal error: %q is not a bird command", kctx.Command())
	}
	conf, err := b.config(h)
	if err != nil {
		return err
	}
	if d, ok := b.(*birdDirectorCmd); ok {
		if w := d.ipv6Warning(h); w != "" {
			fmt.Fprintf(errOut, "lvsprep: warning: %s\n", w)
		}
	}
	_, err = io.WriteString(out, conf)
	return err
}

// ipv6Warning says when --ipv6 cannot work on this host as it is: BIRD
// gives an IPv6 route over the IPv4 session a next hop from the IPv6
// addresses of the link to --router, link-local ones excepted, and with
// none it refuses the route ("Missing next hop address").
func (c *birdDirectorCmd) ipv6Warning(h *Host) string {
	if !c.IPv6 || h.Links == nil || h.SourceAddr == nil {
		return ""
	}
	router, err := parseIPv4("--router", c.Router)
	if err != nil {
		return ""
	}
	src, err := h.SourceAddr(router)
	if err != nil {
		return ""
	}
	names, err := h.Links.Names()
	if err != nil {
		return ""
	}
	for _, dev := range names {
		addrs, err := h.Links.Addrs(dev)
		if err != nil || !slices.ContainsFunc(addrs, func(p netip.Prefix) bool { return p.Addr() == src }) {
			continue
		}
		if slices.ContainsFunc(addrs, func(p netip.Prefix) bool { a := p.Addr(); return a.Is6() && !a.IsLinkLocalUnicast() }) {
			return ""
		}
		return fmt.Sprintf("%s, this host's link to --router %s, has no IPv6 address but link-local ones: BIRD will refuse every IPv6 VIP (\"Missing next hop address\") until it has one in the router's IPv6 prefix", dev, router)
	}
	return ""
}

// parseAS accepts an AS number in plain notation, 1 to 4294967295.
func parseAS(flag, s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 0 {
		return 0, usagef("%s %q: not an AS number (1-4294967295)", flag, s)
	}
	return uint32(n), nil
}

func parseIPv4(flag, s string) (netip.Addr, error) {
	a, err := parseAddr(flag, s)
	if err != nil {
		return netip.Addr{}, err
	}
	if !a.Is4() {
		return netip.Addr{}, usagef("%s %s: not an IPv4 address (the BGP sessions run over IPv4)", flag, a)
	}
	return a, nil
}

func checkHold(hold int) error {
	if hold < birdconf.MinHold || hold > 65535 {
		return usagef("--hold %d: out of range %d-65535 seconds", hold, birdconf.MinHold)
	}
	return nil
}

// routerID is --router-id, or the IPv4 address this host sends from to
// reach peer.
func routerID(h *Host, flag string, peer netip.Addr, what string) (netip.Addr, error) {
	if flag != "" {
		return parseIPv4("--router-id", flag)
	}
	if h.SourceAddr == nil {
		return netip.Addr{}, usagef("--router-id is required here")
	}
	a, err := h.SourceAddr(peer)
	if err != nil || !a.Is4() {
		return netip.Addr{}, usagef("no address of this host reaches %s %s (%v): give --router-id", what, peer, err)
	}
	return a, nil
}

func (c *birdDirectorCmd) config(h *Host) (string, error) {
	d := birdconf.Director{Device: c.Device, IPv6: c.IPv6, Hold: c.Hold, BFD: c.BFD}
	var err error
	if d.Router, err = parseIPv4("--router", c.Router); err != nil {
		return "", err
	}
	if d.RouterAS, err = parseAS("--router-as", c.RouterAS); err != nil {
		return "", err
	}
	if d.AS, err = parseAS("--as", c.AS); err != nil {
		return "", err
	}
	if err := checkDev("--device", c.Device, true); err != nil {
		return "", err
	}
	for _, s := range c.Static {
		vip, err := parseHostVIP("--static", s)
		if err != nil {
			return "", err
		}
		d.Static = append(d.Static, vip)
	}
	if err := checkHold(c.Hold); err != nil {
		return "", err
	}
	if d.RouterID, err = routerID(h, c.RouterID, d.Router, "--router"); err != nil {
		return "", err
	}
	if d.RouterID == d.Router {
		return "", usagef("--router-id %s is --router's address", d.RouterID)
	}
	return d.Config()
}

func (c *birdRouterCmd) config(h *Host) (string, error) {
	r := birdconf.Router{IPv6: c.IPv6, Hold: c.Hold, BFD: c.BFD}
	var err error
	if r.AS, err = parseAS("--as", c.AS); err != nil {
		return "", err
	}
	if r.DirectorAS, err = parseAS("--director-as", c.DirectorAS); err != nil {
		return "", err
	}
	for _, s := range c.Director {
		a, err := parseIPv4("--director", s)
		if err != nil {
			return "", err
		}
		for _, b := range r.Directors {
			if a == b {
				return "", usagef("--director %s: given twice", a)
			}
		}
		r.Directors = append(r.Directors, a)
	}
	for _, s := range c.Prefix {
		p, err := netip.ParsePrefix(s)
		if err != nil || p != p.Masked() || p.Addr().Zone() != "" || p.Addr().Is4In6() {
			return "", usagef("--prefix %q: not a prefix with its host bits 0 (ADDR/LEN)", s)
		}
		r.Prefixes = append(r.Prefixes, p)
	}
	if err := checkHold(c.Hold); err != nil {
		return "", err
	}
	if r.RouterID, err = routerID(h, c.RouterID, r.Directors[0], "--director"); err != nil {
		return "", err
	}
	for _, b := range r.Directors {
		if b == r.RouterID {
			return "", usagef("--router-id %s is a --director's address", b)
		}
	}
	return r.Config()
}
