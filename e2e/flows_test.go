package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// flowServer serves serveFlows as name on a loopback port until the test
// ends or stop is called.
func flowServer(t *testing.T, name string) (addr string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ln := listen(t)
	done := make(chan error, 1)
	go func() { done <- serveFlows(ctx, name, ln) }()
	stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveFlows: %v", err)
		}
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			stop()
		}
	})
	return ln.Addr().String(), stop
}

// The flow tests stay on the real clock: the connections are real.

// flowsUntil polls fc's report until cond holds (10 s at most: a bound on
// a hung test).
func flowsUntil(t *testing.T, fc *flowClient, cond func(flowReport) bool) flowReport {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := fc.Report()
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("flows after 10 s: %+v", r)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFlowsReportBreaksAndRecovery(t *testing.T) {
	addr, stop := flowServer(t, "rs1")
	cfg := flowConfig{Addr: addr, N: 40, BasePort: 21400, Interval: 20 * time.Millisecond, OpenTimeout: 2 * time.Second}
	fc, err := startFlows(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Stop()
	fc.Mark()
	r := flowsUntil(t, fc, func(r flowReport) bool { return r.Pending == 0 })
	if r.AtMark != 40 || r.Broken != 0 || r.ByServer["rs1"] != 40 || r.RecoveryMS <= 0 {
		t.Fatalf("healthy flows: %+v", r)
	}
	// Recovery counted from a later clock: every connection waits for a
	// line sent after it.
	clocked := time.Now()
	fc.Clock()
	if r := fc.Report(); r.Pending == 0 || r.AtMark != 40 {
		t.Fatalf("right after Clock no connection should have flowed since: %+v", r)
	}
	r = flowsUntil(t, fc, func(r flowReport) bool { return r.Pending == 0 })
	if since := time.Since(clocked).Milliseconds(); r.RecoveryMS <= 0 || r.RecoveryMS > since {
		t.Fatalf("every connection flowing %d ms after Clock: %+v", since, r)
	}
	// The server goes away: every connection open at mark breaks.
	fc.Mark()
	stop()
	r = flowsUntil(t, fc, func(r flowReport) bool { return r.Broken >= 40 })
	if r.AtMark != 40 || r.Broken != 40 || r.BrokenByServer["rs1"] != 40 || r.FirstError == "" {
		t.Fatalf("after the server left: %+v", r)
	}
	if len(r.BrokenPorts) != 40 || !slices.Contains(r.BrokenPorts, cfg.BasePort) {
		t.Errorf("broken ports %v: want the 40 connections', from %d", r.BrokenPorts, cfg.BasePort)
	}
	if r.Reasons["eof"]+r.Reasons["reset"] != 40 {
		t.Errorf("reasons %v: want end of stream or reset", r.Reasons)
	}
	if r.OpenFailed == 0 {
		t.Errorf("no failed reconnection counted with the server gone: %+v", r)
	}
}

func TestFlowsLifetimeEndsConnections(t *testing.T) {
	addr, _ := flowServer(t, "rs2")
	fc, err := startFlows(flowConfig{Addr: addr, N: 10, BasePort: 21500, Interval: 10 * time.Millisecond,
		Lifetime: 60 * time.Millisecond, OpenTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Stop()
	fc.Mark()
	r := flowsUntil(t, fc, func(r flowReport) bool { return r.Ended == 10 && r.Opened >= 10 && r.ByServer["rs2"] > 0 })
	if r.Broken != 0 || len(r.ByServer) != 1 {
		t.Fatalf("after every lifetime ended: %+v", r)
	}
}

func TestFlowsRoleProtocol(t *testing.T) {
	addr, _ := flowServer(t, "rs3")
	var out bytes.Buffer
	cfg, err := flowsConfigFromArgs([]string{addr, "5", "21600", "10ms", "0s", "1s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := flowsLoop(cfg, bufio.NewScanner(strings.NewReader("mark\nclock\nreport\nquit\n")), json.NewEncoder(&out)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], `"ready":5`) || lines[1] != `{"marked":true}` || lines[2] != `{"clock":true}` {
		t.Fatalf("role output:\n%s", out.String())
	}
	var r flowReport
	if err := json.Unmarshal([]byte(lines[3]), &r); err != nil || r.AtMark != 5 || r.Slots != 5 {
		t.Errorf("report %q: %+v %v", lines[3], r, err)
	}
	for _, bad := range [][]string{{addr}, {addr, "0", "1", "1s", "0s", "1s"}, {addr, "5", "65534", "1s", "0s", "1s"}, {addr, "5", "1", "x", "0s", "1s"}} {
		if _, err := flowsConfigFromArgs(bad); err == nil {
			t.Errorf("flows arguments %q accepted", bad)
		}
	}
}

func TestProbeSameFlowsTwice(t *testing.T) {
	addr, _ := flowServer(t, "rs4")
	a := probeFlows(addr, 30, 21700, 2*time.Second)
	b := probeFlows(addr, 30, 21700, 2*time.Second) // same ports at once: resets left no TIME_WAIT
	if a.Failed != 0 || b.Failed != 0 || a.ByServer["rs4"] != 30 {
		t.Fatalf("probes: %+v / %+v", a, b)
	}
	if moved, both := movedFlows(a, b); moved != 0 || both != 30 {
		t.Errorf("movedFlows = %d of %d, want 0 of 30", moved, both)
	}
	b.Servers[3], b.Servers[4] = "rs9", ""
	if moved, both := movedFlows(a, b); moved != 1 || both != 29 {
		t.Errorf("movedFlows = %d of %d, want 1 of 29", moved, both)
	}
}

func TestModuloMovesMostFlows(t *testing.T) {
	// Going from 4 to 3 buckets, a flow keeps its bucket only when h mod 4
	// equals h mod 3: about a quarter of them.
	moved := moduloMoved("10.1.0.10", 1000, 20000, 4, 3)
	if moved < 650 || moved > 850 {
		t.Errorf("modulo 4 -> 3 moved %d of 1000, want about 750", moved)
	}
	if moduloMoved("10.1.0.10", 1000, 20000, 4, 4) != 0 {
		t.Error("modulo with the same server count moved flows")
	}
}

func TestSortedCounts(t *testing.T) {
	if got := sortedCounts(map[string]int{"rs2": 3, "rs1": 1}); got != "rs1=1 rs2=3" {
		t.Errorf("sortedCounts = %q", got)
	}
}

// TestProbeUDPSameFlowsTwice: the UDP probe gets every flow answered and
// names the server; a flow nobody answers fails after its tries.
func TestProbeUDPSameFlowsTwice(t *testing.T) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go serveUDPEcho(ctx, "rs2", pc)
	a := probeUDPFlows(pc.LocalAddr().String(), 30, 21800, 2*time.Second)
	b := probeUDPFlows(pc.LocalAddr().String(), 30, 21800, 2*time.Second)
	if a.Failed != 0 || b.Failed != 0 || a.ByServer["rs2"] != 30 {
		t.Fatalf("probes: %+v / %+v", a, b)
	}
	if moved, both := movedFlows(a, b); moved != 0 || both != 30 {
		t.Errorf("movedFlows = %d of %d, want 0 of 30", moved, both)
	}
	silent, err := net.ListenPacket("udp4", "127.0.0.1:0") // bound, never read
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if c := probeUDPFlows(silent.LocalAddr().String(), 2, 21850, 50*time.Millisecond); c.Failed != 2 || c.Servers[0] != "" {
		t.Errorf("a silent server: %+v", c)
	}
}
