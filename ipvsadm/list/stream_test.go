package list_test

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/lvskit/lvskit/ipvsadm/list"
	"github.com/lvskit/lvskit/ipvsadm/list/listtest"
	"github.com/lvskit/lvskit/save"
)

// streamChildEnv makes the test binary list a generated 10,000 x 10 table
// and report its peak RSS instead of running tests.
const streamChildEnv = "LVSKIT_LIST_STREAM_CHILD"

// peakRSSChildEnv makes the test binary run the command given in it
// (arguments separated by \x1f) with stdout discarded and print the
// command's peak RSS in KiB. A small fresh process has to start the
// command: Linux carries the starting process's high-water mark into the
// child's ru_maxrss when it execs from a vfork-style clone, as os/exec does.
const peakRSSChildEnv = "LVSKIT_PEAK_RSS_OF"

func TestMain(m *testing.M) {
	if mode := os.Getenv(streamChildEnv); mode != "" {
		os.Exit(streamChild(mode))
	}
	if command := os.Getenv(peakRSSChildEnv); command != "" {
		os.Exit(peakRSSChild(strings.Split(command, "\x1f")))
	}
	os.Exit(m.Run())
}

func peakRSSChild(args []string) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	os.Stdout.WriteString(strconv.FormatInt(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss, 10) + "\n")
	return 0
}

func streamChild(mode string) int {
	g := &listtest.Generated{NumServices: 10_000, DestsPerService: 10}
	info, _ := g.Info()
	o := list.Options{Numeric: mode != "names", Resolver: goldenResolver()}
	w := bufio.NewWriter(io.Discard)
	var err error
	switch mode {
	case "save":
		err = save.Write(w, g, o)
	default:
		o.Format = list.Stats
		err = list.Table(w, g, info, o)
	}
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 1
	}
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			os.Stdout.WriteString(strings.Fields(l)[1] + "\n")
			return 0
		}
	}
	return 1
}

// TestStreamingPeakRSS lists 10,000 services with 10 destinations each in
// a fresh process and checks its peak resident memory: destinations are
// fetched, sorted and printed one service at a time, so memory must stay
// far below what holding 100,000 destinations would take.
func TestStreamingPeakRSS(t *testing.T) {
	for _, mode := range []string{"numeric", "names", "save"} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), streamChildEnv+"="+mode)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v: %s", mode, err, stderr.String())
		}
		kb, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("%s: %q", mode, out)
		}
		t.Logf("%s: peak RSS %d KiB for 10,000 services x 10 destinations", mode, kb)
		if kb > 32<<10 {
			t.Errorf("%s: peak RSS %d KiB, limit 32 MiB", mode, kb)
		}
	}
}

func BenchmarkTable1000x10(b *testing.B) {
	g := &listtest.Generated{NumServices: 1000, DestsPerService: 10}
	info, _ := g.Info()
	for _, numeric := range []bool{true, false} {
		name := "names"
		if numeric {
			name = "numeric"
		}
		b.Run(name, func(b *testing.B) {
			o := list.Options{Numeric: numeric, Resolver: goldenResolver()}
			for b.Loop() {
				if err := list.Table(io.Discard, g, info, o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
