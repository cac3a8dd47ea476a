package run

import (
	"math"
	"net/netip"
	"slices"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/rules"
	"github.com/lvskit/lvskit/rules/desired"
)

// checked is one check of a real server, as lvsctl run probes it. A real
// server with several checks has one each, next to each other in its
// checks' order.
type checked struct {
	ref desired.DestRef
	key health.TargetKey
	// The probe's target (see health.Target) is kept in parts: its spec
	// is shared by the real servers of a service, not copied into each,
	// which costs memory on a large table (figures: decision 0014).
	addr, vip netip.AddrPort
	through   netip.Addr
	mark      uint32
	weight    uint32 // the file's
	spec      *health.Spec
	// n is the check's position among its real server's checks, from 0.
	n int
	// probe is the probe service of a via-vip check (nil otherwise), with
	// its one real server; a real server has one however many of its
	// checks go through it, on its first via-vip check.
	probe *probeService
}

type probeService struct {
	svc  ipvs.Service
	dest ipvs.Destination
}

// via is the way a real server is probed: as its check says, else through
// the virtual address for direct routing and tunnels (so a real server
// without the address on its loopback fails), directly for masquerading.
// A ping is always direct: IPVS forwards no ICMP echo to a real server.
func via(spec health.Spec, d *ipvs.Destination) string {
	if spec.Via != "" {
		return spec.Via
	}
	if spec.Type == "ping" {
		return "direct"
	}
	if m := d.FwdMethod & 7; m == ipvs.FwdRoute || m == ipvs.FwdTunnel {
		return "vip"
	}
	return "direct"
}

// probeTargets lists the checks of the checked real servers of want. A
// via-vip check of an address service goes through a probe service with a
// mark from marks, one per real server whatever its count of checks (kept
// across reloads, so the target keeps its key and its state); a
// firewall-mark service has no address to probe through and is probed
// directly.
func probeTargets(want *rules.Set, h *desired.Health, marks map[string]uint32) []checked {
	if h == nil {
		return nil
	}
	used := map[uint32]bool{}
	for _, m := range marks {
		used[m] = true
	}
	out := make([]checked, 0, len(h.Checks))
	var keys health.Keys
	for i := range want.Services {
		s := &want.Services[i]
		sk := rules.KeyOf(&s.Service)
		for j := range s.Dests {
			d := &s.Dests[j].Destination
			ref := desired.DestRef{Service: sk, Dest: rules.DestKeyOf(d)}
			specs := h.Checks[ref]
			hasProbe := false
			for n, sp := range specs {
				spec := *sp
				c := checked{ref: ref, weight: d.Weight, n: n}
				t := health.Target{Addr: netip.AddrPortFrom(d.Addr, d.Port), Spec: spec}
				if s.FWMark == 0 {
					t.VIP = netip.AddrPortFrom(s.Addr, s.Port)
				}
				t.Spec.Via = via(spec, d)
				if t.Spec.Via == "vip" && s.FWMark == 0 && spec.Type != "exec" {
					name := refName(ref)
					mark, ok := marks[name]
					if !ok {
						for mark = rules.ProbeMarkBase; used[mark]; mark++ {
						}
						marks[name], used[mark] = mark, true
					}
					t.Addr, t.Mark, t.Through = netip.AddrPortFrom(s.Addr, s.Port), mark, d.Addr
					if !hasProbe {
						c.probe = &probeService{svc: ipvs.Service{Family: s.Family, FWMark: mark, Scheduler: "rr", Netmask: fullMask(s.Family)}, dest: *d}
						c.probe.dest.Weight = 1
						hasProbe = true
					}
				} else if spec.Type == "exec" {
					t.Spec.Via = "" // an exec check goes nowhere: no via
				} else {
					t.Spec.Via = "direct"
				}
				c.key = keys.Key(t)
				c.addr, c.vip, c.through, c.mark, c.spec = t.Addr, t.VIP, t.Through, t.Mark, keys.Spec()
				out = append(out, c)
			}
		}
	}
	return out
}

// target is c's probe target.
func (c *checked) target() health.Target {
	return health.Target{Addr: c.addr, VIP: c.vip, Through: c.through, Mark: c.mark, Spec: *c.spec}
}

// refName names a real server of a service in files and logs, as ipvsadm
// writes them: "-t 10.0.0.1:80 -r 192.168.1.2:80".
func refName(r desired.DestRef) string { return r.Service.String() + " -r " + r.Dest.String() }

// draining is a real server that left the file and drains at weight 0
// until its connections end or its deadline.
type draining struct {
	svc   ipvs.Service
	dest  ipvs.Destination // weight 0
	entry rules.DrainEntry
}

