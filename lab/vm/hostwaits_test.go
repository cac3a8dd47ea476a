package vm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeProc writes a /proc tree under root: for process pid, each thread's
// comm ("" for none) and schedstat ("" for none), and the load average.
type fakeProc struct {
	t    *testing.T
	root string
}

func (f fakeProc) thread(pid, tid int, comm, schedstat string) {
	f.t.Helper()
	dir := filepath.Join(f.root, fmt.Sprint(pid), "task", fmt.Sprint(tid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	for name, content := range map[string]string{"comm": comm, "schedstat": schedstat} {
		if content == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f fakeProc) load(s string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.root, "loadavg"), []byte(s), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// stat is a schedstat line of run and wait milliseconds.
func stat(runMS, waitMS int) string {
	return fmt.Sprintf("%d %d 42\n", runMS*1e6, waitMS*1e6)
}

func TestReadThreadsParsesSchedstatAndComm(t *testing.T) {
	f := fakeProc{t, t.TempDir()}
	f.thread(100, 100, "qemu-system-x86\n", "17788049994 5503670278 1225598\n")
	f.thread(100, 101, "call_rcu\n", stat(1, 2))
	f.thread(100, 102, "CPU 0/TCG\n", stat(3000, 400))
	f.thread(100, 103, "worker\n", "") // ended between the listing and the read
	names := map[int]string{}
	got, err := readThreads(f.root, 100, names)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, s := range got {
		lines = append(lines, fmt.Sprintf("%d %v %v %v", s.tid, s.vcpu, s.run, s.wait))
	}
	want := "100 false 17.788049994s 5.503670278s|101 false 1ms 2ms|102 true 3s 400ms"
	if strings.Join(lines, "|") != want {
		t.Errorf("threads: %s\nwant:    %s", strings.Join(lines, "|"), want)
	}
	if names[102] != "CPU 0/TCG" {
		t.Errorf("names = %v", names)
	}

	// A name once read is kept: QEMU names a thread once, as it starts.
	f.thread(100, 101, "CPU 1/TCG\n", stat(1, 2))
	if got, _ := readThreads(f.root, 100, names); got[1].vcpu {
		t.Error("the comm of a known thread was read again")
	}

	if _, err := readThreads(f.root, 999, names); err != errGone {
		t.Errorf("a process that is not there: %v, want errGone", err)
	}
	f.thread(200, 200, "qemu-system-x86\n", "12 34\n")
	if _, err := readThreads(f.root, 200, names); err == nil || !strings.Contains(err.Error(), "not three numbers") {
		t.Errorf("a bad schedstat: %v", err)
	}
	f.thread(300, 300, "qemu-system-x86\n", "")
	if _, err := readThreads(f.root, 300, names); err == nil || err == errGone {
		t.Errorf("no thread's schedstat readable: %v, want an error", err)
	}
}

func TestIsVCPU(t *testing.T) {
	for comm, want := range map[string]bool{
		"CPU 0/TCG": true, "CPU 12/TCG": true, "ALL CPUs/TCG": true, "CPU 0/KVM": true,
		"qemu-system-x86": false, "call_rcu": false, "CPUHP": false,
	} {
		if isVCPU(comm) != want {
			t.Errorf("isVCPU(%q) = %v", comm, !want)
		}
	}
}

// TestWaitLogMergesStarvedSamples: consecutive samples that waited half
// their time or more make one window; any other sample ends it; a window
// that waited less than MinWait is dropped.
func TestWaitLogMergesStarvedSamples(t *testing.T) {
	var h HostWaits
	loads := 0
	l := waitLog{h: &h, load: func() float64 { loads++; return float64(loads) + 0.5 }}
	t0 := time.Date(2026, 12, 7, 7, 6, 0, 0, time.UTC)
	at := t0
	feed := func(waitsMS ...int) {
		for _, w := range waitsMS {
			l.add(sample{start: at, end: at.Add(200 * time.Millisecond), waited: time.Duration(w) * time.Millisecond})
			at = at.Add(200 * time.Millisecond)
		}
	}
	feed(0, 150, 100, 50) // 250 ms waited: dropped
	feed(190, 200, 0)     // 390 ms: dropped
	feed(120, 190, 200, 180, 99, 10)
	feed(200, 200, 200)
	l.close()
	if h.Count != 2 || len(h.Windows) != 2 {
		t.Fatalf("windows: %+v", h)
	}
	want := []Wait{
		{Start: t0.Add(7 * 200 * time.Millisecond), End: t0.Add(11 * 200 * time.Millisecond), Waited: 690 * time.Millisecond, Load: 3.5},
		{Start: t0.Add(13 * 200 * time.Millisecond), End: t0.Add(16 * 200 * time.Millisecond), Waited: 600 * time.Millisecond, Load: 4.5},
	}
	for i, w := range want {
		if h.Windows[i] != w {
			t.Errorf("window %d = %+v\nwant %+v", i, h.Windows[i], w)
		}
	}
	if h.Total != 1290*time.Millisecond || h.Longest != want[0] {
		t.Errorf("total %v, longest %+v", h.Total, h.Longest)
	}
	if got := h.Waits(t0, t0.Add(1400*time.Millisecond)); len(got) != 1 || got[0] != want[0] {
		t.Errorf("Waits up to the first window's start = %+v", got)
	}
	if got := h.Waits(t0.Add(2300*time.Millisecond), t0.Add(2500*time.Millisecond)); len(got) != 0 {
		t.Errorf("Waits between the windows = %+v", got)
	}
	if got := h.Waits(t0.Add(3*time.Second), t0.Add(time.Hour)); len(got) != 1 || got[0] != want[1] {
		t.Errorf("Waits over the second window's end = %+v", got)
	}
}

func TestHostWaitsKeepsAtMostMaxWaits(t *testing.T) {
	var h HostWaits
	t0 := time.Now()
	for i := range maxWaits + 5 {
		start := t0.Add(time.Duration(i) * time.Second)
		h.add(Wait{Start: start, End: start.Add(time.Second), Waited: MinWait + time.Duration(i)})
	}
	if len(h.Windows) != maxWaits || h.Count != maxWaits+5 || h.Longest.Waited != MinWait+maxWaits+4 {
		t.Errorf("kept %d of %d windows, longest %v", len(h.Windows), h.Count, h.Longest.Waited)
	}
}

// TestVCPUWaitTakesTheLongestOfTheVCPUThreads: with several vCPU threads a
// sample's wait is the most one of them waited, not their sum; threads not
// in both reads count for nothing.
func TestVCPUWaitTakesTheLongestOfTheVCPUThreads(t *testing.T) {
	ms := time.Millisecond
	prev := []threadStat{{tid: 1, wait: 900 * ms}, {tid: 2, vcpu: true, wait: 10 * ms}, {tid: 3, vcpu: true, wait: 20 * ms}}
	cur := []threadStat{{tid: 1, wait: 1900 * ms}, {tid: 2, vcpu: true, wait: 160 * ms}, {tid: 3, vcpu: true, wait: 140 * ms}, {tid: 4, vcpu: true, wait: 5000 * ms}}
	if w, ok := vcpuWait(prev, cur); w != 150*ms || !ok {
		t.Errorf("vcpuWait = %v, %v; want 150ms, true", w, ok)
	}
	if w, ok := vcpuWait(prev, cur[3:]); ok {
		t.Errorf("vcpuWait of a thread not read before = %v, %v; want false", w, ok)
	}
}

// TestSamplerFollowsTheVCPUThread: the named vCPU thread's waits make the
// windows, with the load average at their start; unnamed threads fall back
// to the busiest one; a broken read is kept once and ends the sampling.
func TestSamplerFollowsTheVCPUThread(t *testing.T) {
	f := fakeProc{t, t.TempDir()}
	f.load("7.90 6.00 5.00 3/300 1234\n")
	t0 := time.Date(2026, 12, 7, 7, 6, 49, 800e6, time.UTC)
	var h HostWaits
	s := newSampler(f.root, 10, &h)
	// main waits a lot, the vCPU thread in samples 2 to 4.
	for i, waits := range [][2]int{{0, 0}, {100, 10}, {200, 180}, {300, 350}, {400, 540}, {500, 560}} {
		f.thread(10, 10, "qemu-system-x86\n", stat(100, waits[0]))
		f.thread(10, 11, "CPU 0/TCG\n", stat(1000+100*i, waits[1]))
		if i == 3 {
			f.load("9.10 6.00 5.00 3/300 1234\n")
		}
		s.sample(t0.Add(time.Duration(i) * 200 * time.Millisecond))
	}
	s.log.close()
	want := Wait{Start: t0.Add(200 * time.Millisecond), End: t0.Add(800 * time.Millisecond), Waited: 530 * time.Millisecond, Load: 7.9}
	if h.Count != 1 || h.Windows[0] != want || h.Err != nil || !h.Until.Equal(t0.Add(time.Second)) {
		t.Errorf("got %+v\nwant one window %+v", h, want)
	}

	// No thread named: the one with the most CPU time is the vCPU thread.
	var h2 HostWaits
	s = newSampler(f.root, 20, &h2)
	for i, waits := range [][2]int{{0, 0}, {200, 0}, {400, 0}, {600, 0}, {600, 0}} {
		f.thread(20, 20, "qemu-system-x86\n", stat(5000+10*i, waits[0]))
		f.thread(20, 21, "qemu-system-x86\n", stat(100, waits[1]))
		s.sample(t0.Add(time.Duration(i) * 200 * time.Millisecond))
	}
	s.log.close()
	if h2.Count != 1 || h2.Windows[0].Waited != 600*time.Millisecond {
		t.Errorf("the busiest thread's waits: %+v", h2)
	}

	// A schedstat that cannot be read is an error, kept once.
	f.thread(20, 21, "", "garbage\n")
	s.sample(t0.Add(2 * time.Second))
	s.sample(t0.Add(3 * time.Second))
	if h2.Err == nil || !strings.Contains(h2.Err.Error(), "schedstat") || !s.done || !h2.Until.Equal(t0.Add(800*time.Millisecond)) {
		t.Errorf("after a bad read: err %v, done %v, until %v", h2.Err, s.done, h2.Until)
	}
}

// TestWatchWaitsReadsAChild samples a real process's threads; once it has
// ended, the sampler stops without an error.
func TestWatchWaitsReadsAChild(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	got, err := readThreads("/proc", cmd.Process.Pid, map[int]string{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].tid != cmd.Process.Pid || got[0].vcpu || got[0].run < 0 {
		t.Errorf("sleep's threads: %+v", got)
	}
	var h HostWaits
	stop := watchWaits("/proc", cmd.Process.Pid, &h)
	stop()
	if h.Err != nil || h.Until.IsZero() {
		t.Errorf("watching sleep: %+v", h)
	}

	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	s := newSampler("/proc", cmd.Process.Pid, &h)
	s.sample(time.Now())
	if !s.done || h.Err != nil {
		t.Errorf("after the process ended: done %v, err %v", s.done, h.Err)
	}
	if l := loadAverage("/proc"); l < 0 {
		t.Errorf("the host's load average: %v", l)
	}
}
