package e2e

import (
	"testing"
	"time"
)

// The churn tests stay on the real clock: the connections are real.

// churnUntil polls cc's report until cond holds (10 s at most: a bound on
// a hung test).
func churnUntil(t *testing.T, cc *churnClient, cond func(churnReport) bool) churnReport {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := cc.Report()
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("churn after 10 s: %+v", r)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestChurnCountsFailuresByStart: connections to a live server all
// succeed; once it stops they fail, each recorded at its start after the
// mark.
func TestChurnCountsFailuresByStart(t *testing.T) {
	addr, stop := flowServer(t, "rs1")
	cc := startChurn(churnConfig{Addr: addr, Rate: 100, Timeout: time.Second})
	defer cc.Stop()
	r := churnUntil(t, cc, func(r churnReport) bool { return r.Attempts >= 5 })
	if r.Failed != 0 || r.ByServer["rs1"] != r.Attempts {
		t.Fatalf("a live server: %+v", r)
	}
	stop()
	cc.Mark()
	r = churnUntil(t, cc, func(r churnReport) bool { return r.Attempts >= 5 })
	if r.Failed == 0 || r.Failed != r.Attempts || r.Reasons["refused"] != r.Failed || len(r.FailedAtMS) != r.Failed {
		t.Fatalf("a stopped server: %+v", r)
	}
	if last := r.FailedAtMS[len(r.FailedAtMS)-1]; r.FailedAtMS[0] < 0 || last > r.SpanMS {
		t.Errorf("failure times %v outside 0..%d ms", r.FailedAtMS, r.SpanMS)
	}
	// By the second after the mark: the first only, unless the report
	// came later on a loaded host.
	secs := int(r.SpanMS/1000) + 1
	if a, f := r.Window(0, secs); a != r.Attempts || f != r.Failed || len(r.BySecond) > secs {
		t.Errorf("the first %d s: %d attempts, %d failed; by second %v", secs, a, f, r.BySecond)
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
	cc := startChurn(churnConfig{Addr: ln.Addr().String(), Rate: 20, Timeout: 100 * time.Millisecond})
	defer cc.Stop()
	// One started every 50 ms whatever became of the ones before, each
	// ended at its timeout.
	r := churnUntil(t, cc, func(r churnReport) bool { return r.Attempts >= 3 })
	if r.Reasons["timeout"] != r.Attempts {
		t.Fatalf("a silent server: %+v", r)
	}
}
