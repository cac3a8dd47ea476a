package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The long-lived flow traffic of the ECMP tests: a line echo server on each
// real server that answers with its name, a client holding many TCP
// connections that each send a line every few hundred milliseconds and
// notice the first one that goes unanswered, and a probe that asks, for a
// fixed set of source ports, which real server a new connection reaches.
//
// Every client connection starts from a fixed source port (base+i), so the
// same flows (same 4-tuples) can be sent through different directors or
// rule sets and compared flow by flow.

// serveFlows answers every line a client sends with "NAME LINE" until ctx
// ends: the client learns which real server holds its connection.
func serveFlows(ctx context.Context, name string, ln net.Listener) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	go func() {
		<-ctx.Done()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	defer wg.Wait()
	return acceptLoop(ctx, ln, func(c net.Conn) {
		mu.Lock()
		conns[c] = true
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { mu.Lock(); delete(conns, c); mu.Unlock(); c.Close() }()
			// One buffer per connection, no formatting: the lab runs
			// thousands of lines a second on one emulated CPU.
			br := bufio.NewReader(c)
			out := append([]byte(name), ' ')
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					return
				}
				out = append(out[:len(name)+1], line...)
				if _, err := c.Write(out); err != nil {
					return
				}
			}
		}()
	})
}

// flowConfig is what the flow client holds open.
type flowConfig struct {
	Addr     string        // VIP:port
	N        int           // connections
	BasePort int           // the first connection of slot i starts from BasePort+i
	Interval time.Duration // mean time between two lines on one connection
	// Lifetime, when not zero, ends each connection after a random time
	// between half and one and a half of it (the session is over); the
	// slot opens a new one at once, from a port the kernel picks.
	Lifetime time.Duration
	// OpenTimeout bounds opening a connection and its first answer. Once
	// open, a line waits for its answer as long as it takes: a stall that
	// recovers is not a break (the report shows it as Pending meanwhile,
	// and MaxGapMS), only a reset or a closed connection is.
	OpenTimeout time.Duration
}

// flowReport is the state of the client's connections since the last mark.
type flowReport struct {
	Slots int `json:"slots"`
	// AtMark counts the connections open when mark came; Broken those of
	// them that failed after it (reset, end of stream), by reason.
	AtMark  int            `json:"at_mark"`
	Broken  int            `json:"broken"`
	Reasons map[string]int `json:"reasons,omitempty"`
	// Ended counts the connections of AtMark closed by their lifetime.
	Ended int `json:"ended"`
	// Opened counts connections opened after mark, OpenFailed the
	// attempts that failed.
	Opened     int `json:"opened"`
	OpenFailed int `json:"open_failed"`
	// OpenErrors counts, by reason, the attempts to open a connection
	// that failed since the client started (the first ones included).
	OpenErrors map[string]int `json:"open_errors,omitempty"`
	// FirstOpenError is the first of them, with its source port.
	FirstOpenError string `json:"first_open_error,omitempty"`
	// Pending counts connections of AtMark, still open and unbroken, that
	// have not had a line answered since mark: they are not flowing yet.
	Pending int `json:"pending"`
	// RecoveryMS is the time from mark (or the later Clock) until every
	// connection of AtMark still open had a line sent after it answered;
	// MaxGapMS the longest time any of them waited between two answers
	// across mark.
	RecoveryMS int64 `json:"recovery_ms"`
	MaxGapMS   int64 `json:"max_gap_ms"`
	// ByServer counts the connections open now per real server;
	// BrokenByServer the broken ones per the real server they had.
	ByServer       map[string]int `json:"by_server"`
	BrokenByServer map[string]int `json:"broken_by_server,omitempty"`
	// BrokenPorts are the client's source ports of the broken ones.
	BrokenPorts []int  `json:"broken_ports,omitempty"`
	FirstError  string `json:"first_error,omitempty"`
}

