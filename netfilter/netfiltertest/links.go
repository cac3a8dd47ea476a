package netfiltertest

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/lvskit/lvskit/netfilter"
)

// FakeLinks is an in-memory Links. It behaves like the kernel where lvsprep
// depends on it: unknown interfaces give ErrNoLink, adding an address or
// route that exists fails, removing a missing one fails. Faults makes an
// operation fail: the key is the method name ("AddAddr", "SetUp", ...).
type FakeLinks struct {
	Links  map[string]*FakeLink
	Routes []netfilter.Route
	Faults map[string]error
}

// FakeLink is one interface of a FakeLinks.
type FakeLink struct {
	Up    bool
	Addrs []netip.Prefix
}

// NewFakeLinks returns a fake with the given interfaces, all down and without
// addresses, except lo, which is up with 127.0.0.1/8 and ::1/128 as on a
// real host.
func NewFakeLinks(names ...string) *FakeLinks {
	f := &FakeLinks{Links: map[string]*FakeLink{}, Faults: map[string]error{}}
	f.Links["lo"] = &FakeLink{Up: true, Addrs: []netip.Prefix{
		netip.MustParsePrefix("127.0.0.1/8"), netip.MustParsePrefix("::1/128")}}
	for _, n := range names {
		f.Links[n] = &FakeLink{}
	}
	return f
}

var _ netfilter.Links = (*FakeLinks)(nil)

func (f *FakeLinks) fault(op string) error {
	if err := f.Faults[op]; err != nil {
		return fmt.Errorf("fake %s: %w", op, err)
	}
	return nil
}

func (f *FakeLinks) link(dev string) (*FakeLink, error) {
	l, ok := f.Links[dev]
	if !ok {
		return nil, fmt.Errorf("%q: %w", dev, netfilter.ErrNoLink)
	}
	return l, nil
}

// Names lists the interfaces in name order.
func (f *FakeLinks) Names() ([]string, error) {
	return slices.Sorted(maps.Keys(f.Links)), f.fault("Names")
}

// IsUp reports the interface's state.
func (f *FakeLinks) IsUp(dev string) (bool, error) {
	if err := f.fault("IsUp"); err != nil {
		return false, err
	}
	l, err := f.link(dev)
	if err != nil {
		return false, err
	}
	return l.Up, nil
}

// SetUp sets the interface's state.
func (f *FakeLinks) SetUp(dev string, up bool) error {
	if err := f.fault("SetUp"); err != nil {
		return err
	}
	l, err := f.link(dev)
	if err != nil {
		return err
	}
	l.Up = up
	return nil
}

// Addrs lists the interface's addresses.
func (f *FakeLinks) Addrs(dev string) ([]netip.Prefix, error) {
	if err := f.fault("Addrs"); err != nil {
		return nil, err
	}
	l, err := f.link(dev)
	if err != nil {
		return nil, err
	}
	return slices.Clone(l.Addrs), nil
}

// AddAddr adds the address; like the kernel it refuses an exact duplicate.
func (f *FakeLinks) AddAddr(dev string, addr netip.Prefix) error {
	if err := f.fault("AddAddr"); err != nil {
		return err
	}
	l, err := f.link(dev)
	if err != nil {
		return err
	}
	if slices.Contains(l.Addrs, addr) {
		return fmt.Errorf("adding %s to %s: file exists", addr, dev)
	}
	l.Addrs = append(l.Addrs, addr)
	return nil
}

// DelAddr removes the address.
func (f *FakeLinks) DelAddr(dev string, addr netip.Prefix) error {
	if err := f.fault("DelAddr"); err != nil {
		return err
	}
	l, err := f.link(dev)
	if err != nil {
		return err
	}
	i := slices.Index(l.Addrs, addr)
	if i < 0 {
		return fmt.Errorf("removing %s from %s: cannot assign requested address", addr, dev)
	}
	l.Addrs = slices.Delete(l.Addrs, i, i+1)
	return nil
}

// DefaultRoutes lists the family's routes.
func (f *FakeLinks) DefaultRoutes(fam netfilter.Family) ([]netfilter.Route, error) {
	if err := f.fault("DefaultRoutes"); err != nil {
		return nil, err
	}
	var out []netfilter.Route
	for _, r := range f.Routes {
		if r.Family() == fam {
			out = append(out, r)
		}
	}
	return out, nil
}

func sameRoute(a, b netfilter.Route) bool {
	return a.Family() == b.Family() && a.Metric == b.Metric
}

// AddRoute adds the route; like the kernel it refuses a second default
// route of the same family and metric.
func (f *FakeLinks) AddRoute(r netfilter.Route) error {
	if err := f.fault("AddRoute"); err != nil {
		return err
	}
	if r.Dev != "" {
		if _, err := f.link(r.Dev); err != nil {
			return err
		}
	}
	for _, o := range f.Routes {
		if sameRoute(o, r) {
			return fmt.Errorf("adding route %s: file exists", r)
		}
	}
	if r.Protocol == 0 {
		r.Protocol = 3
	}
	f.Routes = append(f.Routes, r)
	return nil
}

// ReplaceRoute replaces the route with the same family and metric, or adds
// r when there is none, as the kernel does with NLM_F_REPLACE|NLM_F_CREATE.
func (f *FakeLinks) ReplaceRoute(r netfilter.Route) error {
	if err := f.fault("ReplaceRoute"); err != nil {
		return err
	}
	if r.Dev != "" {
		if _, err := f.link(r.Dev); err != nil {
			return err
		}
	}
	if r.Protocol == 0 {
		r.Protocol = 3
	}
	for i, o := range f.Routes {
		if sameRoute(o, r) {
			f.Routes[i] = r
			return nil
		}
	}
	f.Routes = append(f.Routes, r)
	return nil
}

// DelRoute removes the route with the same family, metric and gateway.
func (f *FakeLinks) DelRoute(r netfilter.Route) error {
	if err := f.fault("DelRoute"); err != nil {
		return err
	}
	for i, o := range f.Routes {
		if sameRoute(o, r) && o.Gateway == r.Gateway {
			f.Routes = slices.Delete(f.Routes, i, i+1)
			return nil
		}
	}
	return fmt.Errorf("removing route %s: no such process", r)
}
