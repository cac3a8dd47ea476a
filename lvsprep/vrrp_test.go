package lvsprep

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestDirectorVRRPLeavesTheVIP: with --vrrp a director profile makes every
// setting but the VIP, records the flag, and its undo leaves the VIP that
// keepalived added meanwhile; check reports whether this host holds the
// VIP as information, never as a problem.
func TestDirectorVRRPLeavesTheVIP(t *testing.T) {
	th := newTestHost(t)
	before := th.snapshot()
	args := []string{"director", "dr", "--vip", "10.0.0.100/24", "--dev", "eth1", "--vrrp"}
	out := th.mustRun(args...)
	if !strings.Contains(out, "vrrp      VIP 10.0.0.100/24 on eth1 left to VRRP") || !strings.Contains(out, "1 changed, 0 already in place") {
		t.Errorf("apply output:\n%s", out)
	}
	if th.hasAddr("eth1", "10.0.0.100/24") {
		t.Errorf("--vrrp added the VIP: %v", th.links.Links["eth1"].Addrs)
	}
	if got := th.sysctl("net/ipv4/conf/eth1/accept_local"); got != "1" {
		t.Errorf("accept_local = %s, want 1 (lvsctl run's probes through the VIP on the master)", got)
	}
	st, err := th.loadState("director-dr-10.0.0.100")
	if err != nil || st == nil {
		t.Fatalf("state: %v %v", st, err)
	}
	if want := []string{"--vip", "10.0.0.100/24", "--dev", "eth1", "--vrrp"}; !slices.Equal(st.Args, want) {
		t.Errorf("state args %q, want %q", st.Args, want)
	}
	for _, r := range st.Records {
		if r.Kind == kindAddr {
			t.Errorf("state records an address: %+v", r)
		}
	}

	// A backup: the VIP is elsewhere, and that is right.
	check := append([]string{"check"}, args...)
	out, _, code := th.run(check...)
	rep := parseCheck(t, out)
	row := checkRow{status: "info", check: "VIP 10.0.0.100/24 on eth1 held by VRRP", have: "not held here: a backup, or keepalived is not running"}
	if code != 0 || !hasRow(rep.rows, row) || !strings.Contains(out, "Everything is in place.") || len(rep.fixes) != 0 {
		t.Errorf("check on a backup: exit %d, want 0 and the row %+v\n%s", code, row, out)
	}

	// keepalived makes this host the master.
	vip := netip.MustParsePrefix("10.0.0.100/24")
	th.links.Links["eth1"].Addrs = append(th.links.Links["eth1"].Addrs, vip)
	out, _, code = th.run(check...)
	row.have = "held here: the VRRP master"
	if rep := parseCheck(t, out); code != 0 || !hasRow(rep.rows, row) {
		t.Errorf("check on the master: exit %d, want 0 and the row %+v\n%s", code, row, out)
	}

	// The same profile without --vrrp is another configuration.
	out, errOut, code := th.run("director", "dr", "--vip", "10.0.0.100/24", "--dev", "eth1")
	if code != 1 || !strings.Contains(errOut, "already applied with other settings (--vip 10.0.0.100/24 --dev eth1 --vrrp)") {
		t.Errorf("apply without --vrrp over --vrrp: exit %d\n%s%s", code, out, errOut)
	}

	// Undo reverts lvsprep's settings; the VIP is keepalived's to remove.
	out = th.mustRun("director", "dr", "--vip", "10.0.0.100", "--undo")
	if !strings.Contains(out, "1 reverted") {
		t.Errorf("undo output:\n%s", out)
	}
	th.links.Links["eth1"].Addrs = slices.DeleteFunc(th.links.Links["eth1"].Addrs, func(p netip.Prefix) bool { return p == vip })
	if after := th.snapshot(); after != before {
		t.Errorf("undo left a trace besides keepalived's VIP:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestDirectorNATVRRP: the VS/NAT profile with --vrrp forwards and
// masquerades but adds no VIP; its dry run says so in a comment.
func TestDirectorNATVRRP(t *testing.T) {
	th := newTestHost(t)
	args := []string{"director", "nat", "--vip", "202.103.106.5/24", "--dev", "eth1", "--rs-net", "172.16.0.0/24", "--vrrp"}
	th.root = false
	out := th.mustRun(append(args, "--dry-run")...)
	if strings.Contains(out, "ip address add") || !strings.Contains(out, "# VIP 202.103.106.5/24 on eth1 left to VRRP") ||
		!strings.Contains(out, "sysctl -w net.ipv4.ip_forward=1") {
		t.Errorf("dry run:\n%s", out)
	}
	th.root = true
	out = th.mustRun(args...)
	if !strings.Contains(out, "2 changed, 0 already in place") || th.hasAddr("eth1", "202.103.106.5/24") {
		t.Errorf("apply: %v\n%s", th.links.Links["eth1"].Addrs, out)
	}
	if got := th.sysctl("net/ipv4/ip_forward"); got != "1" {
		t.Errorf("ip_forward = %s, want 1", got)
	}
	if got := th.rules4.Rules["nat/POSTROUTING"]; len(got) != 1 {
		t.Errorf("nat POSTROUTING = %q, want the masquerade rule", got)
	}
	if out := th.mustRun("status"); !strings.Contains(out, "--vrrp") {
		t.Errorf("status does not show --vrrp:\n%s", out)
	}
}

// TestVRRPOnlyWhereAVIPMoves: --vrrp belongs to the director profiles
// whose VIP is on a segment (nat, dr, tun); elsewhere it is a usage error.
func TestVRRPOnlyWhereAVIPMoves(t *testing.T) {
	th := newTestHost(t)
	for _, args := range [][]string{
		{"director", "fullnat", "--vip", "10.0.0.100", "--dev", "eth1", "--snat", "172.16.0.2", "--vrrp"},
		{"director", "ecmp", "--vip", "192.0.2.10", "--vrrp"},
		{"realserver", "dr", "--vip", "10.0.0.100", "--dev", "eth0", "--vrrp"},
	} {
		before := th.snapshot()
		if _, errOut, code := th.run(args...); code != 2 || !strings.Contains(errOut, "--vrrp") {
			t.Errorf("%s: exit %d, want 2\n%s", strings.Join(args, " "), code, errOut)
		}
		if th.snapshot() != before {
			t.Errorf("%s changed the host", strings.Join(args, " "))
		}
	}
	for _, mode := range []string{"tun", "dr"} {
		if out, _, _ := th.run("check", "director", mode, "--vip", "10.0.0.100/24", "--dev", "eth1", "--vrrp"); !strings.Contains(out, "held by VRRP") {
			t.Errorf("check director %s --vrrp:\n%s", mode, out)
		}
	}
}

func hasRow(rows []checkRow, want checkRow) bool {
	return slices.ContainsFunc(rows, func(r checkRow) bool {
		return r.status == want.status && r.check == want.check && r.have == want.have
	})
}

// TestVRRPStateHoldsNoVIP: a state file of a --vrrp profile that records
// the VIP's address is refused, so --undo never removes keepalived's VIP.
func TestVRRPStateHoldsNoVIP(t *testing.T) {
	th := newTestHost(t)
	th.mustRun("director", "dr", "--vip", "10.0.0.100/24", "--dev", "eth1", "--vrrp")
	st, err := th.loadState("director-dr-10.0.0.100")
	if err != nil || st == nil {
		t.Fatalf("state: %v %v", st, err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := decodeState(b); err != nil {
		t.Fatalf("lvsprep's own state refused: %v", err)
	}
	st.Records = append(st.Records, record{step: step{Kind: kindAddr, Dev: "eth1", Addr: netip.MustParsePrefix("10.0.0.100/24"),
		Why: "the virtual IP that clients connect to"}, Changed: true})
	b, _ = json.Marshal(st)
	if _, _, err := decodeState(b); err == nil {
		t.Errorf("a --vrrp state recording the VIP was accepted")
	}
}