// flowConn is one open connection of a slot.
type flowConn struct {
	server    string
	port      int // the client's source port
	opened    time.Time
	lastReply time.Time
	// after mark: whether it was open at mark, its first answer to a line
	// sent after mark, the longest wait between two answers
	atMark     bool
	recovered  time.Time
	maxGap     time.Duration
	brokenWhy  string
	endedByAge bool
}

// flowClient holds the slots' connections; one mutex guards all state
// (the goroutines touch it once per line, which is cheap next to the I/O).
type flowClient struct {
	cfg  flowConfig
	mu   sync.Mutex
	mark time.Time
	// clock is when recovery is counted from: mark, or later (Clock).
	clock time.Time
	conns [][]*flowConn // per slot, every connection it had since mark (the last is current)
	rep   flowReport
	live  map[net.Conn]bool
	// openErrors counts failed opens by reason, since the start.
	openErrors     map[string]int
	firstOpenError string
	stop           chan struct{}
	wg             sync.WaitGroup
}

// errorReason names a connection failure for the report.
func errorReason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.EPIPE):
		return "broken pipe"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.EADDRINUSE), errors.Is(err, syscall.EADDRNOTAVAIL):
		return "address in use"
	}
	return "other"
}

// dialFrom opens a TCP connection from port (0: the kernel picks).
func dialFrom(addr string, port int, timeout time.Duration) (*net.TCPConn, error) {
	d := net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{Port: port},
		Control: func(network, address string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
			})
			if err != nil {
				return err
			}
			return serr
		}}
	c, err := d.Dial("tcp4", addr)
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// closeReset closes with a reset instead of a FIN: the port is free again
// at once (no TIME_WAIT), so the same flow can be opened again.
func closeReset(c *net.TCPConn) {
	c.SetLinger(0)
	c.Close()
}

// exchange sends one numbered line and reads the answer: the server's
// name. buf is the caller's, reused from line to line.
func exchange(c net.Conn, br *bufio.Reader, seq int, buf []byte) (string, []byte, error) {
	buf = append(strconv.AppendInt(buf[:0], int64(seq), 10), '\n')
	if _, err := c.Write(buf); err != nil {
		return "", buf, err
	}
	line, err := br.ReadSlice('\n')
	if err != nil {
		return "", buf, err
	}
	name, n, ok := bytes.Cut(bytes.TrimSpace(line), []byte{' '})
	if !ok || !bytes.Equal(n, buf[:len(buf)-1]) {
		return "", buf, fmt.Errorf("answer %q to line %d", line, seq)
	}
	return string(name), buf, nil
}

// startFlows opens cfg.N connections and keeps them sending until Stop.
// It returns once every connection has had its first line answered, or
// with an error naming how many could not be opened.
func startFlows(cfg flowConfig) (*flowClient, error) {
	fc := &flowClient{cfg: cfg, conns: make([][]*flowConn, cfg.N), live: map[net.Conn]bool{}, stop: make(chan struct{}), openErrors: map[string]int{}}
	fc.resetLocked(time.Now())
	ready := make(chan error, cfg.N)
	sem := make(chan struct{}, 32) // dials in flight
	for i := range cfg.N {
		fc.wg.Add(1)
		go func() {
			defer fc.wg.Done()
			fc.slot(i, sem, ready)
		}()
	}
	var failed []error
	for range cfg.N {
		if err := <-ready; err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		fc.Stop()
		return nil, fmt.Errorf("%d of %d connections to %s failed to open, first: %w", len(failed), cfg.N, cfg.Addr, failed[0])
	}
	return fc, nil
}

