//go:build lab

package e2e

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lvskit/lvskit/lab/labtest"
)

// deleteBase is the first fixed source port of the delete check's
// connections: below the ephemeral range, so no connection the kernel
// gave a port to earlier in the test shares one.
const deleteBase = 20000

// realServer is a destination of the tests' HTTP service.
type realServer struct {
	name, addr string // echo server name, RIP:port
	weight     int
}

// schedulingChecks runs the checks every forwarding method gets once its
// service vip (VIP:port, scheduler wrr) works: weight 0 drains a server
// (new connections avoid it, an open one goes on), persistence pins the
// client to one server, and -d removes a server without a trace in the
// rules: new connections go to the other, and a client that reuses the
// source port of a connection to the deleted one is dropped where the
// director sees one direction (DR, TUN) and scheduled afresh where it
// sees the connection end (NAT); finally -D the service. flag is the forwarding method (-m, -g,
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
		rest := other(gone.name)
		// Earlier connections from fixed ports, each closed by the server
		// first (no TIME_WAIT on the client), so the client can open the
		// same 4-tuple again: the director keeps their entries for
		// minutes (FIN_WAIT where it sees one direction, DR and TUN).
		earlier := n.closedFrom(t, "client", vip, deleteBase, 6)
		n.ipvsadm("dir", "-d", "-t", vip, "-r", gone.addr)
		for _, args := range [][]string{{"-Ln"}, {"-Sn"}} {
			if out := n.ipvsadm("dir", args...); strings.Contains(out, gone.addr) {
				t.Errorf("ipvsadm %s still shows %s:\n%s", args[0], gone.addr, out)
			}
		}
		// New connections, from ports no connection of this test used:
		// a reused port would meet its old entry (below).
		var fresh tally
		n.in("client", func() { fresh = getFrom(vip, deleteBase+len(earlier), 6) })
		if fresh.ByServer[rest.name] != 6 {
			n.logConnTable(t, "dir", nil)
			t.Errorf("after -d of %s, 6 connections went %v (errors %v), want all to %s", gone.name, fresh.ByServer, fresh.Errors, rest.name)
		}
		// A client that opens a connection again from a port whose entry
		// names the deleted server: with net.ipv4.vs.expire_nodest_conn 0
		// (the default) the kernel drops its packets while the entry lasts
		// (ip_vs_in_hook in ip_vs_core.c), unless the director saw that
		// connection end (VS/NAT: TIME_WAIT), when conn_reuse_mode 1
		// schedules the new one afresh.
		reused := -1
		for _, port := range slices.Sorted(maps.Keys(earlier)) {
			if earlier[port] == gone.name {
				reused = port
				break
			}
		}
		if reused < 0 {
			t.Fatalf("none of the earlier connections %v went to %s", earlier, gone.name)
		}
		was := n.connEntries("dir", vip, reused)
		var again tally
		n.in("client", func() { again = getFrom(vip, reused, 1) })
		now := n.connEntries("dir", vip, reused)
		switch {
		case flag == "-m" && again.ByServer[rest.name] != 1:
			n.logConnTable(t, "dir", nil)
			t.Errorf("from port %d again after -d of %s: %v (errors %v), entries %q then %q; want %s", reused, gone.name, again.ByServer, again.Errors, was, now, rest.name)
		case flag != "-m" && (len(again.Errors) != 1 || !strings.Contains(again.Errors[0], "i/o timeout") || len(now) != 1 || !strings.HasSuffix(now[0], " "+gone.addr)):
			n.logConnTable(t, "dir", nil)
			t.Errorf("from port %d again after -d of %s: %v (errors %v), entries %q then %q; want a dial timeout, the entry still naming %s", reused, gone.name, again.ByServer, again.Errors, was, now, gone.addr)
		default:
			t.Logf("from port %d again after -d of %s: %v %v; its entries before %q, after %q", reused, gone.name, again.ByServer, again.Errors, was, now)
		}
		n.ipvsadm("dir", "-D", "-t", vip)
		for _, args := range [][]string{{"-Ln"}, {"-Sn"}} {
			if out := n.ipvsadm("dir", args...); strings.Contains(out, vip) {
				t.Errorf("ipvsadm %s still shows %s after -D:\n%s", args[0], vip, out)
			}
		}
	})
}

