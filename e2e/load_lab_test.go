//go:build lab

package e2e

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lvskit/lvskit/lab/labtest"
	"golang.org/x/sys/unix"
)

// loadRequestTimeout bounds one request of TestVSNATUnderLoad.
const loadRequestTimeout = 60 * time.Second

// netCounters reads the Tcp: and TcpExt: counters of /proc/net/snmp and
// /proc/net/netstat in a host's namespace, as "Tcp.RetransSegs" and so on.
func netCounters(n *network, host string) map[string]int64 {
	c := map[string]int64{}
	n.in(host, func() {
		// thread-self: /proc/net is the thread group leader's namespace,
		// not this locked thread's.
		for _, file := range []string{"/proc/thread-self/net/snmp", "/proc/thread-self/net/netstat"} {
			b, err := os.ReadFile(file)
			if err != nil {
				n.t.Fatal(err)
			}
			// Each group is a line of names followed by a line of values.
			var names []string
			for l := range strings.Lines(string(b)) {
				f := strings.Fields(l)
				if len(f) == 0 || (f[0] != "Tcp:" && f[0] != "TcpExt:") {
					names = nil
					continue
				}
				if names == nil || names[0] != f[0] {
					names = f
					continue
				}
				for i, k := range names[1:] {
					if v, err := strconv.ParseInt(f[i+1], 10, 64); err == nil {
						c[strings.TrimSuffix(f[0], ":")+"."+k] = v
					}
				}
				names = nil
			}
		}
	})
	if _, ok := c["Tcp.RetransSegs"]; !ok {
		n.t.Fatalf("no Tcp RetransSegs in /proc/net/snmp of %s", host)
	}
	return c
}