// effective is the table lvsctl run keeps: the file's, with each checked
// real server that is not up at weight 0 and each up with a weight from
// its check (a dynamic exec check's) at that weight, mh services that have one out
// given mh-fallback, the probe services, and the real servers still
// draining. A service whose real servers are all checked, none up and
// one at least failed, is in allDown, and follows its when_all_down.
// probes are probeTargets' of want: in its order, which effective walks
// along. inService says which checked real servers were in service
// before; it is updated.
func effective(want *rules.Set, h *desired.Health, probes []checked, state func(health.TargetKey) (health.State, *uint32),
	drains map[desired.DestRef]*draining, inService map[desired.DestRef]bool) (set *rules.Set, allDown []rules.ServiceKey) {
	out := &rules.Set{Services: make([]rules.Service, 0, len(want.Services)+len(probes))}
	kept := make(map[rules.ServiceKey]int, len(want.Services))
	var up []bool
	var weights []*uint32 // of each real server of a service up, its check's weight or nil
	var mine []*checked   // of each real server of a service, its probe or nil
	p := 0
	for i := range want.Services {
		s := want.Services[i]
		sk := rules.KeyOf(&s.Service)
		s.Dests = slices.Clone(s.Dests)
		up, mine = slices.Grow(up[:0], len(s.Dests))[:len(s.Dests)], slices.Grow(mine[:0], len(s.Dests))[:len(s.Dests)]
		weights = slices.Grow(weights[:0], len(s.Dests))[:len(s.Dests)]
		clear(up)
		clear(weights)
		checkedN, failed := 0, false
		for j := range s.Dests {
			mine[j] = nil
			dk := rules.DestKeyOf(&s.Dests[j].Destination)
			if p >= len(probes) || probes[p].ref.Service != sk || probes[p].ref.Dest != dk {
				continue
			}
			mine[j] = &probes[p]
			checkedN++
			// The real server is up while every one of its checks is: one
			// down fails it (keepalived's num_failed_checkers).
			allUp, down := true, false
			var w *uint32
			for ; p < len(probes) && probes[p].ref.Service == sk && probes[p].ref.Dest == dk; p++ {
				st, cw := state(probes[p].key)
				allUp = allUp && st == health.Up
				down = down || st == health.Down
				w = addWeight(w, cw, probes[p].weight)
			}
			up[j], failed = allUp, failed || down
			if allUp {
				weights[j] = w
			}
		}
		// All down needs a failure: servers still waiting for their first
		// check (a fresh start) are out, but nothing failed.
		down := checkedN > 0 && checkedN == len(s.Dests) && !slices.Contains(up, true) && failed
		if down {
			allDown = append(allDown, sk)
			whenAllDown(&s, sk, h, inService, up)
		}
		out0 := false
		for j := range s.Dests {
			if mine[j] == nil {
				continue
			}
			inService[mine[j].ref] = up[j]
			switch {
			case !up[j]:
				s.Dests[j].Weight, out0 = 0, true
			case weights[j] != nil:
				s.Dests[j].Weight = *weights[j]
			}
		}
		if down && h != nil {
			if sh := h.Services[sk]; sh.WhenAllDown == desired.Sorry {
				s.Dests = append(s.Dests, sorryDest(&s, sh.SorryServer))
			}
		}
		if out0 && s.Scheduler == "mh" {
			s.Flags |= ipvs.FlagSched1 // mh-fallback: flows of a server out move on
		}
		kept[sk] = len(out.Services)
		out.Services = append(out.Services, s)
	}
	for ref, d := range drains {
		i, ok := kept[ref.Service]
		if !ok {
			i = len(out.Services)
			kept[ref.Service] = i
			out.Services = append(out.Services, rules.Service{Service: d.svc})
		}
		s := &out.Services[i]
		if !slices.ContainsFunc(s.Dests, func(x rules.Dest) bool { return rules.DestKeyOf(&x.Destination) == ref.Dest }) {
			s.Dests = append(s.Dests, rules.Dest{Destination: d.dest})
		}
	}
	for i := range probes {
		if c := &probes[i]; c.probe != nil {
			out.Services = append(out.Services, rules.Service{Service: c.probe.svc, Dests: []rules.Dest{{Destination: c.probe.dest}}})
		}
	}
	return out, allDown
}

// addWeight adds a check's weight cw (nil: the file's, file) to w, the
// weight of the real server's checks before it (nil: the file's), as
// keepalived 2.2.7 adds its MISC_CHECKs': each dynamic check moves the
// file's weight by its own difference to it, so with one dynamic check
// the server has that check's weight. The sum is kept within 0 and the
// kernel's largest weight.
func addWeight(w, cw *uint32, file uint32) *uint32 {
	if cw == nil {
		return w
	}
	if w == nil {
		v := *cw
		return &v
	}
	sum := min(max(int64(*w)+int64(*cw)-int64(file), 0), math.MaxInt32)
	v := uint32(sum)
	return &v
}

// fullMask is a service's persistence netmask when it has none: all ones.
func fullMask(f ipvs.Family) uint32 {
	if f == ipvs.AFInet6 {
		return 128
	}
	return 0xffffffff
}

// whenAllDown sets up, by index, to the real servers of s that stay in
// service when every checked one has failed: with keep (the default),
// those that were in service before; with sorry or zero, none.
func whenAllDown(s *rules.Service, sk rules.ServiceKey, h *desired.Health, inService map[desired.DestRef]bool, up []bool) {
	clear(up)
	if h != nil && h.Services[sk].WhenAllDown != "" && h.Services[sk].WhenAllDown != desired.KeepLast {
		return
	}
	for j := range s.Dests {
		up[j] = inService[desired.DestRef{Service: sk, Dest: rules.DestKeyOf(&s.Dests[j].Destination)}]
	}
}

// sorryDest is the sorry server of s, forwarded as its real servers are.
func sorryDest(s *rules.Service, ap netip.AddrPort) rules.Dest {
	d := ipvs.Destination{Addr: ap.Addr(), Port: ap.Port(), Weight: 1, FwdMethod: ipvs.FwdMasq}
	if ap.Addr().Is4() {
		d.Family = ipvs.AFInet
	} else {
		d.Family = ipvs.AFInet6
	}
	if len(s.Dests) > 0 {
		d.FwdMethod = s.Dests[0].FwdMethod
	}
	return rules.Dest{Destination: d}
}
