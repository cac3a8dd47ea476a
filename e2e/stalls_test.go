package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// fakeClock is a clock whose sleeps take what the test says.
type fakeClock struct {
	t     time.Time
	extra map[int]time.Duration // by sleep number: added to the sleep
	n     int
	stop  chan struct{}
	after int // closes stop after this many sleeps
}

func (c *fakeClock) now() time.Time { return c.t }

func (c *fakeClock) sleep(d time.Duration) {
	c.t = c.t.Add(d + c.extra[c.n])
	c.n++
	if c.n == c.after {
		close(c.stop)
	}
}

// TestStallWatchNotesLateWakeUps: a wake-up stallMin late or more is a
// stall, from when it was due for as long as it was late; one just under
// is not.
func TestStallWatchNotesLateWakeUps(t *testing.T) {
	start := time.UnixMilli(1_000_000)
	c := &fakeClock{t: start, stop: make(chan struct{}), after: 10, extra: map[int]time.Duration{
		2: stallMin - time.Millisecond,
		5: 3 * time.Second,
	}}
	w := &stallWatch{}
	w.run(c.stop, c.sleep, c.now)
	r := w.report()
	if len(r.Stalls) != 1 {
		t.Fatalf("stalls %+v, want one", r.Stalls)
	}
	// Sleeps 0-4 took 5 ticks and a bit under stallMin; the sixth was
	// due a tick later.
	due := start.Add(6*stallTick + stallMin - time.Millisecond)
	if s := r.Stalls[0]; s.AtMS != due.UnixMilli() || s.MS != 3000 {
		t.Errorf("stall %+v, want at %d for 3000 ms", s, due.UnixMilli())
	}
}

// TestStallWatchCap: past stallCap the stalls are counted, not kept.
func TestStallWatchCap(t *testing.T) {
	w := &stallWatch{}
	for i := range stallCap + 3 {
		w.note(stall{AtMS: int64(i), MS: 300})
	}
	if r := w.report(); len(r.Stalls) != stallCap || r.Dropped != 3 {
		t.Errorf("kept %d, dropped %d; want %d and 3", len(r.Stalls), r.Dropped, stallCap)
	}
}

// TestStalledFor: only the parts of stalls inside the span count.
func TestStalledFor(t *testing.T) {
	base := time.UnixMilli(5_000_000)
	r := stallReport{Stalls: []stall{
		{AtMS: base.UnixMilli() - 500, MS: 1000}, // 500 ms inside
		{AtMS: base.UnixMilli() + 1000, MS: 250}, // all inside
		{AtMS: base.UnixMilli() + 2900, MS: 400}, // 100 ms inside
		{AtMS: base.UnixMilli() + 4000, MS: 900}, // after
	}}
	if got := r.stalledFor(base, base.Add(3*time.Second)); got != 850*time.Millisecond {
		t.Errorf("stalled for %v in the span, want 850ms", got)
	}
	if got := r.overlapping(base.Add(3*time.Second), base.Add(time.Hour)); len(got) != 2 || got[0].MS != 400 {
		t.Errorf("from the span's end on: %+v, want the last two", got)
	}
}

// TestStallLoop: the role answers report with what it saw and ends on
// quit. (It runs in the test's process, so not at real-time priority.)
func TestStallLoop(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- stallLoop(false, bufio.NewScanner(inR), json.NewEncoder(outW)) }()
	dec := json.NewDecoder(outR)
	var ready map[string]bool
	if err := dec.Decode(&ready); err != nil || !ready["ready"] {
		t.Fatalf("ready line: %v %v", ready, err)
	}
	io.WriteString(inW, "report\n")
	var r stallReport
	if err := dec.Decode(&r); err != nil {
		t.Fatal(err)
	}
	if r.RealTime || ready["real_time"] {
		t.Errorf("real time: report %v, ready line %v; want false", r.RealTime, ready["real_time"])
	}
	io.WriteString(inW, "bogus\n")
	if err := <-done; err == nil || !strings.Contains(err.Error(), "commands are") {
		t.Errorf("an unknown command: %v", err)
	}
}

// TestStallWatchSeconds: a second's load is the counters' difference
// over it, the share of busy CPU time and of softirq in percent.
func TestStallWatchSeconds(t *testing.T) {
	start := time.UnixMilli(2_000_000)
	c := &fakeClock{t: start, stop: make(chan struct{}), after: 350}
	reads := 0
	w := &stallWatch{counters: func() (vmCounters, error) {
		reads++
		// Each second: 100 ticks, 75 busy of which 25 in softirq.
		n := uint64(reads)
		return vmCounters{cpu: []uint64{50 * n, 0, 0, 25 * n, 0, 0, 25 * n, 0}, running: reads, drops: 3 * n}, nil
	}}
	w.run(c.stop, c.sleep, c.now)
	r := w.report()
	// 350 ticks of 10 ms: counters read at 0 s (first), 1, 2 and 3 s.
	if len(r.Seconds) != 3 {
		t.Fatalf("seconds %+v, want 3", r.Seconds)
	}
	v := r.Seconds[1]
	if v.Busy != 75 || v.Softirq != 25 || v.Running != 3 || v.Drops != 3 {
		t.Errorf("second %+v, want busy 75, softirq 25, running 3, drops 3", v)
	}
	if got := r.load(time.UnixMilli(r.Seconds[1].AtMS), time.UnixMilli(r.Seconds[2].AtMS)); len(got) != 2 {
		t.Errorf("load over the last two seconds: %+v", got)
	}
}

// TestReadVMCounters reads this machine's counters: a cpu line of at
// least eight numbers and at least one task running (this one).
func TestReadVMCounters(t *testing.T) {
	c, err := readVMCounters()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.cpu) < 8 || c.running < 1 {
		t.Errorf("counters %+v", c)
	}
}

// TestStallSummary: the count, the total and the longest.
func TestStallSummary(t *testing.T) {
	r := stallReport{Stalls: []stall{{AtMS: 0, MS: 300}, {AtMS: 5000, MS: 3200}}, Dropped: 1,
		Seconds: []vmSecond{{Busy: 100}, {Busy: 40}}}
	want := "the VM stood still 3 times for 200ms or more (3.5 s in all, the longest at " + time.UnixMilli(5000).Format("15:04:05.000") +
		" for 3.20 s), its CPU 95% busy or more in 1 of 2 seconds"
	if got := r.summary(); got != want {
		t.Errorf("summary\n%s\nwant\n%s", got, want)
	}
}
