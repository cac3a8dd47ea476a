package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The churn client: new connections started at a steady rate, each
// carrying one line to a flow server (serveFlows) and closed, as clients
// that keep arriving whatever happened to the ones before them (a client
// waiting on a failing connection does not hold the next one back). What
// a router's or a director's change does to them is whether a new
// connection opens and is answered in time.

// churnConfig is what the churn client opens.
type churnConfig struct {
	Addr string // VIP:port
	// Rate is how many connections start per second.
	Rate int
	// Timeout bounds opening a connection and the answer to its line: a
	// connection that takes longer failed, as for a client that gives up.
	Timeout time.Duration
}

// churnFailCap bounds churnReport.FailedAtMS.
const churnFailCap = 2000

// churnReport counts the connections started since the last mark that
// have ended (an attempt still under way is counted once it ends).
type churnReport struct {
	Attempts int            `json:"attempts"`
	Failed   int            `json:"failed"`
	Reasons  map[string]int `json:"reasons,omitempty"`
	ByServer map[string]int `json:"by_server"`
	// FailedAtMS are the start times of the failed ones, in milliseconds
	// after the mark, in order (at most churnFailCap).
	FailedAtMS []int64 `json:"failed_at_ms,omitempty"`
	// BySecond counts the attempts and the failures by the second after
	// the mark they started in ([i][0] attempts, [i][1] failures).
	BySecond   [][2]int `json:"by_second,omitempty"`
	FirstError string   `json:"first_error,omitempty"`
	// Skipped counts starts left out for churnMaxInFlight.
	Skipped int `json:"skipped,omitempty"`
	// SpanMS is the time from the mark to the report.
	SpanMS int64 `json:"span_ms"`
}

// churnMaxInFlight bounds the connections under way: past it a start is
// skipped, and counted (Skipped), rather than let the client grow
// without end when nothing answers.
const churnMaxInFlight = 2000

// churnClient starts the connections; one mutex guards the tally.
type churnClient struct {
	cfg  churnConfig
	mu   sync.Mutex
	mark time.Time
	rep  churnReport
	stop chan struct{}
	wg   sync.WaitGroup
}

// startChurn starts the connections; they go on until Stop.
func startChurn(cfg churnConfig) *churnClient {
	cc := &churnClient{cfg: cfg, stop: make(chan struct{})}
	cc.Mark()
	cc.wg.Add(1)
	go func() {
		defer cc.wg.Done()
		inFlight := make(chan struct{}, churnMaxInFlight)
		tick := time.NewTicker(time.Second / time.Duration(cfg.Rate))
		defer tick.Stop()
		for {
			select {
			case <-cc.stop:
				return
			case <-tick.C:
			}
			select {
			case inFlight <- struct{}{}:
			default:
				cc.mu.Lock()
				cc.rep.Skipped++
				cc.mu.Unlock()
				continue
			}
			cc.wg.Add(1)
			go func() {
				defer cc.wg.Done()
				defer func() { <-inFlight }()
				cc.one()
			}()
		}
	}()
	return cc
}

// one opens a connection, sends a line, reads the answer and closes.
func (cc *churnClient) one() {
	start := time.Now()
	var server string
	c, err := dialFrom(cc.cfg.Addr, 0, cc.cfg.Timeout)
	if err == nil {
		c.SetDeadline(start.Add(cc.cfg.Timeout))
		server, _, err = exchange(c, bufio.NewReader(c), 1, nil)
		closeReset(c)
	}
	select {
	case <-cc.stop:
		return // cut short by Stop: counts for nothing
	default:
	}
	cc.record(start, server, err)
}

// record adds one ended attempt to the tally when it started after the
// mark.
func (cc *churnClient) record(start time.Time, server string, err error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if start.Before(cc.mark) {
		return
	}
	r := &cc.rep
	r.Attempts++
	sec := int(start.Sub(cc.mark) / time.Second)
	for len(r.BySecond) <= sec {
		r.BySecond = append(r.BySecond, [2]int{})
	}
	r.BySecond[sec][0]++
	if err == nil {
		r.ByServer[server]++
		return
	}
	r.Failed++
	r.BySecond[sec][1]++
	r.Reasons[errorReason(err)]++
	if r.FirstError == "" {
		r.FirstError = err.Error()
	}
	if len(r.FailedAtMS) < churnFailCap {
		at := start.Sub(cc.mark).Milliseconds()
		i, _ := slices.BinarySearch(r.FailedAtMS, at)
		r.FailedAtMS = slices.Insert(r.FailedAtMS, i, at)
	}
}

// Window counts the attempts and failures that started from from to to
// after the mark, in whole seconds.
func (r churnReport) Window(from, to int) (attempts, failed int) {
	for i := from; i < to && i < len(r.BySecond); i++ {
		attempts += r.BySecond[i][0]
		failed += r.BySecond[i][1]
	}
	return attempts, failed
}

// Mark starts a new tally now.
func (cc *churnClient) Mark() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.mark = time.Now()
	cc.rep = churnReport{Reasons: map[string]int{}, ByServer: map[string]int{}}
}

// Report is the tally since the mark.
func (cc *churnClient) Report() churnReport {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	r := cc.rep
	r.Reasons, r.ByServer = maps.Clone(r.Reasons), maps.Clone(r.ByServer)
	r.FailedAtMS = slices.Clone(r.FailedAtMS)
	r.BySecond = slices.Clone(r.BySecond)
	r.SpanMS = time.Since(cc.mark).Milliseconds()
	return r
}

// Stop ends the workers and waits for them.
func (cc *churnClient) Stop() {
	close(cc.stop)
	cc.wg.Wait()
}

// churnLoop serves the churn role: it starts the workers, prints
// {"ready":true}, then answers "mark" with {"marked":true}, "report" with
// a churnReport, and ends on "quit" or end of input.
func churnLoop(cfg churnConfig, in *bufio.Scanner, out *json.Encoder) error {
	cc := startChurn(cfg)
	defer cc.Stop()
	if err := out.Encode(map[string]bool{"ready": true}); err != nil {
		return err
	}
	for in.Scan() {
		var err error
		switch strings.TrimSpace(in.Text()) {
		case "mark":
			cc.Mark()
			err = out.Encode(map[string]bool{"marked": true})
		case "report":
			err = out.Encode(cc.Report())
		case "quit":
			return nil
		default:
			return errors.New("churn: commands are mark, report and quit")
		}
		if err != nil {
			return err
		}
	}
	return in.Err()
}

// churnConfigFromArgs reads the churn role's arguments: ADDR RATE
// TIMEOUT (a duration as Go writes it).
func churnConfigFromArgs(args []string) (churnConfig, error) {
	if len(args) != 3 {
		return churnConfig{}, fmt.Errorf("churn: want ADDR RATE TIMEOUT, got %q", args)
	}
	cfg := churnConfig{Addr: args[0]}
	var err1, err2 error
	cfg.Rate, err1 = strconv.Atoi(args[1])
	cfg.Timeout, err2 = time.ParseDuration(args[2])
	if err := errors.Join(err1, err2); err != nil {
		return cfg, err
	}
	if cfg.Rate < 1 || cfg.Rate > 1000 || cfg.Timeout <= 0 {
		return cfg, fmt.Errorf("churn: bad arguments %q", args)
	}
	return cfg, nil
}
