//go:build unix

package health

import (
	"context"
	"net/netip"
	"syscall"
	"testing"
	"time"
)

// cpuTime returns this process's user and system CPU time.
func cpuTime(tb testing.TB) (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// BenchmarkCheckerTCP runs the design load, 10,000 TCP targets at a 2 s
// interval (5,000 probes a second), against listeners of a helper process
// on 127.0.0.1, for b.N thousand probes, and reports this process's CPU
// time (user and system) per 1,000 probes, its share of one CPU, and the
// p99 lateness. Real clock: it measures real probes.
func BenchmarkCheckerTCP(b *testing.B) {
	const targets = 10000
	ports := startListeners(b, targets)
	lo := netip.MustParseAddr("127.0.0.1")
	ts := make([]Target, targets)
	for i, p := range ports {
		ts[i] = Target{Addr: netip.AddrPortFrom(lo, p), Spec: Spec{Type: "tcp", Interval: "2s", Timeout: "1s"}}
	}
	c := New(Options{})
	if err := c.Set(ts); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		for range c.Changes() {
		}
	}()
	b.ResetTimer()
	user0, sys0 := cpuTime(b)
	wall0 := time.Now()
	go func() { done <- c.Run(ctx) }()
	want := uint64(b.N) * 1000
	// Ten times the time of 5,000 probes a second, and a minute: a bound
	// on a hung benchmark.
	deadline := wall0.Add(time.Minute + 10*time.Duration(want)*time.Second/5000)
	for c.Lateness().Count < want {
		if time.Now().After(deadline) {
			cancel()
			b.Fatalf("%d probes of %d after %s", c.Lateness().Count, want, time.Since(wall0).Round(time.Second))
		}
		time.Sleep(10 * time.Millisecond)
	}
	user, sys := cpuTime(b)
	user, sys = user-user0, sys-sys0
	cpu, wall := user+sys, time.Since(wall0)
	b.StopTimer()
	st := c.Snapshot()
	cancel()
	<-done
	probes := float64(st.Lateness.Count)
	perK := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / (probes / 1000) }
	b.ReportMetric(perK(cpu), "cpu-ms/1000probes")
	b.ReportMetric(perK(user), "user-ms/1000probes")
	b.ReportMetric(perK(sys), "sys-ms/1000probes")
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "cpu-%")
	b.ReportMetric(float64(st.Lateness.P99.Microseconds())/1000, "p99-late-ms")
	failed := 0
	for _, s := range st.Targets {
		if s.Result != "" && s.Result != resultOK {
			failed++
		}
	}
	// On a loaded host probes can time out; the figure shows it.
	b.ReportMetric(float64(failed), "failing-targets")
}
