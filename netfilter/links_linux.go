package netfilter

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Netlink is the real Links, talking rtnetlink in the calling thread's
// network namespace.
type Netlink struct{}

var _ Links = Netlink{}

func linkByName(dev string) (netlink.Link, error) {
	l, err := netlink.LinkByName(dev)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("%q: %w", dev, ErrNoLink)
		}
		return nil, fmt.Errorf("looking up interface %q: %w", dev, err)
	}
	return l, nil
}

// consistent runs a netlink dump until the kernel reports it was not
// interrupted: a dump that ran while the table changed (NLM_F_DUMP_INTR,
// which the library reports as ErrDumpInterrupted beside its results)
// may have skipped or repeated entries. Changes racing a dump end soon;
// ten tries bound the wait.
func consistent[T any](dump func() ([]T, error)) ([]T, error) {
	for range 9 {
		r, err := dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return r, err
		}
	}
	return dump()
}

// Names lists the interfaces.
func (Netlink) Names() ([]string, error) {
	ls, err := consistent(netlink.LinkList)
	if err != nil {
		return nil, fmt.Errorf("listing interfaces: %w", err)
	}
	names := make([]string, 0, len(ls))
	for _, l := range ls {
		names = append(names, l.Attrs().Name)
	}
	return names, nil
}

// IsUp reports the interface's IFF_UP flag.
func (Netlink) IsUp(dev string) (bool, error) {
	l, err := linkByName(dev)
	if err != nil {
		return false, err
	}
	return l.Attrs().Flags&net.FlagUp != 0, nil
}

// SetUp sets the interface up or down.
func (Netlink) SetUp(dev string, up bool) error {
	l, err := linkByName(dev)
	if err != nil {
		return err
	}
	if up {
		err = netlink.LinkSetUp(l)
	} else {
		err = netlink.LinkSetDown(l)
	}
	if err != nil {
		return fmt.Errorf("setting %s up=%t: %w", dev, up, err)
	}
	return nil
}

func toPrefix(n *net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}

func toIPNet(p netip.Prefix) *net.IPNet {
	a := p.Addr()
	return &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(p.Bits(), a.BitLen())}
}

func toIP(a netip.Addr) net.IP {
	if !a.IsValid() {
		return nil
	}
	return a.AsSlice()
}

// Addrs lists the interface's addresses.
func (Netlink) Addrs(dev string) ([]netip.Prefix, error) {
	l, err := linkByName(dev)
	if err != nil {
		return nil, err
	}
	as, err := consistent(func() ([]netlink.Addr, error) { return netlink.AddrList(l, netlink.FAMILY_ALL) })
	if err != nil {
		return nil, fmt.Errorf("listing addresses of %s: %w", dev, err)
	}
	var out []netip.Prefix
	for _, a := range as {
		if p, ok := toPrefix(a.IPNet); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// AddAddr adds the address with global scope. IPv6 addresses skip duplicate
// address detection (a VIP is meant to be shared, and DAD would keep it
// unusable for a second or so).
func (Netlink) AddAddr(dev string, addr netip.Prefix) error {
	l, err := linkByName(dev)
	if err != nil {
		return err
	}
	na := &netlink.Addr{IPNet: toIPNet(addr)}
	if addr.Addr().Is6() {
		na.Flags = unix.IFA_F_NODAD
	}
	if err := netlink.AddrAdd(l, na); err != nil {
		return fmt.Errorf("adding %s to %s: %w", addr, dev, err)
	}
	return nil
}

// DelAddr removes the address.
func (Netlink) DelAddr(dev string, addr netip.Prefix) error {
	l, err := linkByName(dev)
	if err != nil {
		return err
	}
	if err := netlink.AddrDel(l, &netlink.Addr{IPNet: toIPNet(addr)}); err != nil {
		return fmt.Errorf("removing %s from %s: %w", addr, dev, err)
	}
	return nil
}

func nlFamily(f Family) int {
	if f == IPv6 {
		return netlink.FAMILY_V6
	}
	return netlink.FAMILY_V4
}

// DefaultRoutes lists the family's default routes in the main table.
func (Netlink) DefaultRoutes(f Family) ([]Route, error) {
	rs, err := consistent(func() ([]netlink.Route, error) { return netlink.RouteList(nil, nlFamily(f)) })
	if err != nil {
		return nil, fmt.Errorf("listing %s routes: %w", f, err)
	}
	var out []Route
	for _, r := range rs {
		if r.Dst != nil {
			if ones, _ := r.Dst.Mask.Size(); ones != 0 {
				continue
			}
		}
		if r.Type != unix.RTN_UNICAST {
			continue
		}
		rt := Route{Metric: r.Priority, Protocol: int(r.Protocol)}
		if g, ok := netip.AddrFromSlice(r.Gw); ok {
			rt.Gateway = g.Unmap()
		}
		if s, ok := netip.AddrFromSlice(r.Src); ok {
			rt.Src = s.Unmap()
		}
		if r.LinkIndex > 0 {
			l, err := netlink.LinkByIndex(r.LinkIndex)
			if err != nil {
				return nil, fmt.Errorf("looking up interface %d of %s: %w", r.LinkIndex, rt, err)
			}
			rt.Dev = l.Attrs().Name
		}
		out = append(out, rt)
	}
	return out, nil
}

func toNetlinkRoute(r Route) (*netlink.Route, error) {
	nr := &netlink.Route{
		Gw:       toIP(r.Gateway),
		Src:      toIP(r.Src),
		Priority: r.Metric,
		Protocol: netlink.RouteProtocol(r.Protocol),
		Table:    unix.RT_TABLE_MAIN,
	}
	bits := 32
	if r.Family() == IPv6 {
		bits = 128
	}
	zero := netip.IPv4Unspecified()
	if bits == 128 {
		zero = netip.IPv6Unspecified()
	}
	nr.Dst = toIPNet(netip.PrefixFrom(zero, 0))
	if r.Dev != "" {
		l, err := linkByName(r.Dev)
		if err != nil {
			return nil, err
		}
		nr.LinkIndex = l.Attrs().Index
	}
	return nr, nil
}

// AddRoute adds the default route.
func (Netlink) AddRoute(r Route) error {
	nr, err := toNetlinkRoute(r)
	if err != nil {
		return err
	}
	if nr.Protocol == 0 {
		nr.Protocol = unix.RTPROT_BOOT // what ip(8) route add uses
	}
	if err := netlink.RouteAdd(nr); err != nil {
		return fmt.Errorf("adding route %s: %w", r, err)
	}
	return nil
}

// ReplaceRoute replaces the default route of the same metric, or adds r.
func (Netlink) ReplaceRoute(r Route) error {
	nr, err := toNetlinkRoute(r)
	if err != nil {
		return err
	}
	if nr.Protocol == 0 {
		nr.Protocol = unix.RTPROT_BOOT
	}
	if err := netlink.RouteReplace(nr); err != nil {
		return fmt.Errorf("replacing route %s: %w", r, err)
	}
	return nil
}

// DelRoute removes the default route.
func (Netlink) DelRoute(r Route) error {
	nr, err := toNetlinkRoute(r)
	if err != nil {
		return err
	}
	if err := netlink.RouteDel(nr); err != nil {
		return fmt.Errorf("removing route %s: %w", r, err)
	}
	return nil
}