// slot runs one slot: its first connection from BasePort+i, then the
// ones that replace a broken or ended one.
func (fc *flowClient) slot(i int, sem chan struct{}, ready chan<- error) {
	port := fc.cfg.BasePort + i
	first, tries := true, 0
	for {
		sem <- struct{}{}
		c, err := dialFrom(fc.cfg.Addr, port, fc.cfg.OpenTimeout)
		var br *bufio.Reader
		var server string
		if err == nil {
			br = bufio.NewReader(c)
			c.SetDeadline(time.Now().Add(fc.cfg.OpenTimeout))
			server, _, err = exchange(c, br, 0, nil)
			if err == nil {
				err = c.SetDeadline(time.Time{})
			}
			if err != nil {
				closeReset(c)
			}
		}
		<-sem
		if err != nil {
			fc.mu.Lock()
			fc.openErrors[errorReason(err)]++
			if fc.firstOpenError == "" {
				fc.firstOpenError = fmt.Sprintf("port %d: %v", port, err)
			}
			if !first {
				fc.rep.OpenFailed++
			}
			fc.mu.Unlock()
			// A first connection is tried twice more, from ports the kernel
			// picks; a slot that cannot open at all fails the start.
			if first {
				if tries++; tries > 2 {
					ready <- err
					return
				}
			}
			if !fc.sleep(200 * time.Millisecond) {
				if first {
					ready <- err
				}
				return
			}
			port = 0
			continue
		}
		fc.mu.Lock()
		now := time.Now()
		fcn := &flowConn{server: server, port: c.LocalAddr().(*net.TCPAddr).Port, opened: now, lastReply: now}
		if !fc.mark.IsZero() && now.After(fc.mark) {
			fc.rep.Opened++
		}
		fc.conns[i] = append(fc.conns[i], fcn)
		fc.live[c] = true
		fc.mu.Unlock()
		if first {
			// Only now: a mark that follows startFlows must see it.
			ready <- nil
			first = false
		}
		fc.run(c, br, fcn)
		fc.mu.Lock()
		delete(fc.live, c)
		fc.mu.Unlock()
		closeReset(c)
		port = 0
		select {
		case <-fc.stop:
			return
		default:
		}
	}
}

// sleep waits d, or less when the client stops; false when it stopped.
func (fc *flowClient) sleep(d time.Duration) bool {
	select {
	case <-fc.stop:
		return false
	case <-time.After(d):
		return true
	}
}

// run sends a line every Interval (randomised by ±50 %, so the
// connections do not beat in step) until the connection fails, its
// lifetime ends or the client stops. A line waits for its answer without
// a deadline: only a reset or a closed connection breaks it.
func (fc *flowClient) run(c *net.TCPConn, br *bufio.Reader, f *flowConn) {
	var end time.Time
	if fc.cfg.Lifetime > 0 {
		end = f.opened.Add(fc.cfg.Lifetime/2 + rand.N(fc.cfg.Lifetime))
	}
	timer := time.NewTimer(fc.cfg.Interval/2 + rand.N(fc.cfg.Interval))
	defer timer.Stop()
	var buf []byte
	for seq := 1; ; seq++ {
		select {
		case <-fc.stop:
			return
		case <-timer.C:
		}
		if !end.IsZero() && time.Now().After(end) {
			fc.mu.Lock()
			f.endedByAge = true
			fc.mu.Unlock()
			return
		}
		sent := time.Now()
		var name string
		var err error
		name, buf, err = exchange(c, br, seq, buf)
		now := time.Now()
		fc.mu.Lock()
		if err == nil && name != f.server {
			err = fmt.Errorf("answered by %s, was %s", name, f.server)
		}
		if err != nil {
			select {
			case <-fc.stop:
			default:
				f.brokenWhy = errorReason(err)
				if fc.rep.FirstError == "" {
					fc.rep.FirstError = f.server + ": " + err.Error()
				}
			}
			fc.mu.Unlock()
			return
		}
		if gap := now.Sub(f.lastReply); gap > f.maxGap && f.atMark {
			f.maxGap = gap
		}
		f.lastReply = now
		if f.recovered.IsZero() && !fc.clock.IsZero() && sent.After(fc.clock) {
			f.recovered = now
		}
		fc.mu.Unlock()
		timer.Reset(fc.cfg.Interval/2 + rand.N(fc.cfg.Interval))
	}
}

