package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The stall watch: when the whole VM stopped running. The lab's VM has one
// emulated CPU, a thread of QEMU on the host; while the host keeps that
// thread off its CPUs, everything in the guest stops at once, and the
// guest's clock jumps ahead when it runs again. A connection under way
// across such a stall misses its deadline whatever the directors did.
//
// The watch is a process at real-time priority that sleeps stallTick at a
// time. In the guest only the kernel's non-preemptible work runs ahead of
// it, so a wake-up stallMin late or more is the VM not running (or the
// guest's kernel not letting anything run) for that long.
const (
	stallTick = 10 * time.Millisecond
	// stallMin: a busy VM that still runs wakes the watch sooner, and the
	// timeouts the tests measure are a second and more
	// (docs/decisions/0018-lab-host-starvation.md).
	stallMin = 200 * time.Millisecond
	// stallCap bounds the stalls kept; the rest are counted.
	stallCap = 1000
	// vmSecondsKept bounds the seconds of the VM's load kept (the last
	// ones): longer than any test that reads them.
	vmSecondsKept = 1800
	// stallPriority: above every ordinary process and the threaded
	// interrupt handlers (50); the watch sleeps nearly all the time.
	stallPriority = 80
)

// stall is one: when it started (Unix milliseconds, the guest's clock)
// and how long it lasted.
type stall struct {
	AtMS int64 `json:"at_unix_ms"`
	MS   int64 `json:"ms"`
}

func (s stall) String() string {
	return fmt.Sprintf("%s for %.2f s", time.UnixMilli(s.AtMS).Format("15:04:05.000"), float64(s.MS)/1000)
}

// vmSecond is the VM's load over one second of the watch: the share of
// its CPU busy and, of that, in softirq (the packets), the tasks that
// wanted to run at its end, and the packets its input backlog dropped.
type vmSecond struct {
	AtMS    int64  `json:"at_unix_ms"`
	Busy    int    `json:"busy_pct"`
	Softirq int    `json:"softirq_pct"`
	Running int    `json:"running"`
	Drops   uint64 `json:"drops"`
}

func (v vmSecond) String() string {
	return fmt.Sprintf("%s busy %d%% (softirq %d%%), %d running, %d dropped",
		time.UnixMilli(v.AtMS).Format("15:04:05"), v.Busy, v.Softirq, v.Running, v.Drops)
}

// vmCounters are the VM's counters the seconds are made of.
type vmCounters struct {
	cpu     []uint64 // /proc/stat's cpu line: user nice system idle iowait irq softirq ...
	running int
	drops   uint64
}

// second is the load between two readings a and b taken at at.
func (a vmCounters) second(b vmCounters, at time.Time) vmSecond {
	var total, idle, soft uint64
	for i := range min(len(a.cpu), len(b.cpu), 8) {
		d := b.cpu[i] - a.cpu[i]
		total += d
		switch i {
		case 3, 4:
			idle += d
		case 6:
			soft += d
		}
	}
	v := vmSecond{AtMS: at.UnixMilli(), Running: b.running, Drops: b.drops - a.drops}
	if total > 0 {
		v.Busy = int(100 * (total - idle) / total)
		v.Softirq = int(100 * soft / total)
	}
	return v
}

// readVMCounters reads the counters from /proc.
func readVMCounters() (vmCounters, error) {
	var c vmCounters
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return c, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 1 && f[0] == "cpu":
			for _, x := range f[1:] {
				n, _ := strconv.ParseUint(x, 10, 64)
				c.cpu = append(c.cpu, n)
			}
		case len(f) == 2 && f[0] == "procs_running":
			c.running, _ = strconv.Atoi(f[1])
		}
	}
	c.drops, err = readSoftnetDrops()
	return c, err
}

// readSoftnetDrops is the packets the VM's CPUs dropped because their
// input backlog was full (the second column of /proc/net/softnet_stat,
// in hex).
func readSoftnetDrops() (uint64, error) {
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			x, _ := strconv.ParseUint(f[1], 16, 64)
			n += x
		}
	}
	return n, nil
}

// stallReport is what the watch saw since its start.
type stallReport struct {
	Stalls  []stall `json:"stalls"`
	Dropped int     `json:"dropped,omitempty"`
	// Seconds are the VM's load, second by second (the last
	// vmSecondsKept), to tell a stall from a VM merely too busy.
	Seconds []vmSecond `json:"seconds,omitempty"`
	// RealTime is whether the watch runs at real-time priority: without
	// it, a late wake-up may be the guest's own load, not a stall.
	RealTime bool `json:"real_time"`
}

