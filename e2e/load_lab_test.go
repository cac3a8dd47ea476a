//go:build lab

package e2e

import (
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestVSNATUnderLoad: the seed example's VS/NAT service under concurrent
// keep-alive clients. Every request must be answered by a real server
// (none lost, none failed), and the split follows the weights 1:2.
// make lab: 500 clients, 5,000 requests; make soak: 500 clients, 100,000.
func TestVSNATUnderLoad(t *testing.T) {
	n := seedNetwork(t, "load")
	seedVSNAT(n)
	const clients = 500
	requests := 5000
	if os.Getenv("LVSKIT_SOAK") == "1" { // make soak
		requests = 100000
	}
	per := requests / clients
	conns := make([]*KeepAlive, clients)
	// The sockets must be made in the client's namespace: from this
	// thread, inside n.in. Their I/O then works from any goroutine.
	n.in("client", func() {
		for i := range conns {
			k, err := DialKeepAlive(seedVIP80)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			conns[i] = k
		}
	})
	defer func() {
		for _, k := range conns {
			k.Close()
		}
	}()
	var ok, failed atomic.Int64
	var mu sync.Mutex
	byServer := map[string]int{}
	var firstErr error
	start := time.Now()
	var wg sync.WaitGroup
	for _, k := range conns {
		wg.Go(func() {
			mine := map[string]int{}
			for range per {
				a, err := k.Get()
				if err != nil {
					failed.Add(1)
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return // the connection is gone: its remaining requests count as failed below
				}
				ok.Add(1)
				mine[a.Server]++
			}
			mu.Lock()
			for s, c := range mine {
				byServer[s] += c
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	lost := int64(clients*per) - ok.Load() - failed.Load()
	t.Logf("%d keep-alive clients, %d requests: %d answered, %d failed, %d not sent after a failure, in %v (%.0f requests/s); by server %v",
		clients, clients*per, ok.Load(), failed.Load(), lost, elapsed.Round(time.Millisecond), float64(ok.Load())/elapsed.Seconds(), byServer)
	if ok.Load() != int64(clients*per) {
		t.Errorf("%d of %d requests answered; first error: %v", ok.Load(), clients*per, firstErr)
	}
	// Connections, not requests, are scheduled: 500 connections at
	// weights 1:2 give rs1 a third of them.
	if c1 := byServer["rs1"] / per; c1 < clients/3-3 || c1 > clients/3+3 {
		t.Errorf("rs1 got %d of %d connections, want about a third (wrr 1:2)", c1, clients)
	}
}