// resetLocked starts a new observation at t: the connections open now are
// the ones the next report is about.
func (fc *flowClient) resetLocked(t time.Time) {
	fc.rep = flowReport{Slots: fc.cfg.N}
	for i, cs := range fc.conns {
		if len(cs) == 0 {
			continue
		}
		cur := cs[len(cs)-1]
		fc.conns[i] = []*flowConn{cur}
		open := cur.brokenWhy == "" && !cur.endedByAge
		cur.atMark = open
		cur.recovered, cur.maxGap = time.Time{}, 0
		if open {
			fc.rep.AtMark++
		}
	}
}

// Mark starts a new observation now.
func (fc *flowClient) Mark() {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.mark = time.Now()
	fc.clock = fc.mark
	fc.resetLocked(fc.mark)
}

// Clock restarts the recovery clock now, keeping the observation since
// mark: breaks still count from mark, while RecoveryMS and Pending are
// about lines sent from now on (when the event that counts happens some
// time after mark).
func (fc *flowClient) Clock() {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.clock = time.Now()
	for _, cs := range fc.conns {
		for _, f := range cs {
			f.recovered = time.Time{}
		}
	}
}

// Report sums up the connections since the last mark.
func (fc *flowClient) Report() flowReport {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	now := time.Now()
	r := fc.rep
	r.Reasons, r.ByServer, r.BrokenByServer = map[string]int{}, map[string]int{}, map[string]int{}
	r.OpenErrors, r.FirstOpenError = maps.Clone(fc.openErrors), fc.firstOpenError
	r.Broken, r.Ended, r.Pending, r.RecoveryMS, r.MaxGapMS = 0, 0, 0, 0, 0
	for _, cs := range fc.conns {
		for k, f := range cs {
			if k == len(cs)-1 && f.brokenWhy == "" && !f.endedByAge {
				r.ByServer[f.server]++
			}
			if !f.atMark {
				continue
			}
			switch {
			case f.brokenWhy != "":
				r.Broken++
				r.Reasons[f.brokenWhy]++
				r.BrokenByServer[f.server]++
				r.BrokenPorts = append(r.BrokenPorts, f.port)
			case f.endedByAge:
				r.Ended++
			case f.recovered.IsZero():
				r.Pending++
				if gap := now.Sub(f.lastReply); gap > f.maxGap {
					f.maxGap = gap
				}
			default:
				if d := f.recovered.Sub(fc.clock).Milliseconds(); d > r.RecoveryMS {
					r.RecoveryMS = d
				}
			}
			if g := f.maxGap.Milliseconds(); g > r.MaxGapMS {
				r.MaxGapMS = g
			}
		}
	}
	return r
}

// Stop ends every connection with a reset (their ports are free again at
// once) and waits for the slots.
func (fc *flowClient) Stop() {
	close(fc.stop)
	fc.mu.Lock()
	for c := range fc.live {
		c.(*net.TCPConn).SetLinger(0)
		c.SetDeadline(time.Now())
	}
	fc.mu.Unlock()
	fc.wg.Wait()
}

// flowsLoop serves the flows role: it opens the connections, prints
// {"ready":N,"by_server":{...}}, then answers "mark" with {"marked":true},
// "clock" with {"clock":true},
// "report" with a flowReport, and ends on "quit" or end of input.
func flowsLoop(cfg flowConfig, in *bufio.Scanner, out *json.Encoder) error {
	fc, err := startFlows(cfg)
	if err != nil {
		return err
	}
	defer fc.Stop()
	r := fc.Report()
	if err := out.Encode(map[string]any{"ready": cfg.N, "by_server": r.ByServer, "open_errors": r.OpenErrors, "first_open_error": r.FirstOpenError}); err != nil {
		return err
	}
	for in.Scan() {
		switch strings.TrimSpace(in.Text()) {
		case "mark":
			fc.Mark()
			err = out.Encode(map[string]bool{"marked": true})
		case "clock":
			fc.Clock()
			err = out.Encode(map[string]bool{"clock": true})
		case "report":
			err = out.Encode(fc.Report())
		case "quit":
			return nil
		default:
			return errors.New("flows: commands are mark, clock, report and quit")
		}
		if err != nil {
			return err
		}
	}
	return in.Err()
}

