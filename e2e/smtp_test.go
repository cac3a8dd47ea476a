package e2e

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lvskit/lvskit/health"
)

// TestServeSMTP: lvsctl's smtp check passes against the lab's mail
// server, and fails while it refuses.
func TestServeSMTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var refuse atomic.Bool
	go serveSMTP(ctx, "mx.test", ln, 50*time.Millisecond, refuse.Load)
	target := health.Target{Addr: netip.MustParseAddrPort(ln.Addr().String()), Spec: health.Spec{Type: "smtp", Helo: "lb.test"}}
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	defer pcancel()
	start := time.Now()
	if err := health.Probe(pctx, target); err != nil {
		t.Errorf("smtp check of the lab's mail server: %v", err)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("the check passed after %v: the greeting came before its pause", d)
	}
	refuse.Store(true)
	if err := health.Probe(pctx, target); err == nil || err.Error() != `smtp greeting: 554 "mx.test no service", want 220` {
		t.Errorf("smtp check of the refusing server: %v", err)
	}
}
