package health

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func weightPtr(w uint32) *uint32 { return &w }

// TestCheckerDynamicWeight: a pass with a weight sets the target's weight,
// a plain pass clears it (the file's weight: keepalived's
// misc_check_child_thread puts the server back at its configured weight on
// exit status 0), failures keep it while the target stays up and a target
// down has none. A change of weight while up is a change from Up to Up;
// a probe that leaves the weight as it was makes none.
func TestCheckerDynamicWeight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeProbes()
		answers := []error{
			&WeightResult{Weight: 5}, &WeightResult{Weight: 5}, // up at 5
			&WeightResult{Weight: 7}, // up, now 7
			errFail,                  // still up at 7 (fall 2)
			nil,                      // up at the file's weight
			errFail, errFail,         // down
			&WeightResult{Weight: 0}, // up at 0 (rise 1)
		}
		f.set("10.0.0.1:80", func(n int, ctx context.Context) error {
			if n < len(answers) {
				return answers[n]
			}
			return &WeightResult{Weight: 0}
		})
		c := newChecker(f, 0)
		if err := c.Set([]Target{tcpTarget("10.0.0.1:80", Spec{Interval: "1s", Timeout: "500ms", Rise: 1, Fall: 2})}); err != nil {
			t.Fatal(err)
		}
		stop := run(t, c)
		var seen []*uint32
		for i := range len(answers) {
			waitProbes(f, "10.0.0.1:80", i+1)
			seen = append(seen, stateOf(t, c, "10.0.0.1:80").Weight)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		changes := stop()

		wantSeen := []*uint32{weightPtr(5), weightPtr(5), weightPtr(7), weightPtr(7), nil, nil, nil, weightPtr(0)}
		for i := range wantSeen {
			if !sameWeight(seen[i], wantSeen[i]) {
				t.Errorf("after probe %d: weight %v, want %v", i, deref(seen[i]), deref(wantSeen[i]))
			}
		}
		type tr struct {
			old, new State
			weight   *uint32
		}
		want := []tr{{Unknown, Up, weightPtr(5)}, {Up, Up, weightPtr(7)}, {Up, Up, nil}, {Up, Down, nil}, {Down, Up, weightPtr(0)}}
		if len(changes) != len(want) {
			t.Fatalf("changes %+v, want %d", changes, len(want))
		}
		for i, w := range want {
			ch := changes[i]
			if ch.Old != w.old || ch.New != w.new || !sameWeight(ch.Weight, w.weight) {
				t.Errorf("change %d: %s -> %s weight %v, want %s -> %s weight %v", i, ch.Old, ch.New, deref(ch.Weight), w.old, w.new, deref(w.weight))
			}
		}
		if st := stateOf(t, c, "10.0.0.1:80"); st.Result != resultOK {
			t.Errorf("result %q after passes with a weight, want %q", st.Result, resultOK)
		}
	})
}

// TestCheckerRestoresWeight: a state restored Up keeps its weight until
// the next probe; one restored Down has none.
func TestCheckerRestoresWeight(t *testing.T) {
	c := New(Options{})
	up, down := tcpTarget("10.0.0.1:80", Spec{}), tcpTarget("10.0.0.2:80", Spec{})
	c.Restore([]TargetState{{Key: up.Key(), State: Up, Weight: weightPtr(9)}, {Key: down.Key(), State: Down, Weight: weightPtr(9)}})
	if err := c.Set([]Target{up, down}); err != nil {
		t.Fatal(err)
	}
	if s, _ := c.State(up.Key()); s.State != Up || !sameWeight(s.Weight, weightPtr(9)) {
		t.Errorf("restored up: %s weight %v, want up at 9", s.State, deref(s.Weight))
	}
	if s, _ := c.State(down.Key()); s.State != Down || s.Weight != nil {
		t.Errorf("restored down: %s weight %v, want down with none", s.State, deref(s.Weight))
	}
}

var errFail = fail(0, nil)

func deref(w *uint32) any {
	if w == nil {
		return "none"
	}
	return *w
}
