package vm

// The host's side of a VM's stalls: while QEMU runs, its threads'
// scheduler statistics are sampled from /proc, and the windows in which the
// host kept the vCPU thread waiting on a run queue are kept. With TCG and
// one vCPU such a window stalls the whole guest; its clock jumps after.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// sampleEvery: fine enough to place a MinWait, cheap enough to forget.
	sampleEvery = 200 * time.Millisecond
	// starvedShare: waiting half the time or more, the guest ran at half speed or less.
	starvedShare = 0.5
	// MinWait is the least waiting a window is kept for: shorter is common on a busy host.
	MinWait = 500 * time.Millisecond
	// maxWaits bounds the windows kept per boot; later ones are only counted.
	maxWaits = 1000
)

// Wait is a window of host time in which the host's scheduler kept the
// VM's vCPU thread waiting on a run queue: consecutive samples in each of
// which it waited at least half the time.
type Wait struct {
	Start, End time.Time     // host time: the first starved sample's start, the last one's end
	Waited     time.Duration // how long the vCPU thread waited on a run queue within
	Load       float64       // the host's 1-minute load average as it opened; -1 if unknown
}

// HostWaits is what the host did to one VM's vCPU thread over a boot (every
// QEMU start of it): the windows of MinWait or more of waiting.
type HostWaits struct {
	Windows []Wait        // in time order; the first maxWaits of them
	Count   int           // every window, those past maxWaits included
	Total   time.Duration // waited in all Count windows
	Longest Wait          // the window with the most waiting
	// Err, if set, is why sampling stopped while QEMU still ran; Until is
	// the last sample's time. Windows before Until are all there.
	Err   error
	Until time.Time
}

// Waits returns the kept windows that overlap [from, to].
func (h *HostWaits) Waits(from, to time.Time) []Wait {
	var out []Wait
	for _, w := range h.Windows {
		if !w.End.Before(from) && !w.Start.After(to) {
			out = append(out, w)
		}
	}
	return out
}

// add keeps w if it waited MinWait or more.
func (h *HostWaits) add(w Wait) {
	if w.Waited < MinWait {
		return
	}
	h.Count++
	h.Total += w.Waited
	if w.Waited > h.Longest.Waited {
		h.Longest = w
	}
	if len(h.Windows) < maxWaits {
		h.Windows = append(h.Windows, w)
	}
}

// sample is one interval between two reads of the vCPU thread's schedstat.
type sample struct {
	start, end time.Time
	waited     time.Duration // the vCPU thread's run-queue wait within
}

// waitLog merges starved samples into windows and keeps them in h.
type waitLog struct {
	h    *HostWaits
	open *Wait          // the window being merged
	load func() float64 // the load average, read when a window opens
}

// add takes the next sample: a starved one opens or extends the window, any
// other closes it.
func (l *waitLog) add(s sample) {
	wall := s.end.Sub(s.start)
	if wall <= 0 {
		return
	}
	if float64(s.waited) < starvedShare*float64(wall) {
		l.close()
		return
	}
	if l.open == nil {
		l.open = &Wait{Start: s.start, Load: l.load()}
	}
	l.open.End = s.end
	l.open.Waited += s.waited
}

// close ends the open window, if any.
func (l *waitLog) close() {
	if l.open != nil {
		l.h.add(*l.open)
		l.open = nil
	}
}

// threadStat is one thread's scheduler statistics.
type threadStat struct {
	tid       int
	vcpu      bool          // named as a QEMU vCPU thread
	run, wait time.Duration // on a CPU; runnable, waiting on a run queue
}

// isVCPU: QEMU names its TCG vCPU threads "CPU <n>/TCG" (multi-threaded
// TCG) or "ALL CPUs/TCG" (one thread for all), with -name debug-threads=on.
func isVCPU(comm string) bool {
	return strings.HasPrefix(comm, "CPU ") || strings.HasPrefix(comm, "ALL CPUs/")
}

// errGone: the process has ended.
var errGone = errors.New("the process has ended")

