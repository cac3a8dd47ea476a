package e2e

import (
	"testing"
	"time"
)

// TestChurnCountsFailuresByStart: connections to a live server all
// succeed; once it stops they fail, each recorded at its start after the
// mark.
func TestChurnCountsFailuresByStart(t *testing.T) {
	addr, stop := flowServer(t, "rs1")
	cc := StartChurn(ChurnConfig{Addr: addr, Rate: 100, Timeout: time.Second})
	defer cc.Stop()
	time.Sleep(200 * time.Millisecond)
	r := cc.Report()
	if r.Attempts < 5 || r.Failed != 0 || r.ByServer["rs1"] != r.Attempts {
		t.Fatalf("a live server: %+v", r)
	}
	stop()
	cc.Mark()
	time.Sleep(200 * time.Millisecond)
	r = cc.Report()
	if r.Failed == 0 || r.Failed != r.Attempts || r.Reasons["refused"] != r.Failed || len(r.FailedAtMS) != r.Failed {
		t.Fatalf("a stopped server: %+v", r)
	}
	if last := r.FailedAtMS[len(r.FailedAtMS)-1]; r.FailedAtMS[0] < 0 || last > r.SpanMS {
		t.Errorf("failure times %v outside 0..%d ms", r.FailedAtMS, r.SpanMS)
	}
	if a, f := r.Window(0, 1); a != r.Attempts || f != r.Failed || len(r.BySecond) != 1 {
		t.Errorf("the first second: %d attempts, %d failed; by second %v", a, f, r.BySecond)
	}
}

// TestChurnTimeout: a server that accepts but never answers fails each
// connection after the timeout.
func TestChurnTimeout(t *testing.T) {
	ln := listen(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	cc := StartChurn(ChurnConfig{Addr: ln.Addr().String(), Rate: 20, Timeout: 100 * time.Millisecond})
	defer cc.Stop()
	time.Sleep(350 * time.Millisecond)
	r := cc.Report()
	// One started every 50 ms whatever became of the ones before: about
	// 7, of which those older than 100 ms have ended.
	if r.Attempts < 3 || r.Reasons["timeout"] != r.Attempts {
		t.Fatalf("a silent server: %+v", r)
	}
}