// getFrom makes count requests to addr on new connections from the fixed
// source ports base, base+1, ... (dialFrom: SO_REUSEADDR), each within
// requestTimeout as httpGet does. Run it inside the client's namespace.
func getFrom(addr string, base, count int) tally {
	t := tally{Requests: count, ByServer: map[string]int{}, Remotes: map[string]int{}}
	for i := range count {
		a, err := getFromPort(addr, base+i, false)
		if err != nil {
			t.Errors = append(t.Errors, err.Error())
			continue
		}
		t.ByServer[a.Server]++
		t.Remotes[a.ClientRemote]++
	}
	return t
}

// getFromPort makes one request from port; with waitClose it reads on
// until the server has closed, so the client closes second and keeps no
// TIME_WAIT for the 4-tuple.
func getFromPort(addr string, port int, waitClose bool) (httpAnswer, error) {
	c, err := dialFrom(addr, port, requestTimeout)
	if err != nil {
		return httpAnswer{}, err
	}
	defer c.Close()
	br := bufio.NewReader(c)
	a, err := request(c, br, addr, false, requestTimeout)
	if err == nil && waitClose {
		_, err = io.Copy(io.Discard, br) // until the server's FIN
	}
	return a, err
}

// closedFrom makes count requests from host to vip from the source ports
// base and up, each connection closed by the server first, and returns
// the real server of each port.
func (n *network) closedFrom(t *testing.T, host, vip string, base, count int) map[int]string {
	t.Helper()
	got := map[int]string{}
	var errs []string
	n.in(host, func() {
		for i := range count {
			a, err := getFromPort(vip, base+i, true)
			if err != nil {
				errs = append(errs, err.Error())
				continue
			}
			got[base+i] = a.Server
		}
	})
	if len(errs) > 0 {
		n.logConnTable(t, "dir", nil)
		t.Fatalf("requests from ports %d-%d: %q", base, base+count-1, errs)
	}
	return got
}

// connEntries returns the lines of ipvsadm -Lnc on host for connections
// to vip from the client port port.
func (n *network) connEntries(host, vip string, port int) []string {
	n.t.Helper()
	var out []string
	for _, l := range strings.Split(n.ipvsadm(host, "-Lnc"), "\n") {
		if f := strings.Fields(l); len(f) == 6 && f[4] == vip && strings.HasSuffix(f[3], ":"+strconv.Itoa(port)) {
			out = append(out, strings.Join(f, " "))
		}
	}
	return out
}

// logConnTable logs host's IPVS connection table (ipvsadm -Lnc) with the
// time, for the diagnosis of connections that failed: call it on failure
// only. The entries are counted by state and destination; ports, when not
// nil, narrows the lines shown to the client ports of the failed ones (a
// table of thousands would bury the failure in the log).
func (n *network) logConnTable(t *testing.T, host string, ports []int) {
	t.Helper()
	r := n.run(host, labtest.Ours("ipvsadm"), "-Lnc")
	want := map[string]bool{}
	for _, p := range ports {
		want[strconv.Itoa(p)] = true
	}
	by := map[string]int{}
	var lines []string
	for _, l := range strings.Split(r.Stdout, "\n") {
		f := strings.Fields(l)
		if len(f) != 6 || f[0] == "pro" {
			continue
		}
		by[f[2]+" to "+f[5]]++
		if _, port, ok := strings.Cut(f[3], ":"); ports == nil || ok && want[port] {
			lines = append(lines, l)
		}
	}
	total := 0
	for _, c := range by {
		total += c
	}
	what := "every one"
	if ports != nil {
		what = fmt.Sprintf("%d, of the %d failed connections' ports", len(lines), len(ports))
	}
	status := fmt.Sprintf("exit %d", r.Code)
	if e := strings.TrimSpace(r.Stderr); e != "" {
		status += ", " + e
	}
	t.Logf("%s's connection table at %s (ipvsadm -Lnc, %s): %d entries, by state and destination %s; shown: %s\n%s",
		host, time.Now().Format("15:04:05.000"), status, total, sortedCounts(by), what, strings.Join(lines, "\n"))
}