// readThreads reads the schedstat of each thread of process pid under root
// (/proc), and its comm when names has none for it yet; threads that end
// meanwhile are left out. It returns errGone when the process has ended.
func readThreads(root string, pid int, names map[int]string) ([]threadStat, error) {
	dir := filepath.Join(root, strconv.Itoa(pid), "task")
	ents, err := os.ReadDir(dir)
	if err != nil {
		if gone(err) {
			return nil, errGone
		}
		return nil, err
	}
	var out []threadStat
	var firstErr error
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "schedstat"))
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		st, err := parseSchedstat(string(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, e.Name(), "schedstat"), err)
		}
		st.tid = tid
		comm, ok := names[tid]
		if !ok {
			c, err := os.ReadFile(filepath.Join(dir, e.Name(), "comm"))
			if err != nil {
				continue
			}
			comm = strings.TrimSuffix(string(c), "\n")
			names[tid] = comm
		}
		st.vcpu = isVCPU(comm)
		out = append(out, st)
	}
	if len(out) == 0 {
		if _, err := os.Stat(dir); gone(err) {
			return nil, errGone
		}
		if firstErr == nil {
			firstErr = errors.New("no threads")
		}
		return nil, fmt.Errorf("%s: no thread's schedstat: %w", dir, firstErr)
	}
	return out, nil
}

func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// parseSchedstat reads "<ns on CPU> <ns waiting on a run queue> <timeslices>".
func parseSchedstat(s string) (threadStat, error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return threadStat{}, fmt.Errorf("%q is not three numbers", s)
	}
	var n [2]int64
	for i := range n {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil || v < 0 {
			return threadStat{}, fmt.Errorf("%q is not three numbers", s)
		}
		n[i] = v
	}
	return threadStat{run: time.Duration(n[0]), wait: time.Duration(n[1])}, nil
}

// vcpuWait is how long the vCPU thread waited between two reads: the
// threads named as vCPUs, or else the one with the most CPU time (a TCG
// vCPU thread does all the emulation). With several vCPU threads it is
// the longest wait of one of them; false if none was in both reads.
func vcpuWait(prev, cur []threadStat) (time.Duration, bool) {
	named := false
	for _, t := range cur {
		named = named || t.vcpu
	}
	busiest := -1
	if !named {
		for i, t := range cur {
			if busiest < 0 || t.run > cur[busiest].run {
				busiest = i
			}
		}
	}
	var most time.Duration
	found := false
	for i, t := range cur {
		if named && !t.vcpu || !named && i != busiest {
			continue
		}
		for _, p := range prev {
			if p.tid == t.tid {
				found = true
				most = max(most, t.wait-p.wait)
			}
		}
	}
	return most, found
}

// sampler samples one QEMU process's threads into a waitLog.
type sampler struct {
	root   string // /proc
	pid    int
	log    waitLog
	names  map[int]string // comm by thread id
	prev   []threadStat
	prevAt time.Time
	done   bool // the process ended or reading failed: no more samples
}

func newSampler(root string, pid int, h *HostWaits) *sampler {
	s := &sampler{root: root, pid: pid, names: map[int]string{}}
	s.log = waitLog{h: h, load: func() float64 { return loadAverage(root) }}
	return s
}

// sample reads the threads at now and takes the interval since the last
// read. A failure other than the process's end is kept in the log's Err.
func (s *sampler) sample(now time.Time) {
	if s.done {
		return
	}
	cur, err := readThreads(s.root, s.pid, s.names)
	if err != nil {
		s.done = true
		s.log.close()
		if !errors.Is(err, errGone) && s.log.h.Err == nil {
			s.log.h.Err = err
		}
		return
	}
	if s.prev != nil {
		w, ok := vcpuWait(s.prev, cur)
		if !ok {
			s.log.close()
		} else {
			s.log.add(sample{start: s.prevAt, end: now, waited: w})
		}
	}
	s.log.h.Until = now
	s.prev, s.prevAt = cur, now
	if len(s.names) > 4*len(cur)+16 { // threads come and go: forget the gone
		live := map[int]string{}
		for _, t := range cur {
			live[t.tid] = s.names[t.tid]
		}
		s.names = live
	}
}

// watchWaits samples process pid's threads every sampleEvery into h until
// the returned stop is called; stop returns once sampling has ended and h
// is complete.
func watchWaits(root string, pid int, h *HostWaits) (stop func()) {
	s := newSampler(root, pid, h)
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		s.sample(time.Now())
		for !s.done {
			select {
			case <-quit:
				s.log.close()
				return
			case <-t.C:
				s.sample(time.Now()) // the read's time, not the tick's
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
	}
}

// loadAverage is the host's 1-minute load average, -1 if unreadable.
func loadAverage(root string) float64 {
	b, err := os.ReadFile(filepath.Join(root, "loadavg"))
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}
