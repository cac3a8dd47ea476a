//go:build lab

package list_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/list"
	"github.com/lvskit/lvskit/ipvsadm/list/listtest"
	"github.com/lvskit/lvskit/lab/labtest"
	"github.com/lvskit/lvskit/save"
)

// threadConnFile is the connection table of the calling thread's network
// namespace. /proc/net is /proc/self/net, the namespace of the process's
// main thread, not of a test's thread that labtest.Netns moved.
const threadConnFile = "/proc/thread-self/net/ip_vs_conn"

func openIPVS(t *testing.T) *ipvs.Conn {
	t.Helper()
	c, err := ipvs.Open()
	if err != nil {
		t.Fatalf("ipvs.Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// createGoldenTable builds the big table of the golden run r2 by running
// t2.sh's creation commands (everything before "# listings") with the
// reference ipvsadm; the commands that fail there fail here too.
func createGoldenTable(t *testing.T) {
	t.Helper()
	script, err := os.ReadFile(filepath.Join(goldenDir, "t2.sh"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(script), "\n") {
		if strings.HasPrefix(line, "# listings") {
			break
		}
		if !strings.HasPrefix(line, "t 'ipvsadm ") {
			continue
		}
		cmd := strings.TrimSuffix(strings.TrimPrefix(line, "t '"), "'")
		labtest.Sh(t, strings.Replace(cmd, "ipvsadm", labtest.RefIpvsadm, 1))
		n++
	}
	if n < 80 {
		t.Fatalf("only %d creation commands found in t2.sh", n)
	}
}

// listingCase is one reference invocation and the same listing done by
// this package in-process.
type listingCase struct {
	args []string
	run  func(w io.Writer, c ipvs.Client, info ipvs.Info) error
}

func tableCase(o list.Options, args ...string) listingCase {
	return listingCase{args, func(w io.Writer, c ipvs.Client, info ipvs.Info) error { return list.Table(w, c, info, o) }}
}

func compareWithReference(t *testing.T, c ipvs.Client, cases []listingCase) {
	t.Helper()
	info, err := c.Info()
	if err != nil {
		t.Fatal(err)
	}
	for _, lc := range cases {
		matchReference(t, lc.args, func() (string, error) {
			var got bytes.Buffer
			err := lc.run(&got, c, info)
			return got.String(), err
		})
	}
}

// matchReference compares ours with the reference ipvsadm run with args.
// The kernel keeps one service hash for all network namespaces and a
// dump resumes by position in it, so a test changing services in another
// namespace can make any single read miss or repeat entries. A difference
// counts only when the reference read twice around ours agrees with
// itself; five disturbed attempts in a row fail the test too.
func matchReference(t *testing.T, args []string, ours func() (string, error)) {
	t.Helper()
	what := "ipvsadm " + strings.Join(args, " ")
	for attempt := 1; ; attempt++ {
		before := labtest.Run(t, "", labtest.RefIpvsadm, args...)
		got, err := ours()
		after := labtest.Run(t, "", labtest.RefIpvsadm, args...)
		if before.Code != 0 || err != nil {
			t.Errorf("%s: reference exit %d (%s), ours %v", what, before.Code, before.Stderr, err)
			return
		}
		if got == before.Stdout {
			return
		}
		if before.Stdout == after.Stdout {
			t.Errorf("%s differs from the reference:\n%s", what, diffLines(before.Stdout, got))
			return
		}
		if attempt == 5 {
			t.Errorf("%s: the table changed under all %d reads; last difference:\n%s", what, attempt, diffLines(before.Stdout, got))
			return
		}
	}
}

// TestLabListingsMatchReference lists the r2 table from the real kernel in
// every format, with and without names (the lab's /etc/hosts is the golden
// hosts file), and compares with Debian's ipvsadm byte for byte.
func TestLabListingsMatchReference(t *testing.T) {
	labtest.Netns(t)
	createGoldenTable(t)
	c := openIPVS(t)
	n := list.Options{Numeric: true}
	cases := []listingCase{
		tableCase(list.Options{}, "-L"),
		tableCase(n, "-Ln"),
		tableCase(list.Options{Numeric: true, NoSort: true}, "-Ln", "--nosort"),
		tableCase(list.Options{Numeric: true, Format: list.Stats}, "-Ln", "--stats"),
		tableCase(list.Options{Numeric: true, Format: list.Stats, Exact: true}, "-Ln", "--stats", "--exact"),
		tableCase(list.Options{Numeric: true, Format: list.Rate}, "-Ln", "--rate"),
		tableCase(list.Options{Numeric: true, Format: list.Thresholds}, "-Ln", "--thresholds"),
		tableCase(list.Options{Numeric: true, Format: list.PersistConn}, "-Ln", "--persistent-conn"),
		tableCase(list.Options{Numeric: true, Format: list.TunInfo}, "-Ln", "--tun-info"),
		tableCase(list.Options{Format: list.TunInfo}, "-L", "--tun-info"),
		tableCase(list.Options{Format: list.Stats}, "-L", "--stats"),
		{[]string{"-S"}, func(w io.Writer, c ipvs.Client, _ ipvs.Info) error { return save.Write(w, c, list.Options{}) }},
		{[]string{"-Sn"}, func(w io.Writer, c ipvs.Client, _ ipvs.Info) error { return save.Write(w, c, n) }},
		{[]string{"-Ln", "-t", "10.0.0.1:80"}, func(w io.Writer, c ipvs.Client, _ ipvs.Info) error {
			return list.Service(w, c, ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr("10.0.0.1"), Port: 80}, n)
		}},
		{[]string{"-L", "-f", "2", "-6"}, func(w io.Writer, c ipvs.Client, _ ipvs.Info) error {
			return list.Service(w, c, ipvs.Service{Family: ipvs.AFInet6, FWMark: 2, Protocol: ipvs.ProtoTCP}, list.Options{})
		}},
		{[]string{"-L", "--timeout"}, func(w io.Writer, c ipvs.Client, _ ipvs.Info) error {
			tm, err := c.Timeouts()
			if err != nil {
				return err
			}
			return list.Timeouts(w, tm)
		}},
	}
	compareWithReference(t, c, cases)
}

// TestLabConnectionsMatchReference makes UDP connections through a service
// on a dummy interface and compares -L -c listings (names, numeric,
// --persistent-conn) with the reference. Expiry countdowns may tick
// between the two runs, so ours must equal one of the reference listings
// taken right before and after it.
func TestLabConnectionsMatchReference(t *testing.T) {
	labtest.Netns(t)
	for _, args := range [][]string{
		{"link", "add", "d0", "type", "dummy"}, {"link", "set", "d0", "up"},
		{"addr", "add", "10.10.0.1/24", "dev", "d0"}, {"route", "add", "10.30.0.0/24", "dev", "d0"},
	} {
		if r := labtest.Run(t, "", "/usr/bin/ip", args...); r.Code != 0 {
			t.Fatalf("ip %v: %+v", args, r)
		}
	}
	for _, cmd := range [][]string{
		{"-A", "-u", "10.10.0.1:53", "-s", "rr"}, {"-a", "-u", "10.10.0.1:53", "-r", "10.30.0.2:5353", "-m"},
		{"-A", "-u", "10.10.0.1:5060", "-p", "60", "--pe", "sip", "-s", "rr"}, {"-a", "-u", "10.10.0.1:5060", "-r", "10.30.0.4:5060", "-m"},
	} {
		if r := labtest.Run(t, "", labtest.RefIpvsadm, cmd...); r.Code != 0 {
			t.Fatalf("ipvsadm %v: %+v", cmd, r)
		}
	}
	send := func(addr, payload string) {
		conn, err := net.Dial("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write([]byte(payload)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		send("10.10.0.1:53", "hello")
	}
	send("10.10.0.1:5060", "INVITE sip:bob@10.10.0.1 SIP/2.0\r\nVia: SIP/2.0/UDP 10.10.0.1\r\nCall-ID: a84b4c76e66710@pc33\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n")
	time.Sleep(200 * time.Millisecond)
	for _, tc := range []struct {
		args    []string
		numeric bool
		persist bool
	}{
		{[]string{"-Lcn"}, true, false},
		{[]string{"-Lc"}, false, false},
		{[]string{"-Lcn", "--persistent-conn"}, true, true},
	} {
		// Expiry countdowns tick while the three listings run; try again
		// until ours falls inside one second with the reference's.
		var diff string
		for attempt := 0; attempt < 6; attempt++ {
			before := labtest.Run(t, "", labtest.RefIpvsadm, tc.args...)
			var got bytes.Buffer
			err := list.Connections(&got, threadConnFile, tc.persist, list.Options{Numeric: tc.numeric})
			after := labtest.Run(t, "", labtest.RefIpvsadm, tc.args...)
			if err != nil {
				t.Fatalf("%v: %v", tc.args, err)
			}
			if strings.Count(before.Stdout, "\n") < 6 {
				t.Fatalf("%v: expected connections, reference shows:\n%s", tc.args, before.Stdout)
			}
			if got.String() == before.Stdout || got.String() == after.Stdout {
				diff = ""
				break
			}
			diff = diffLines(before.Stdout, got.String())
		}
		if diff != "" {
			t.Errorf("ipvsadm %v differs:\n%s", tc.args, diff)
		}
	}
}

// fillTable creates services x dests with our netlink pipeline, using the
// same addresses as listtest.Generated.
func fillTable(t *testing.T, c *ipvs.Conn, services, dests int) {
	t.Helper()
	g := &listtest.Generated{NumServices: services, DestsPerService: dests}
	svcs, _ := g.Services()
	p := c.Pipeline(256)
	var failed error
	done := func(err error) {
		if err != nil && failed == nil {
			failed = err
		}
	}
	for i := range svcs {
		s := svcs[i].Service
		if err := p.Submit(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}, done); err != nil {
			t.Fatal(err)
		}
		ds, _ := g.Destinations(s)
		for j := range ds {
			d := ds[j].Destination
			if err := p.Submit(ipvs.Request{Cmd: ipvs.CmdNewDest, Service: &s, Dest: &d}, done); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	if failed != nil {
		t.Fatalf("creating the table: %v", failed)
	}
}

// peakRSS runs a command through a fresh copy of the test binary and
// returns its peak resident memory in KiB.
func peakRSS(t *testing.T, args ...string) int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), peakRSSChildEnv+"="+strings.Join(args, "\x1f"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v: %s", args, err, stderr.String())
	}
	kb, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatalf("%v: %q", args, out)
	}
	return kb
}

// runTimed runs a listing command and returns its output and wall time.
func runTimed(t *testing.T, path string, args ...string) (string, time.Duration) {
	t.Helper()
	cmd := exec.Command(path, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v", path, args, err)
	}
	return out.String(), time.Since(start)
}

// TestLabLargeTables lists big kernel tables with our ipvsadm: 1000 x 10
// must give Debian's output in at most half Debian's time (other VMs share
// the host's CPUs, so each side's best of three alternating runs counts);
// 10,000 x 10 must stay under 32 MiB peak RSS for -Ln, -L and -Sn. (Debian
// needs minutes for 10,000 services under TCG, so that size is not
// compared with it.)
func TestLabLargeTables(t *testing.T) {
	ours := labtest.Ours("ipvsadm")
	if _, err := os.Stat(ours); err != nil {
		t.Fatalf("our ipvsadm is not in the lab: %v", err)
	}
	t.Run("1000x10", func(t *testing.T) {
		labtest.Netns(t)
		fillTable(t, openIPVS(t), 1000, 10)
		ref, our := time.Duration(1<<62), time.Duration(1<<62)
		for i := 0; i < 3; i++ {
			refOut, refT := runTimed(t, labtest.RefIpvsadm, "-Ln")
			ourOut, ourT := runTimed(t, ours, "-Ln")
			if ourOut != refOut {
				t.Fatalf("outputs differ:\n%s", diffLines(refOut, ourOut))
			}
			ref, our = min(ref, refT), min(our, ourT)
		}
		// Reported, never asserted: a test does not judge durations on a
		// shared, emulated CPU. make bench measures the ratio properly.
		t.Logf("ipvsadm -Ln of 1000 x 10, best of 3: Debian %v, ours %v (ratio %.2f)", ref, our, float64(our)/float64(ref))
		refSave, _ := runTimed(t, labtest.RefIpvsadm, "-Sn")
		ourSave, _ := runTimed(t, ours, "-Sn")
		if ourSave != refSave {
			t.Fatalf("-Sn outputs differ:\n%s", diffLines(refSave, ourSave))
		}
	})
	t.Run("10000x10", func(t *testing.T) {
		labtest.Netns(t)
		start := time.Now()
		fillTable(t, openIPVS(t), 10000, 10)
		filled := time.Since(start)
		rss := map[string]int64{}
		for _, args := range [][]string{{"-Ln"}, {"-L"}, {"-Sn"}} {
			rss[args[0]] = peakRSS(t, append([]string{ours}, args...)...)
		}
		t.Logf("10000 x 10 (created in %v): peak RSS -Ln %d KiB, -L %d KiB, -Sn %d KiB", filled, rss["-Ln"], rss["-L"], rss["-Sn"])
		for what, kb := range rss {
			if kb > 32<<10 {
				t.Errorf("%s: peak RSS %d KiB, limit 32 MiB", what, kb)
			}
		}
	})
}

// TestLabUnnamedForwardMethods lists destinations with every forwarding
// method value the kernel accepts (0–7; ipvsadm names 0–3 only and prints
// "(null)" for the others), in a service alone and in services sharing
// one hash chain (read in batches, see ipvs.Conn.EachDestinations), and
// compares with the reference. /proc/net/ip_vs shows 4–7 as "Masq" (lab
// run of 2026-12-05, decision 0010), so no listing may be built from it.
func TestLabUnnamedForwardMethods(t *testing.T) {
	labtest.Netns(t)
	c := openIPVS(t)
	add := func(svc *ipvs.Service, addr netip.Addr, fwd ipvs.FwdMethod) {
		t.Helper()
		d := ipvs.Destination{Family: ipvs.AFInet, Addr: addr, Port: 80, FwdMethod: fwd, Weight: 1}
		if err := c.Exec(ipvs.Request{Cmd: ipvs.CmdNewDest, Service: svc, Dest: &d}); err != nil {
			t.Fatalf("forwarding method %d: %v", fwd, err)
		}
	}
	newService := func(addr netip.Addr) *ipvs.Service {
		t.Helper()
		svc := &ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: addr, Port: 80, Scheduler: "rr", Netmask: 0xffffffff}
		if err := c.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: svc}); err != nil {
			t.Fatal(err)
		}
		return svc
	}
	alone := newService(netip.MustParseAddr("10.9.9.1"))
	for m := range 8 {
		add(alone, netip.AddrFrom4([4]byte{10, 8, 0, byte(1 + m)}), ipvs.FwdMethod(m))
	}
	// Addresses equal in their low byte, one port: one chain, long enough
	// to be read in batches.
	for i := range 80 {
		svc := newService(netip.AddrFrom4([4]byte{10, 7, byte(i), 9}))
		add(svc, netip.AddrFrom4([4]byte{10, 6, byte(i), 1}), ipvs.FwdMethod(i%8))
		add(svc, netip.AddrFrom4([4]byte{10, 6, byte(i), 2}), ipvs.FwdMethod((i+5)%8))
	}
	n := list.Options{Numeric: true}
	compareWithReference(t, c, []listingCase{
		tableCase(n, "-Ln"),
		tableCase(list.Options{Numeric: true, NoSort: true}, "-Ln", "--nosort"),
		tableCase(list.Options{Numeric: true, Format: list.TunInfo}, "-Ln", "--tun-info"),
		{[]string{"-Sn"}, func(w io.Writer, c ipvs.Client, _ ipvs.Info) error { return save.Write(w, c, n) }},
	})
	// The same through the programs, as a user runs them.
	for _, args := range [][]string{{"-Ln"}, {"-Sn"}} {
		if ref := labtest.Run(t, "", labtest.RefIpvsadm, args...); !strings.Contains(ref.Stdout, "(null)") {
			t.Fatalf("ipvsadm %s: the reference printed no (null):\n%s", strings.Join(args, " "), ref.Stdout)
		}
		matchReference(t, args, func() (string, error) {
			r := labtest.Run(t, "", labtest.Ours("ipvsadm"), args...)
			if r.Code != 0 {
				return r.Stdout, fmt.Errorf("exit %d: %s", r.Code, r.Stderr)
			}
			return r.Stdout, nil
		})
	}
}
