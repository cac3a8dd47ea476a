package health

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCheckerInlineSlow runs TCP probes whose connect is still under way
// when connect returns, on the scheduler's goroutine: one that never
// completes fails at its timeout, one that completes late passes on the
// shared poller's event, and a stopping Run ends the probes under way
// without waiting for their timeout. Real clock: real sockets, and the
// kernel's SYN retransmission.
func TestCheckerInlineSlow(t *testing.T) {
	hole := blackhole(t, "127.0.0.1")
	stuck := blackhole(t, "127.0.0.1")
	late, ln := blackholeListener(t, "::1")
	// Every first probe at once.
	c := New(Options{Rand: rand.New(zeroSource{})})
	if err := c.Set([]Target{
		{Addr: hole, Spec: Spec{Type: "tcp", Interval: "100ms", Timeout: "50ms", Fall: 1}},
		{Addr: late, Spec: Spec{Type: "tcp", Interval: "2h", Timeout: "1h"}},
		{Addr: stuck, Spec: Spec{Type: "tcp", Interval: "2h", Timeout: "1h"}},
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	timeout := time.After(30 * time.Second) // a bound on a hung test
	var holeCh *Change
	for holeCh == nil {
		select {
		case ch := <-c.Changes():
			if ch.Key.Addr != hole {
				t.Fatalf("%s changed, a probe still waiting: %+v", ch.Key.Addr, ch)
			}
			holeCh = &ch
		case <-timeout:
			t.Fatal("no change after 30s")
		}
	}
	if holeCh.New != Down || holeCh.Result != "timeout after 50ms" {
		t.Errorf("blackhole: %+v, want down, timeout after 50ms", holeCh)
	}
	if st := c.Snapshot(); st.InFlight < 2 {
		t.Errorf("%d probes in flight, want those of %s and %s", st.InFlight, late, stuck)
	}
	fd, _, err := unix.Accept(ln) // room for the waiting probe's next SYN
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	for got := false; !got; {
		select {
		case ch := <-c.Changes():
			if ch.Key.Addr == late {
				if ch.New != Up || ch.Result != resultOK {
					t.Errorf("late connect: %+v, want up", ch)
				}
				got = true
			}
		case <-timeout:
			t.Fatal("the late connect did not pass in 30s")
		}
	}

	// stuck's probe would wait for an hour, unless Run's end cuts it short.
	cancel()
	<-done
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inFlight != 0 || len(c.slow) != 0 {
		t.Errorf("after Run: %d in flight, %d inline probes under way; want none", c.inFlight, len(c.slow))
	}
}

// zeroSource makes every bounded draw of a rand.Rand 0: 1 times n is
// below 2⁶⁴, and not below n, so no draw is rejected.
type zeroSource struct{}

func (zeroSource) Uint64() uint64 { return 1 }
