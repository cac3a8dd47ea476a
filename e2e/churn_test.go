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
	cc := StartChurn(ChurnConfig{Addr: addr, Workers: 2, Pause: 5 * time.Millisecond, Timeout: time.Second})
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
	cc := StartChurn(ChurnConfig{Addr: ln.Addr().String(), Workers: 1, Timeout: 100 * time.Millisecond})
	defer cc.Stop()
	time.Sleep(350 * time.Millisecond)
	r := cc.Report()
	if r.Attempts < 2 || r.Reasons["timeout"] != r.Attempts {
		t.Fatalf("a silent server: %+v", r)
	}
}
