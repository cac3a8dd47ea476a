// Package rules is lvsctl's engine: desired set, diff, plan and apply.
//
// It holds the desired rule set (Set), how it differs from the kernel's
// (Diff, DiffKernel: a plan of the fewest changes), and applying a plan to a
// live director. The Applier pipelines adds and edits, records drains of
// leaving real servers in a journal, and re-plans (Converge) when the table
// changes meanwhile. The kernel is reached only through ipvs.Client. Package
// rules/desired reads a Set from a rules file.
package rules

// This file holds the desired rule set, the model lvsctl's plan and apply
// work on: services and their destinations with the settings an ipvsadm
// rule can give them, keyed by what identifies each to the kernel.

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/notation"
)

// Set is a rule set: the services of one director with their destinations.
// A Set read from the kernel also carries the counters; a desired Set does
// not, and its Source fields say where each entry was written.
type Set struct {
	Services []Service
}

// Service is one virtual service and its destinations.
type Service struct {
	ipvs.Service
	Dests []Dest
	// Ordered says Dests are in the desired list order (most recently
	// added first, as the kernel lists them), which decides mh's lookup
	// table; otherwise lvsctl builds the list in canonical order.
	Ordered bool
	// Source is where the service was defined, for messages.
	Source Source
	// Stats are the kernel's counters in a Set read from it (Read); nil
	// in a desired Set.
	Stats *ipvs.Stats
}

// Dest is one destination of a service.
type Dest struct {
	ipvs.Destination
	// Line is where the destination was written in its service's
	// Source.File (0 for none).
	Line int32
	// Counters are the kernel's in a Set read from it (Read); nil in a
	// desired Set, which then carries configuration alone: a desired
	// destination is 72 bytes (it was 176 with counters and a Source).
	Counters *ipvs.DestCounters
}

// KernelStats are the service's counters as Read found them; zero in a
// desired set.
func (s *Service) KernelStats() ipvs.Stats {
	if s.Stats == nil {
		return ipvs.Stats{}
	}
	return *s.Stats
}

// KernelCounters are the destination's counters as Read found them; zero
// in a desired set.
func (d *Dest) KernelCounters() ipvs.DestCounters {
	if d.Counters == nil {
		return ipvs.DestCounters{}
	}
	return *d.Counters
}

// SourceOf is where d, one of s's destinations, was written.
func (s *Service) SourceOf(d *Dest) Source { return Source{File: s.Source.File, Line: int(d.Line)} }

// Source is a place in a rules file.
type Source struct {
	File string
	Line int
}

// String writes "file:line" ("" for no place).
func (s Source) String() string {
	if s.File == "" {
		return ""
	}
	return s.File + ":" + strconv.Itoa(s.Line)
}

// ServiceKey identifies a service to the kernel: family and fwmark for
// fwmark services, otherwise family, protocol, address and port.
type ServiceKey struct {
	Family   ipvs.Family
	Protocol ipvs.Protocol
	Addr     netip.Addr
	Port     uint16
	FWMark   uint32
}

// KeyOf returns the key of svc.
func KeyOf(svc *ipvs.Service) ServiceKey {
	if svc.FWMark != 0 {
		return ServiceKey{Family: svc.Family, FWMark: svc.FWMark}
	}
	return ServiceKey{Family: svc.Family, Protocol: svc.Protocol, Addr: svc.Addr, Port: svc.Port}
}

// Service returns the service identity as the kernel's requests carry it.
func (k ServiceKey) Service() ipvs.Service {
	return ipvs.Service{Family: k.Family, Protocol: k.Protocol, Addr: k.Addr, Port: k.Port, FWMark: k.FWMark}
}

// String writes the key as ipvsadm's rules name a service, numerically:
// "-t 10.0.0.1:80", "-u [2001:db8::1]:53", "-f 7", "-f 7 -6".
func (k ServiceKey) String() string {
	svc := k.Service()
	if k.FWMark != 0 {
		s := fmt.Sprintf("-f %d", int32(k.FWMark))
		if k.Family == ipvs.AFInet6 {
			s += " -6"
		}
		return s
	}
	return notation.Protocol(k.Protocol).Option + " " + addrPort(svc.Family, svc.Addr, svc.Port)
}

// DestKey identifies a destination within its service.
type DestKey struct {
	Family ipvs.Family
	Addr   netip.Addr
	Port   uint16
}

// DestKeyOf returns the key of d.
func DestKeyOf(d *ipvs.Destination) DestKey {
	return DestKey{Family: d.Family, Addr: d.Addr, Port: d.Port}
}

// String writes the destination as "10.0.0.2:80" or "[2001:db8::2]:80".
func (k DestKey) String() string { return addrPort(k.Family, k.Addr, k.Port) }

// addrPort writes an address and port numerically, IPv6 in brackets.
func addrPort(family ipvs.Family, a netip.Addr, port uint16) string {
	return string(notation.AppendAddrPort(nil, family, a, port))
}

