//go:build lab

package e2e

import (
	"net"
	"strings"
	"testing"
)

// The seed paper's VS/NAT example: clients on the Internet side reach the
// VIP 202.103.106.5 on the director, whose other leg is 172.16.0.1 on the
// real servers' network 172.16.0.0/24.
const (
	seedVIP     = "202.103.106.5"
	seedClient  = "202.103.106.10"
	seedGateway = "172.16.0.1"
	seedRS1     = "172.16.0.2:80"
	seedRS2     = "172.16.0.3:8000"
	seedRS2FTP  = "172.16.0.3:21"
	// seedRequests and seedTolerance: wrr with weights 1 and 2 is
	// deterministic (every 3 new connections go rs2, rs1, rs2 in some
	// order), so 60 requests give exactly 20 and 40; the tolerance only
	// absorbs a connection the client had to retry.
	seedRequests  = 60
	seedTolerance = 3
	ftpSize       = 1 << 20
)

var seedVIP80 = net.JoinHostPort(seedVIP, "80")

// seedNetwork builds the hosts of the seed example: a client, a director
// and two real servers running the echo server (rs1 on :80, rs2 on :8000)
// and an FTP server (rs2 on :21). It prepares nothing for IPVS: that is
// what lvsprep does in the tests.
func seedNetwork(t *testing.T, prefix string) *network {
	n := newNetwork(t, prefix, "client", "dir", "rs1", "rs2")
	n.bridge("internet")
	n.bridge("lan")
	n.plug("client", "eth0", "internet", seedClient+"/24")
	n.plug("dir", "eth0", "internet") // the VIP comes from lvsprep
	n.plug("dir", "eth1", "lan", seedGateway+"/24")
	n.plug("rs1", "eth0", "lan", "172.16.0.2/24")
	n.plug("rs2", "eth0", "lan", "172.16.0.3/24")
	n.build()
	n.start("rs1", "http", "rs1", seedRS1)
	n.start("rs2", "http", "rs2", seedRS2)
	n.start("rs2", "ftpd", "rs2", seedRS2FTP, itoa(ftpSize))
	return n
}

// natNetwork is the seed network prepared for VS/NAT by lvsprep alone (the
// director's VIP, forwarding and masquerading; the real servers' default
// route through it), with an empty IPVS table: the lvsctl tests' start.
func natNetwork(t *testing.T, prefix string) *network {
	n := seedNetwork(t, prefix)
	n.lvsprep("dir", "director", "nat", "--vip", seedVIP+"/24", "--dev", "eth0", "--rs-net", "172.16.0.0/24")
	n.lvsprep("rs1", "realserver", "nat", "--gateway", seedGateway)
	n.lvsprep("rs2", "realserver", "nat", "--gateway", seedGateway)
	return n
}

// natRules is the rules text of one service with options and the given
// real servers, each masqueraded at weight 1.
func natRules(service, options string, servers ...string) string {
	s := "-A " + service + " " + options + "\n"
	for _, rs := range servers {
		s += "-a " + service + " -r " + rs + " -m -w 1\n"
	}
	return s
}

// seedVSNAT applies the example with our tools only: lvsprep on the
// director (VIP, forwarding, masquerading, FTP helper) and on the real
// servers (default route via the director), then ipvsadm's rules.
func seedVSNAT(n *network) {
	n.lvsprep("dir", "director", "nat", "--vip", seedVIP+"/24", "--dev", "eth0", "--rs-net", "172.16.0.0/24", "--ftp")
	n.lvsprep("rs1", "realserver", "nat", "--gateway", seedGateway)
	n.lvsprep("rs2", "realserver", "nat", "--gateway", seedGateway)
	n.ipvsadm("dir", "-A", "-t", seedVIP80, "-s", "wrr")
	n.ipvsadm("dir", "-a", "-t", seedVIP80, "-r", seedRS1, "-m", "-w", "1")
	n.ipvsadm("dir", "-a", "-t", seedVIP80, "-r", seedRS2, "-m", "-w", "2")
	n.ipvsadm("dir", "-A", "-t", seedVIP+":21")
	n.ipvsadm("dir", "-a", "-t", seedVIP+":21", "-r", seedRS2FTP, "-m")
}

// checkSplit asserts that count requests all answered, came back from
// vipPort, and split between rs1 and rs2 as w1:w2 within tol.
func checkSplit(t *testing.T, tally tally, vipPort string, w1, w2, tol int) {
	t.Helper()
	want1, got1, got2 := splitErrors(t, tally, vipPort, w1, w2, tol)
	t.Logf("split rs1:rs2 = %d:%d over %d requests (weights %d:%d, expected %d:%d ±%d)", got1, got2, tally.Requests, w1, w2, want1, tally.Requests-want1, tol)
}

