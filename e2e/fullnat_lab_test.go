//go:build lab

package e2e

import (
	"strings"
	"testing"
)

// TestFullNAT: the seed network, but the real servers keep their routes
// (none to the client side at all): the director rewrites the client's
// address to its own, so replies come back to it without a route change.
func TestFullNAT(t *testing.T) {
	n := seedNetwork(t, "fnat")
	hosts := []string{"dir", "rs1", "rs2"}
	before := map[string]string{}
	for _, h := range hosts {
		before[h] = n.snapshot(h)
	}
	n.lvsprep("dir", "director", "fullnat", "--vip", seedVIP+"/24", "--dev", "eth0", "--snat", seedGateway, "--port", "80")
	n.lvsprep("dir", "check", "director", "fullnat", "--vip", seedVIP+"/24", "--dev", "eth0", "--snat", seedGateway, "--port", "80")
	n.ipvsadm("dir", "-A", "-t", seedVIP80, "-s", "wrr")
	n.ipvsadm("dir", "-a", "-t", seedVIP80, "-r", seedRS1, "-m", "-w", "1")
	n.ipvsadm("dir", "-a", "-t", seedVIP80, "-r", seedRS2, "-m", "-w", "2")
	n.count("client", "filter", "INPUT", "-p", "tcp", "-s", seedVIP, "--sport", "80")
	n.count("client", "filter", "INPUT", "-p", "tcp")

	t.Run("split", func(t *testing.T) {
		for _, h := range []string{"rs1", "rs2"} {
			if routes := n.must(h, ipCmd, "route", "show"); strings.Contains(routes, "default") {
				t.Fatalf("%s has a default route; the test needs real servers that cannot reach the client:\n%s", h, routes)
			}
		}
		tally := n.get("client", seedVIP80, seedRequests)
		checkSplit(t, tally, seedVIP80, 1, 2, seedTolerance)
		a := tally.First
		if a == nil {
			t.Fatal("no answer")
		}
		if h := hostOf(a.ServerRemote); h != seedGateway {
			t.Errorf("the server saw the request from %s, want the director's %s (full-NAT rewrites the client)", a.ServerRemote, seedGateway)
		}
		if h := hostOf(a.ServerLocal); h != "172.16.0.2" && h != "172.16.0.3" {
			t.Errorf("the server received the request on %s, want its own address", a.ServerLocal)
		}
		if c := n.counters("client", "filter", "INPUT"); c[0] == 0 || c[0] != c[1] {
			t.Errorf("client received %d TCP packets, %d of them from %s, want all", c[1], c[0], seedVIP80)
		}
	})

	schedulingChecks(t, n, seedVIP80, "-m", [2]realServer{{"rs1", seedRS1, 1}, {"rs2", seedRS2, 2}})

	t.Run("undo", func(t *testing.T) {
		n.ipvsadm("dir", "-C")
		n.lvsprep("dir", "director", "fullnat", "--vip", seedVIP, "--undo")
		for _, h := range hosts {
			if after := n.snapshot(h); after != before[h] {
				t.Errorf("%s after --undo differs from before lvsprep:\nbefore:\n%s\nafter:\n%s", h, before[h], after)
			}
		}
	})
}
