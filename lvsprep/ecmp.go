package lvsprep

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/notation"
)

// An ECMP group works only if every director picks the same real server for
// a flow: the services on the VIP must use the mh scheduler, hashing the
// ports too (mh-port), and forward by DR or TUN. checkServices audits them
// through IPVS, one row each, with the fix for each problem.
func (r *runner) checkServices(vip netip.Addr) []checkRow {
	if r.h.IPVS == nil {
		return nil
	}
	const want = " uses mh with mh-port, DR or TUN"
	unknown := func(err error) []checkRow {
		fix := []string{"# IPVS must be loaded to be read", "modprobe ip_vs"}
		if !r.h.IsRoot() {
			fix = []string{"# run the check as root to read IPVS", "lvsprep check director ecmp --vip " + vip.String()}
		}
		return []checkRow{{"unknown", "services on " + vip.String() + " use mh with mh-port, DR or TUN", r.unreadable(fmt.Errorf("cannot read IPVS: %w", err)), fix}}
	}
	c, err := r.h.IPVS()
	if err != nil {
		return unknown(err)
	}
	defer c.Close()
	svcs, err := c.Services()
	if err != nil {
		return unknown(err)
	}
	svcs = slices.DeleteFunc(svcs, func(s ipvs.ServiceEntry) bool { return s.FWMark != 0 || s.Addr != vip })
	slices.SortFunc(svcs, func(a, b ipvs.ServiceEntry) int {
		return strings.Compare(fmt.Sprintf("%03d %05d", a.Protocol, a.Port), fmt.Sprintf("%03d %05d", b.Protocol, b.Port))
	})
	if len(svcs) == 0 {
		return []checkRow{{"missing", "a service on " + vip.String(), "none", []string{
			"# no virtual service on the VIP yet; add them the same way on every director, e.g.",
			"ipvsadm -A -t " + hostPort(vip, 80) + " -s mh -b mh-port"}}}
	}
	var rows []checkRow
	for _, s := range svcs {
		name := notation.Protocol(s.Protocol).Option + " " + hostPort(vip, s.Port)
		var problems, fixes []string
		if s.Scheduler != "mh" {
			problems = append(problems, "scheduler "+s.Scheduler)
			fixes = append(fixes, fmt.Sprintf("# %s uses %s: each director would choose its own real server for a flow, "+
				"so a flow moved by ECMP lands on another one; mh (Maglev hashing) gives every director the same choice", name, s.Scheduler),
				"ipvsadm -E "+name+" -s mh -b mh-port")
		} else if s.Flags&ipvs.FlagSched2 == 0 {
			problems = append(problems, "mh without mh-port")
			fixes = append(fixes, fmt.Sprintf("# %s hashes the client address alone: all connections of one client (or of one "+
				"NAT gateway's many clients) go to one real server; mh-port hashes the ports too", name),
				"ipvsadm -E "+name+" -s mh -b mh-port")
		}
		dests, err := c.Destinations(s.Service)
		if err != nil {
			problems = append(problems, "destinations unreadable: "+err.Error())
			fixes = append(fixes, "# read them yourself", "ipvsadm -Ln "+name)
		}
		direct := 0
		for _, d := range dests {
			if d.FwdMethod == ipvs.FwdRoute || d.FwdMethod == ipvs.FwdTunnel {
				direct++
				continue
			}
			method := map[ipvs.FwdMethod]string{ipvs.FwdMasq: "NAT", ipvs.FwdLocal: "local"}[d.FwdMethod]
			problems = append(problems, hostPort(d.Addr, d.Port)+" by "+method)
			fixes = append(fixes, fmt.Sprintf("# %s reaches %s by %s: its replies must come back through the director that "+
				"forwarded it, which ECMP does not ensure; use DR (-g) or TUN (-i)", name, hostPort(d.Addr, d.Port), method),
				"ipvsadm -e "+name+" -r "+hostPort(d.Addr, d.Port)+" -g")
		}
		have := s.Scheduler
		if s.Flags&ipvs.FlagSched2 != 0 {
			have += ", mh-port"
		}
		have += fmt.Sprintf(", %d of %d real servers by DR or TUN", direct, len(dests))
		row := checkRow{status: "ok", check: "service " + name + want, have: have}
		if len(problems) > 0 {
			row = checkRow{"wrong", row.check, strings.Join(problems, "; "), fixes}
		}
		rows = append(rows, row)
	}
	return rows
}

func hostPort(a netip.Addr, port uint16) string {
	return netip.AddrPortFrom(a, port).String()
}