// stallWatch keeps the stalls and the seconds; one mutex guards them.
type stallWatch struct {
	// counters reads the VM's counters each second (nil: no seconds).
	counters func() (vmCounters, error)
	mu       sync.Mutex
	rep      stallReport
}

// run sleeps tick after tick until stop is closed, notes each wake-up
// stallMin late or more, and the VM's load each second. sleep and now are
// time.Sleep and time.Now but in tests.
func (w *stallWatch) run(stop <-chan struct{}, sleep func(time.Duration), now func() time.Time) {
	var last vmCounters
	var lastAt time.Time
	for {
		select {
		case <-stop:
			return
		default:
		}
		due := now().Add(stallTick)
		sleep(stallTick)
		at := now()
		if late := at.Sub(due); late >= stallMin {
			w.note(stall{AtMS: due.UnixMilli(), MS: late.Milliseconds()})
		}
		if w.counters == nil || at.Sub(lastAt) < time.Second {
			continue
		}
		c, err := w.counters()
		if err != nil {
			continue
		}
		if last.cpu != nil {
			w.noteSecond(last.second(c, lastAt))
		}
		last, lastAt = c, at
	}
}

func (w *stallWatch) noteSecond(v vmSecond) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.rep.Seconds) >= vmSecondsKept {
		w.rep.Seconds = w.rep.Seconds[1:]
	}
	w.rep.Seconds = append(w.rep.Seconds, v)
}

func (w *stallWatch) note(s stall) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.rep.Stalls) >= stallCap {
		w.rep.Dropped++
		return
	}
	w.rep.Stalls = append(w.rep.Stalls, s)
}

func (w *stallWatch) report() stallReport {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.rep
	r.Stalls = append([]stall(nil), r.Stalls...)
	r.Seconds = append([]vmSecond(nil), r.Seconds...)
	return r
}

// stallLoop serves the stalls role, realTime telling whether the process
// runs at real-time priority: it starts the watch, prints
// {"ready":true,"real_time":B}, then answers "report" with a stallReport
// and ends on "quit" or end of input.
func stallLoop(realTime bool, in *bufio.Scanner, out *json.Encoder) error {
	w := &stallWatch{counters: readVMCounters}
	w.rep.RealTime = realTime
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(stop, time.Sleep, time.Now)
	}()
	defer func() { close(stop); <-done }()
	if err := out.Encode(map[string]bool{"ready": true, "real_time": w.rep.RealTime}); err != nil {
		return err
	}
	for in.Scan() {
		switch strings.TrimSpace(in.Text()) {
		case "report":
			if err := out.Encode(w.report()); err != nil {
				return err
			}
		case "quit":
			return nil
		default:
			return errors.New("stalls: commands are report and quit")
		}
	}
	return in.Err()
}

// span is when the stall began and ended.
func (s stall) span() (start, end time.Time) {
	start = time.UnixMilli(s.AtMS)
	return start, start.Add(time.Duration(s.MS) * time.Millisecond)
}

// overlapping is the stalls in r that overlap the span from..to.
func (r stallReport) overlapping(from, to time.Time) []stall {
	var out []stall
	for _, s := range r.Stalls {
		if start, end := s.span(); end.After(from) && start.Before(to) {
			out = append(out, s)
		}
	}
	return out
}

// stalledFor is how long the stalls in r overlap the span from..to.
func (r stallReport) stalledFor(from, to time.Time) time.Duration {
	var d time.Duration
	for _, s := range r.overlapping(from, to) {
		start, end := s.span()
		if start.Before(from) {
			start = from
		}
		if end.After(to) {
			end = to
		}
		d += end.Sub(start)
	}
	return d
}

// load is the VM's seconds that began from from to to.
func (r stallReport) load(from, to time.Time) []vmSecond {
	var out []vmSecond
	for _, v := range r.Seconds {
		if at := time.UnixMilli(v.AtMS); !at.Before(from) && !at.After(to) {
			out = append(out, v)
		}
	}
	return out
}

// summary says in a line how often and how long the VM stood still, and
// how busy its busiest seconds were.
func (r stallReport) summary() string {
	var longest stall
	var total int64
	for _, s := range r.Stalls {
		total += s.MS
		if s.MS > longest.MS {
			longest = s
		}
	}
	busy := 0
	for _, v := range r.Seconds {
		if v.Busy >= 95 {
			busy++
		}
	}
	out := fmt.Sprintf("the VM stood still %d times for %v or more", len(r.Stalls)+r.Dropped, stallMin)
	if len(r.Stalls) > 0 {
		out += fmt.Sprintf(" (%.1f s in all, the longest at %v)", float64(total)/1000, longest)
	}
	return out + fmt.Sprintf(", its CPU 95%% busy or more in %d of %d seconds", busy, len(r.Seconds))
}
