//go:build lab

package sysenv_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lvskit/lvskit/lab/labtest"
)

// TestProgramsKeepOffHugePages: our programs, as the Makefile builds them,
// hold no transparent huge page, the runtime's first heap pages included
// (the Makefile's disablethp=1; sysenv.SmallPages comes too late for
// those). Each is caught while it waits for its standard input, after
// the runtime and the program have started, and every mapping of it is
// read.
func TestProgramsKeepOffHugePages(t *testing.T) {
	labtest.Require(t)
	if b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err != nil || !bytes.Contains(b, []byte("[always]")) {
		t.Fatalf("the lab's kernel must have transparent huge pages \"always\" (Debian's default) for this test: %q, %v", b, err)
	}
	labtest.Netns(t)
	for _, prog := range [][]string{{"ipvsadm", "-R"}, {"ipvsadm-restore"}, {"lvsctl", "plan", "-"}} {
		t.Run(prog[0], func(t *testing.T) {
			cmd := exec.Command(labtest.Ours(prog[0]), prog[1:]...)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			defer stdin.Close()
			smaps := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/smaps"
			// Waiting on its standard input: blocked in read(0).
			deadline := time.Now().Add(labtest.RunTimeout)
			for !blockedReading(cmd.Process.Pid) {
				if time.Now().After(deadline) {
					t.Fatalf("%s never blocked reading its input", prog[0])
				}
				time.Sleep(10 * time.Millisecond)
			}
			f, err := os.Open(smaps)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			huge, mapping, rss := 0, "", 0
			s := bufio.NewScanner(f)
			for s.Scan() {
				fields := strings.Fields(s.Text())
				switch {
				case len(fields) >= 5 && strings.Contains(fields[0], "-"):
					mapping = s.Text()
				case len(fields) >= 2 && fields[0] == "Rss:":
					n, _ := strconv.Atoi(fields[1])
					rss += n
				case len(fields) >= 2 && fields[0] == "AnonHugePages:" && fields[1] != "0":
					huge++
					t.Errorf("%s: %s kB of huge pages in %s", prog[0], fields[1], mapping)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d kB resident while waiting for input, %d mappings with huge pages", prog[0], rss, huge)
		})
	}
}

// blockedReading reports whether a thread of process pid is in read(2)
// on fd 0.
func blockedReading(pid int) bool {
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/syscall")
		if err != nil {
			continue
		}
		// The first field is the system call's number, which differs by
		// architecture (read is 0 on amd64, 63 on arm64).
		if fields := strings.Fields(string(b)); len(fields) >= 2 && fields[0] == strconv.Itoa(syscall.SYS_READ) && fields[1] == "0x0" {
			return true
		}
	}
	return false
}