// counterDelta lists the counters that grew between two netCounters
// readings (gauges such as Tcp.CurrEstab are left out).
func counterDelta(before, after map[string]int64) string {
	var out []string
	for k, v := range after {
		if d := v - before[k]; d != 0 && k != "Tcp.CurrEstab" && k != "Tcp.MaxConn" && !strings.HasPrefix(k, "Tcp.Rto") {
			out = append(out, fmt.Sprintf("%s %d", k, d))
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// loadFailure is one request of the load test that failed, with what the
// client knew of its connection at that moment.
type loadFailure struct {
	conn, request int           // which connection, which of its requests (from 0)
	err           error         // what Get returned
	took          time.Duration // from the request's start to the error
	at            time.Duration // from the start of the load
	local, server string        // the connection's client address, the real server that answered it before
	tcp           string        // the client socket's TCP_INFO after the error
}

// tcpInfo summarises a connection's TCP_INFO.
func tcpInfo(c net.Conn) string {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return "not TCP"
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return err.Error()
	}
	var info *unix.TCPInfo
	rc.Control(func(fd uintptr) { info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("state %d, retransmits %d, total retrans %d, lost %d, rtt %d us, last data received %d ms ago, last ack %d ms ago",
		info.State, info.Retransmits, info.Total_retrans, info.Lost, info.Rtt, info.Last_data_recv, info.Last_ack_recv)
}

// loadResult is what runLoad measured.
type loadResult struct {
	requests, ok, failed int64
	byServer             map[string]int
	failures             []loadFailure
	elapsed              time.Duration
	counters             map[string]string // per host: the TCP counters that grew
}

// runLoad makes per requests on each of clients keep-alive connections
// from the client to the seed VIP:80, all connections at once. during,
// when not nil, runs once a quarter of the requests are answered, while
// the load goes on. A failed request ends its connection's requests.
func runLoad(t *testing.T, n *network, clients, per int, during func()) loadResult {
	t.Helper()
	conns := make([]*keepAliveConn, clients)
	// The sockets must be made in the client's namespace: from this
	// thread, inside n.in. Their I/O then works from any goroutine.
	n.in("client", func() {
		for i := range conns {
			k, err := dialKeepAlive(seedVIP80)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			// Errors are the figure, not latency: under TCG on a busy
			// host a request can wait seconds for the CPU.
			k.Timeout = loadRequestTimeout
			conns[i] = k
		}
	})
	defer func() {
		for _, k := range conns {
			k.Close()
		}
	}()
	hosts := []string{"client", "dir", "rs1", "rs2"}
	before := map[string]map[string]int64{}
	for _, h := range hosts {
		before[h] = netCounters(n, h)
	}
	res := loadResult{requests: int64(clients * per), byServer: map[string]int{}, counters: map[string]string{}}
	var ok, failed atomic.Int64
	var mu sync.Mutex
	quarter := make(chan struct{})
	var quarterOnce sync.Once
	start := time.Now()
	var wg sync.WaitGroup
	for i, k := range conns {
		wg.Go(func() {
			mine := map[string]int{}
			server := ""
			for r := range per {
				rs := time.Now()
				a, err := k.Get()
				if err != nil {
					failed.Add(1)
					f := loadFailure{conn: i, request: r, err: err, took: time.Since(rs), at: rs.Sub(start),
						local: k.conn.LocalAddr().String(), server: server, tcp: tcpInfo(k.conn)}
					mu.Lock()
					res.failures = append(res.failures, f)
					mu.Unlock()
					return // the connection is gone: its remaining requests are not sent
				}
				server = a.Server
				mine[a.Server]++
				if ok.Add(1) >= res.requests/4 {
					quarterOnce.Do(func() { close(quarter) })
				}
			}
			mu.Lock()
			for s, c := range mine {
				res.byServer[s] += c
			}
			mu.Unlock()
		})
	}
	if during != nil {
		select {
		case <-quarter:
			during()
		case <-waitGroupDone(&wg):
			t.Error("the load ended before a quarter of its requests were answered")
		}
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.ok, res.failed = ok.Load(), failed.Load()
	for _, h := range hosts {
		res.counters[h] = counterDelta(before[h], netCounters(n, h))
	}
	return res
}

func waitGroupDone(wg *sync.WaitGroup) <-chan struct{} {
	c := make(chan struct{})
	go func() { wg.Wait(); close(c) }()
	return c
}

// report logs the figures and fails the test for every request not answered.
func (r loadResult) report(t *testing.T, what string) {
	t.Helper()
	t.Logf("%s: %d requests: %d answered, %d failed, %d not sent after a failure, in %v (%.0f requests/s); by server %v",
		what, r.requests, r.ok, r.failed, r.requests-r.ok-r.failed, r.elapsed.Round(time.Millisecond), float64(r.ok)/r.elapsed.Seconds(), r.byServer)
	for _, h := range []string{"client", "dir", "rs1", "rs2"} {
		t.Logf("%s: TCP counters that grew: %s", h, r.counters[h])
	}
	slices.SortFunc(r.failures, func(a, b loadFailure) int { return int(a.at - b.at) })
	for i, f := range r.failures {
		if i == 20 {
			t.Logf("... %d failures more", len(r.failures)-i)
			break
		}
		t.Logf("failure: connection %d (%s, served by %q) request %d, %v into the load, after %v: %v; client socket: %s",
			f.conn, f.local, f.server, f.request, f.at.Round(time.Millisecond), f.took.Round(time.Millisecond), f.err, f.tcp)
	}
	if r.ok != r.requests {
		t.Errorf("%s: %d of %d requests answered, %d connections failed", what, r.ok, r.requests, len(r.failures))
	}
}

// TestVSNATUnderLoad: the seed example's VS/NAT service under concurrent
// keep-alive clients. Every request must be answered by a real server
// (none lost, none failed), and the split follows the weights 1:2. Then
// the same load while lvsctl applies a change: the kept service's weights,
// a service added, one removed.
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
	res := runLoad(t, n, clients, per, nil)
	res.report(t, fmt.Sprintf("%d keep-alive clients", clients))
	// Connections, not requests, are scheduled: 500 connections at
	// weights 1:2 give rs1 a third of them.
	if c1 := res.byServer["rs1"] / per; c1 < clients/3-3 || c1 > clients/3+3 {
		t.Errorf("rs1 got %d of %d connections, want about a third (wrr 1:2)", c1, clients)
	}

	// The same load during an apply: weights 1:2 become 2:1, a service on
	// port 8080 is added, the FTP service (port 21) leaves.
	want := "-A -t " + seedVIP80 + " -s wrr\n" +
		"-a -t " + seedVIP80 + " -r " + seedRS1 + " -m -w 2\n" +
		"-a -t " + seedVIP80 + " -r " + seedRS2 + " -m -w 1\n" +
		"-A -t " + seedVIP + ":8080 -s rr\n" +
		"-a -t " + seedVIP + ":8080 -r " + seedRS1 + " -m -w 1\n"
	var applied labtest.Result
	var applyStart, applyTook time.Duration
	start := time.Now()
	res = runLoad(t, n, clients, per, func() {
		s := time.Now()
		applyStart = s.Sub(start)
		applied = n.runIn("dir", want, labtest.Ours("lvsctl"), "apply", "--drain-timeout", "1m", "-")
		applyTook = time.Since(s)
	})
	res.report(t, fmt.Sprintf("%d keep-alive clients during lvsctl apply", clients))
	t.Logf("lvsctl apply started %v after the clients began connecting (the load took %v), took %v, status %d:\n%s%s",
		applyStart.Round(time.Millisecond), res.elapsed.Round(time.Millisecond), applyTook.Round(time.Millisecond), applied.Code, applied.Stdout, applied.Stderr)
	if applied.Code != 0 {
		t.Errorf("lvsctl apply during the load: %+v", applied)
	}
	if r := n.runIn("dir", want, labtest.Ours("lvsctl"), "plan", "-"); r.Code != 0 {
		t.Errorf("after the apply the table differs from the file: %+v\n%s", r, n.ipvsadm("dir", "-Sn"))
	}
}
