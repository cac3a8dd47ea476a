//go:build lab

package e2e

import (
	"strconv"
	"strings"
	"testing"
)

// realServer is a destination of the tests' HTTP service.
type realServer struct {
	name, addr string // echo server name, RIP:port
	weight     int
}

// schedulingChecks runs the checks every forwarding method gets once its
// service vip (VIP:port, scheduler wrr) works: weight 0 drains a server
// (new connections avoid it, an open one goes on), persistence pins the
// client to one server, and -d removes a server without a trace in the
// rules, finally -D the service. flag is the forwarding method (-m, -g,
// -i), which ipvsadm -e needs again.
func schedulingChecks(t *testing.T, n *network, vip, flag string, servers [2]realServer) {
	byName := map[string]realServer{servers[0].name: servers[0], servers[1].name: servers[1]}
	other := func(name string) realServer {
		if name == servers[0].name {
			return servers[1]
		}
		return servers[0]
	}

	var drained realServer
	t.Run("weight0", func(t *testing.T) {
		k := n.keepAlive("client", vip)
		a, err := k.get()
		if err != nil {
			t.Fatal(err)
		}
		drained = byName[a.Server]
		n.ipvsadm("dir", "-e", "-t", vip, "-r", drained.addr, flag, "-w", "0")
		rest := other(drained.name)
		tally := n.get("client", vip, 9)
		if tally.ByServer[rest.name] != 9 {
			t.Errorf("with weight 0 on %s, 9 new connections went %v (errors %v), want all to %s", drained.name, tally.ByServer, tally.Errors, rest.name)
		}
		a, err = k.get()
		if err != nil || a.Server != drained.name {
			t.Errorf("the open connection to %s: %+v, %v; want it to go on", drained.name, a, err)
		}
		n.ipvsadm("dir", "-e", "-t", vip, "-r", drained.addr, flag, "-w", strconv.Itoa(drained.weight))
	})

	t.Run("persistence", func(t *testing.T) {
		n.ipvsadm("dir", "-E", "-t", vip, "-s", "wrr", "-p", "300")
		tally := n.get("client", vip, 12)
		if len(tally.ByServer) != 1 || len(tally.Errors) > 0 {
			t.Errorf("with -p, 12 connections from one client went %v (errors %v), want one server", tally.ByServer, tally.Errors)
		}
		n.ipvsadm("dir", "-E", "-t", vip, "-s", "wrr")
	})

	t.Run("delete", func(t *testing.T) {
		gone := servers[0]
		n.ipvsadm("dir", "-d", "-t", vip, "-r", gone.addr)
		for _, args := range [][]string{{"-Ln"}, {"-Sn"}} {
			if out := n.ipvsadm("dir", args...); strings.Contains(out, gone.addr) {
				t.Errorf("ipvsadm %s still shows %s:\n%s", args[0], gone.addr, out)
			}
		}
		rest := other(gone.name)
		tally := n.get("client", vip, 6)
		if tally.ByServer[rest.name] != 6 {
			t.Errorf("after -d of %s, 6 connections went %v (errors %v), want all to %s", gone.name, tally.ByServer, tally.Errors, rest.name)
		}
		n.ipvsadm("dir", "-D", "-t", vip)
		for _, args := range [][]string{{"-Ln"}, {"-Sn"}} {
			if out := n.ipvsadm("dir", args...); strings.Contains(out, vip) {
				t.Errorf("ipvsadm %s still shows %s after -D:\n%s", args[0], vip, out)
			}
		}
	})
}