// splitErrors is checkSplit without its log line (the demo prints its own
// table); it returns the expected share of rs1 and what each server got.
func splitErrors(t *testing.T, tally tally, vipPort string, w1, w2, tol int) (want1, got1, got2 int) {
	t.Helper()
	if len(tally.Errors) > 0 {
		t.Errorf("%d of %d requests failed, e.g. %s", len(tally.Errors), tally.Requests, tally.Errors[0])
	}
	if tally.Remotes[vipPort] != tally.Requests {
		t.Errorf("the client talked to %v, want only %s", tally.Remotes, vipPort)
	}
	want1 = tally.Requests * w1 / (w1 + w2)
	want2 := tally.Requests - want1
	got1, got2 = tally.ByServer["rs1"], tally.ByServer["rs2"]
	if !within(got1, want1, tol) || !within(got2, want2, tol) {
		t.Errorf("split rs1:rs2 = %d:%d over %d requests, want %d:%d ±%d (weights %d:%d)", got1, got2, tally.Requests, want1, want2, tol, w1, w2)
	}
	return want1, got1, got2
}

func hostOf(addrPort string) string {
	h, _, _ := net.SplitHostPort(addrPort)
	return h
}

func TestVSNAT(t *testing.T) {
	n := seedNetwork(t, "nat")
	hosts := []string{"dir", "rs1", "rs2"}
	before := map[string]string{}
	for _, h := range hosts {
		before[h] = n.snapshot(h)
	}
	seedVSNAT(n)
	// Count what reaches the client (replies must all come from VIP:80)
	// and what the director sees from the servers' port 80 (replies pass
	// through it in VS/NAT; the DR and TUN tests assert they do not).
	n.count("client", "filter", "INPUT", "-p", "tcp", "-s", seedVIP, "--sport", "80")
	n.count("client", "filter", "INPUT", "-p", "tcp")
	n.count("dir", "mangle", "PREROUTING", "-p", "tcp", "--sport", "80")

	t.Run("split", func(t *testing.T) {
		tally := n.get("client", seedVIP80, seedRequests)
		checkSplit(t, tally, seedVIP80, 1, 2, seedTolerance)
		a := tally.First
		if a == nil {
			t.Fatal("no answer")
		}
		if h := hostOf(a.ServerLocal); h != "172.16.0.2" && h != "172.16.0.3" {
			t.Errorf("the server received the request on %s, want its own address (the director rewrote VIP to RIP)", a.ServerLocal)
		}
		if h := hostOf(a.ServerRemote); h != seedClient {
			t.Errorf("the server saw the request from %s, want the client %s (VS/NAT keeps the client address)", a.ServerRemote, seedClient)
		}
		c := n.counters("client", "filter", "INPUT")
		if c[0] == 0 || c[0] != c[1] {
			t.Errorf("client received %d TCP packets, %d of them from %s, want all", c[1], c[0], seedVIP80)
		}
		if d := n.counters("dir", "mangle", "PREROUTING"); d[0] == 0 {
			t.Errorf("the director saw no replies from port 80: VS/NAT replies must pass through it")
		}
		stats := n.ipvsadm("dir", "-Ln", "--stats")
		if !strings.Contains(stats, "TCP  "+seedVIP80) {
			t.Errorf("ipvsadm -Ln --stats:\n%s", stats)
		}
	})

	t.Run("masquerade", func(t *testing.T) {
		// The real servers' own outbound connections leave with the
		// director's address.
		n.start("client", "http", "outside", seedClient+":8080")
		tally := n.get("rs1", seedClient+":8080", 1)
		if tally.First == nil {
			t.Fatalf("rs1 cannot reach the outside: %v", tally.Errors)
		}
		if h := hostOf(tally.First.ServerRemote); h != seedVIP {
			t.Errorf("the outside saw rs1 as %s, want the director's address %s", h, seedVIP)
		}
	})

	t.Run("ftp", func(t *testing.T) {
		var res ftpResult
		n.role("client", "ftpget", &res, seedVIP+":21")
		want := sha256Hex(fileContent(ftpSize))
		if res.Size != ftpSize || res.SHA256 != want {
			t.Errorf("downloaded %d bytes with sha256 %s, want %d bytes, %s", res.Size, res.SHA256, ftpSize, want)
		}
		if !strings.Contains(res.PASVReply, "(202,103,106,5,") || hostOf(res.DataAddr) != seedVIP {
			t.Errorf("PASV reply %q (data to %s): ip_vs_ftp should have rewritten the real server's address to the VIP", res.PASVReply, res.DataAddr)
		}
	})

	schedulingChecks(t, n, seedVIP80, "-m", [2]realServer{{"rs1", seedRS1, 1}, {"rs2", seedRS2, 2}})
	n.ipvsadm("dir", "-C")

	t.Run("undo", func(t *testing.T) {
		n.lvsprep("dir", "director", "nat", "--vip", seedVIP, "--undo")
		n.lvsprep("rs1", "realserver", "nat", "--gateway", seedGateway, "--undo")
		n.lvsprep("rs2", "realserver", "nat", "--gateway", seedGateway, "--undo")
		for _, h := range hosts {
			if after := n.snapshot(h); after != before[h] {
				t.Errorf("%s after --undo differs from before lvsprep:\nbefore:\n%s\nafter:\n%s", h, before[h], after)
			}
		}
	})
}