// probeResult says which real server each flow reached: Servers[i] for the
// connection from BasePort+i ("" when it failed).
type probeResult struct {
	Servers  []string       `json:"servers"`
	ByServer map[string]int `json:"by_server"`
	Failed   int            `json:"failed"`
	First    string         `json:"first_error,omitempty"`
}

// probeFlows opens n connections to addr, from ports base..base+n-1, each for
// one line, and closes them with a reset so the same flows can be probed
// again at once.
func probeFlows(addr string, n, base int, timeout time.Duration) probeResult {
	return probeEach(n, base, func(port int) (string, error) {
		c, err := dialFrom(addr, port, timeout)
		if err != nil {
			return "", err
		}
		defer closeReset(c)
		c.SetDeadline(time.Now().Add(timeout))
		server, _, err := exchange(c, bufio.NewReader(c), 0, nil)
		return server, err
	})
}

// probeEach runs one(port) for the n ports from base, 32 at a time, and
// sums up which real server answered each flow.
func probeEach(n, base int, one func(port int) (string, error)) probeResult {
	res := probeResult{Servers: make([]string, n), ByServer: map[string]int{}}
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res.Servers[i], errs[i] = one(base + i)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			res.Servers[i] = ""
			res.Failed++
			if res.First == "" {
				res.First = fmt.Sprintf("port %d: %v", base+i, err)
			}
			continue
		}
		res.ByServer[res.Servers[i]]++
	}
	return res
}

// movedFlows counts the flows two probes of the same ports answered from
// different real servers (flows that failed in either are not counted)
// and the flows both answered.
func movedFlows(a, b probeResult) (moved, both int) {
	for i := range min(len(a.Servers), len(b.Servers)) {
		if a.Servers[i] == "" || b.Servers[i] == "" {
			continue
		}
		both++
		if a.Servers[i] != b.Servers[i] {
			moved++
		}
	}
	return moved, both
}

// moduloMoved is the control for movedFlows: the share of the same flows (one
// client address, ports base..base+n-1) that a plain hash-modulo-servers
// scheduler sends elsewhere when the servers go from `from` to `to`.
func moduloMoved(client string, n, base, from, to int) int {
	moved := 0
	for i := range n {
		h := fnv1a(client + ":" + strconv.Itoa(base+i))
		if h%uint32(from) != h%uint32(to) {
			moved++
		}
	}
	return moved
}

func fnv1a(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// sortedCounts prints a count map in a stable order: "a=1 b=2".
func sortedCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, m[k])
	}
	return b.String()
}

// flowsConfigFromArgs reads the flows role's arguments: ADDR N BASEPORT
// INTERVAL LIFETIME OPENTIMEOUT (durations as Go writes them).
func flowsConfigFromArgs(args []string) (flowConfig, error) {
	if len(args) != 6 {
		return flowConfig{}, fmt.Errorf("flows: want ADDR N BASEPORT INTERVAL LIFETIME OPENTIMEOUT, got %q", args)
	}
	cfg := flowConfig{Addr: args[0]}
	var err error
	if cfg.N, err = strconv.Atoi(args[1]); err != nil {
		return cfg, err
	}
	if cfg.BasePort, err = strconv.Atoi(args[2]); err != nil {
		return cfg, err
	}
	for i, d := range []*time.Duration{&cfg.Interval, &cfg.Lifetime, &cfg.OpenTimeout} {
		if *d, err = time.ParseDuration(args[3+i]); err != nil {
			return cfg, err
		}
	}
	if cfg.N < 1 || cfg.BasePort < 1 || cfg.BasePort+cfg.N > 65536 || cfg.Interval <= 0 || cfg.OpenTimeout <= 0 || cfg.Lifetime < 0 {
		return cfg, fmt.Errorf("flows: bad arguments %q", args)
	}
	return cfg, nil
}
