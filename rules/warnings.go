package rules

// This file holds the warnings a plan carries: scheduler swaps and drains.

import (
	"fmt"

	"github.com/lvskit/lvskit/ipvs"
)

// planWarnings says where a change or a drain will not do what users
// expect.
func planWarnings(p *Plan, o DiffOptions) []string {
	var w []string
	for i := range p.Changes {
		c := &p.Changes[i]
		if c.Action != EditService {
			continue
		}
		for _, f := range c.Fields {
			if f.Name == "scheduler" {
				w = append(w, schedulerChangeWarning(KeyOf(&c.Service), f.Old, f.New))
			}
		}
	}
	if !o.Draining {
		return w
	}
	persistent, udp := map[ServiceKey]bool{}, map[ServiceKey]bool{}
	for _, c := range p.Changes {
		if c.Action != DeleteDest && c.Action != DeleteService {
			continue
		}
		k := KeyOf(&c.Service)
		if c.Service.Flags&ipvs.FlagPersistent != 0 && !persistent[k] &&
			(o.ExpireQuiescentTemplate == nil || !*o.ExpireQuiescentTemplate) {
			persistent[k] = true
			w = append(w, fmt.Sprintf("%s is persistent and net.ipv4.vs.expire_quiescent_template is not 1: "+
				"clients with a persistence template keep getting new connections to a draining server "+
				"until their template expires (%d s after their last connection); "+
				"sysctl -w net.ipv4.vs.expire_quiescent_template=1 stops that", k, c.Service.Timeout))
		}
		if (c.Service.Protocol == ipvs.ProtoUDP || c.Service.FWMark != 0) && !udp[k] {
			udp[k] = true
			w = append(w, fmt.Sprintf("%s may carry UDP: a UDP entry lasts the udp timeout after its flow's last packet, "+
				"so a busy UDP flow keeps its server until --drain-timeout", k))
		}
	}
	return w
}

// schedulerChangeWarning is the plan's warning for a scheduler change of a
// live service. No request changes a scheduler in place: the kernel
// (ip_vs_edit_service) unbinds the old one, leaves the service without a
// scheduler until an RCU grace period has passed, then binds the new one,
// and answers a new connection arriving in that gap with ICMP port
// unreachable. docs/lvsctl.md gives the lab's figures
// (TestSchedulerEditRefusesConnections).
func schedulerChangeWarning(k ServiceKey, old, new string) string {
	return fmt.Sprintf("%s: scheduler %s -> %s: the kernel swaps schedulers with the service briefly left without one, "+
		"and refuses (ICMP port unreachable) new connections arriving then; established connections are not affected. "+
		"Change schedulers when the service is idle (/usr/share/doc/lvskit/lvsctl.md)", k, old, new)
}