// Compare orders destination keys canonically: IPv4 before IPv6, then by
// address bytes, then by port. It is the order lvsctl builds destination
// lists in.
func (k DestKey) Compare(o DestKey) int {
	return compareKeys(k.Family, o.Family, &k.Addr, &o.Addr, k.Port, o.Port)
}

// CompareDests is DestKeyOf(a).Compare(DestKeyOf(b)) without the copies:
// a plan of a large table compares destinations millions of times.
func CompareDests(a, b *ipvs.Destination) int {
	return compareKeys(a.Family, b.Family, &a.Addr, &b.Addr, a.Port, b.Port)
}

func compareKeys(fa, fb ipvs.Family, a, b *netip.Addr, pa, pb uint16) int {
	if fa != fb {
		return int(fa) - int(fb)
	}
	if a.Is4() && b.Is4() {
		// As netip.Addr.Compare orders them, faster (figures: decision 0013).
		x, y := a.As4(), b.As4()
		if u, v := binary.BigEndian.Uint32(x[:]), binary.BigEndian.Uint32(y[:]); u != v {
			if u < v {
				return -1
			}
			return 1
		}
	} else if c := a.Compare(*b); c != 0 {
		return c
	}
	return int(pa) - int(pb)
}

// Compare orders service keys: address services before fwmark services,
// then by family, protocol, address and port, or by mark.
func (k ServiceKey) Compare(o ServiceKey) int {
	if (k.FWMark != 0) != (o.FWMark != 0) {
		if k.FWMark == 0 {
			return -1
		}
		return 1
	}
	if k.Family != o.Family {
		return int(k.Family) - int(o.Family)
	}
	if k.FWMark != 0 {
		switch {
		case k.FWMark < o.FWMark:
			return -1
		case k.FWMark > o.FWMark:
			return 1
		}
		return 0
	}
	if k.Protocol != o.Protocol {
		return int(k.Protocol) - int(o.Protocol)
	}
	if c := k.Addr.Compare(o.Addr); c != 0 {
		return c
	}
	return int(k.Port) - int(o.Port)
}

// Sort puts the services in key order and each service's destinations in
// canonical order, so that two equal sets print alike; mh services keep
// their order, which decides their lookup table, and are marked Ordered.
func (s *Set) Sort() {
	slices.SortFunc(s.Services, func(a, b Service) int { return KeyOf(&a.Service).Compare(KeyOf(&b.Service)) })
	for i := range s.Services {
		if s.Services[i].Scheduler == "mh" {
			s.Services[i].Ordered = true
			continue
		}
		canonicalDests(s.Services[i].Dests)
	}
}

// canonicalDests sorts destinations in canonical order (DestKey.Compare).
func canonicalDests(ds []Dest) { slices.SortFunc(ds, compareDests) }

func compareDests(a, b Dest) int { return CompareDests(&a.Destination, &b.Destination) }

// DuplicateError reports a service or destination given twice.
type DuplicateError struct {
	What, Name     string // "service", "-t 10.0.0.1:80"
	First, Another string // sources of the two definitions
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("%s: %s %s given again (first at %s)", e.Another, e.What, e.Name, e.First)
}

// Read fetches the kernel's rule set through c, counters included.
// Destinations keep the kernel's list order (most recently added first),
// which is what mh builds its lookup table from.
func Read(c ipvs.Reader) (*Set, error) {
	svcs, err := c.Services()
	if err != nil {
		return nil, err
	}
	set := &Set{Services: make([]Service, len(svcs))}
	for i := range svcs {
		ds, err := c.Destinations(svcs[i].Service)
		if err != nil {
			return nil, err
		}
		svc := Service{Service: svcs[i].Service, Stats: &svcs[i].Stats, Dests: make([]Dest, len(ds))}
		counters := make([]ipvs.DestCounters, len(ds))
		for j := range ds {
			counters[j] = ds[j].DestCounters
			svc.Dests[j] = Dest{Destination: ds[j].Destination, Counters: &counters[j]}
		}
		set.Services[i] = svc
	}
	return set, nil
}

// ChangedServices lists the keys of the services whose configuration
// differs between a and b: in one set only, or with other service
// fields, destinations or destination order. Sources and kernel
// counters are not configuration.
func ChangedServices(a, b *Set) map[ServiceKey]bool {
	byKey := make(map[ServiceKey]*Service, len(a.Services))
	for i := range a.Services {
		byKey[KeyOf(&a.Services[i].Service)] = &a.Services[i]
	}
	changed := map[ServiceKey]bool{}
	for i := range b.Services {
		t := &b.Services[i]
		k := KeyOf(&t.Service)
		s, ok := byKey[k]
		delete(byKey, k)
		if !ok || !sameConfig(s, t) {
			changed[k] = true
		}
	}
	for k := range byKey {
		changed[k] = true
	}
	return changed
}

func sameConfig(s, t *Service) bool {
	return s.Service == t.Service && s.Ordered == t.Ordered &&
		slices.EqualFunc(s.Dests, t.Dests, func(x, y Dest) bool { return x.Destination == y.Destination })
}
