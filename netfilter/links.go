package netfilter

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// ErrNoLink is matched (errors.Is) by errors about a network interface that
// does not exist.
var ErrNoLink = errors.New("no such network interface")

// Links reads and changes network interfaces, their addresses and the main
// table's default routes: exactly what lvsprep's profiles touch.
type Links interface {
	// Names lists the interfaces.
	Names() ([]string, error)
	// IsUp reports whether the interface is administratively up.
	IsUp(dev string) (bool, error)
	SetUp(dev string, up bool) error
	// Addrs lists the interface's addresses with their prefix lengths.
	Addrs(dev string) ([]netip.Prefix, error)
	AddAddr(dev string, addr netip.Prefix) error
	DelAddr(dev string, addr netip.Prefix) error
	// DefaultRoutes lists the family's default routes in the main table.
	DefaultRoutes(f Family) ([]Route, error)
	AddRoute(r Route) error
	// ReplaceRoute puts r in place of the family's default route with the
	// same metric in one step (the kernel's NLM_F_REPLACE), or adds it when
	// there is none: the host is never without a default route in between.
	ReplaceRoute(r Route) error
	DelRoute(r Route) error
}

// Route is a default route in the main table, with the attributes needed to
// put it back exactly as it was.
type Route struct {
	Gateway  netip.Addr `json:"gateway,omitzero"`
	Dev      string     `json:"dev,omitempty"`
	Metric   int        `json:"metric,omitempty"`
	Src      netip.Addr `json:"src,omitzero"`
	Protocol int        `json:"protocol,omitempty"` // rtm_protocol; 0 lets the kernel choose (boot)
}

// Family is the route's address family, from its gateway (IPv4 when it has
// none).
func (r Route) Family() Family {
	if r.Gateway.Is6() && !r.Gateway.Is4In6() {
		return IPv6
	}
	return IPv4
}

// protocolNames are iproute2's names for the common rtm_protocol values
// (/usr/share/iproute2/rt_protos).
var protocolNames = map[int]string{2: "kernel", 3: "boot", 4: "static", 16: "dhcp", 186: "bgp", 188: "ospf"}

// Args is the route as ip(8) route arguments after "default", e.g.
// "via 172.16.0.1 dev eth0 metric 100".
func (r Route) Args() []string {
	var a []string
	if r.Gateway.IsValid() {
		a = append(a, "via", r.Gateway.String())
	}
	if r.Dev != "" {
		a = append(a, "dev", r.Dev)
	}
	if r.Metric != 0 {
		a = append(a, "metric", strconv.Itoa(r.Metric))
	}
	if r.Src.IsValid() {
		a = append(a, "src", r.Src.String())
	}
	if r.Protocol != 0 && r.Protocol != 3 {
		p, ok := protocolNames[r.Protocol]
		if !ok {
			p = strconv.Itoa(r.Protocol)
		}
		a = append(a, "proto", p)
	}
	return a
}

func (r Route) String() string {
	return strings.Join(append([]string{"default"}, r.Args()...), " ")
}
