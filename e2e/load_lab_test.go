//go:build lab

package e2e

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// loadRequestTimeout bounds one request of TestVSNATUnderLoad.
const loadRequestTimeout = 60 * time.Second

// tcpCounter reads one counter of the Tcp: lines of /proc/net/snmp in a
// host's namespace.
func tcpCounter(n *network, host, name string) int64 {
	var v int64 = -1
	n.in(host, func() {
		b, err := os.ReadFile("/proc/net/snmp")
		if err != nil {
			n.t.Fatal(err)
		}
		var names []string
		for l := range strings.Lines(string(b)) {
			f := strings.Fields(l)
			if len(f) == 0 || f[0] != "Tcp:" {
				continue
			}
			if names == nil {
				names = f
				continue
			}
			for i, k := range names {
				if k == name && i < len(f) {
					v, _ = strconv.ParseInt(f[i], 10, 64)
				}
			}
		}
	})
	if v < 0 {
		n.t.Fatalf("no Tcp %s in /proc/net/snmp of %s", name, host)
	}
	return v
}

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
	retrans := func() int64 { return tcpCounter(n, "client", "RetransSegs") }
	n.in("client", func() {
		for i := range conns {
			k, err := DialKeepAlive(seedVIP80)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			// Errors are the figure, not latency: under TCG on a busy
			// host a request can wait seconds for the CPU.
			k.Timeout = loadRequestTimeout
			conns[i] = k
		}
	})
	retransBefore := retrans()
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
	t.Logf("%d keep-alive clients, %d requests: %d answered, %d failed, %d not sent after a failure, in %v (%.0f requests/s); by server %v; client TCP retransmissions %d",
		clients, clients*per, ok.Load(), failed.Load(), lost, elapsed.Round(time.Millisecond), float64(ok.Load())/elapsed.Seconds(), byServer, retrans()-retransBefore)
	if ok.Load() != int64(clients*per) {
		t.Errorf("%d of %d requests answered; first error: %v", ok.Load(), clients*per, firstErr)
	}
	// Connections, not requests, are scheduled: 500 connections at
	// weights 1:2 give rs1 a third of them.
	if c1 := byServer["rs1"] / per; c1 < clients/3-3 || c1 > clients/3+3 {
		t.Errorf("rs1 got %d of %d connections, want about a third (wrr 1:2)", c1, clients)
	}
}
