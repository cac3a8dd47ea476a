//go:build lab

package e2e

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lvskit/lvskit/lab/labtest"
	"golang.org/x/sys/unix"
)

// connCount is what a client opening connections back to back saw.
type connCount struct {
	attempts, ok, refused, other int
	slow                         int           // connected, but after 0.9 s or more (a SYN retransmitted)
	slowest                      time.Duration // the longest successful connect
	firstOther                   string
}

// connLoop opens connections from host to addr back to back (connect, then
// close) until stop is closed, and sends what it saw on the returned
// channel. It runs on a thread moved into host's namespace for good: the
// thread stays locked and ends with the goroutine.
func (n *network) connLoop(host, addr string, stop <-chan struct{}) <-chan connCount {
	out := make(chan connCount, 1)
	path := filepath.Join("/run/netns", n.name(host))
	go func() {
		var c connCount
		defer func() { out <- c }()
		runtime.LockOSThread()
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
		}
		if err != nil {
			c.other, c.firstOther = 1, "entering "+host+": "+err.Error()
			return
		}
		untilClosed(stop, func() {
			start := time.Now()
			// Linux sends a lost SYN again after 1, 3, 7 and 15 s; a
			// connect that lost several SYNs in a row is still a
			// delay, not a failure, so the client waits past the
			// fourth retransmission as a real one (127 s) would.
			conn, err := net.DialTimeout("tcp4", addr, 20*time.Second)
			c.attempts++
			switch {
			case err == nil:
				conn.Close()
				c.ok++
				took := time.Since(start)
				if took >= 900*time.Millisecond {
					c.slow++
				}
				c.slowest = max(c.slowest, took)
			case errors.Is(err, syscall.ECONNREFUSED):
				c.refused++
			default:
				c.other++
				if c.firstOther == "" {
					c.firstOther = err.Error()
				}
			}
		})
	}()
	return out
}

// untilClosed calls f again and again until stop is closed.
func untilClosed(stop <-chan struct{}, f func()) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		f()
	}
}

// editPhase is one series of edits made while a client connects.
type editPhase struct {
	name     string
	edits    int
	editTime time.Duration // summed over the edits (each one ipvsadm process)
	conns    connCount
	icmp     int // ICMP port-unreachable the director sent
}

// TestSchedulerEditRefusesConnections measures a kernel limit lvsctl
// cannot avoid: Linux's ip_vs_edit_service, on a scheduler change, unbinds
// the old scheduler, sets the service's scheduler to NULL and waits for an
// RCU grace period before binding the new one; a SYN scheduled in that
// window gets no destination, and ip_vs_leave answers it with ICMP port
// unreachable, which the client sees as "connection refused". With
// Debian's ipvsadm, so the result is the kernel's: a client connects back
// to back through VS/NAT while the director changes the service's
// scheduler (-E -s wrr/wlc, alternately) again and again, then its
// weights (-e -w) as often. Weight edits refuse nothing (asserted); the
// scheduler edits' refusals are counted and printed, with the director's
// ICMP port-unreachable count, and once more with those ICMP messages
// dropped by an OUTPUT rule (the client's SYN is then retransmitted: a
// delay, not a failure; asserted).
func TestSchedulerEditRefusesConnections(t *testing.T) {
	const edits = 150
	n := natNetwork(t, "schedwin")
	rules := "-A -t " + seedVIP80 + " -s wrr\n-a -t " + seedVIP80 + " -r " + seedRS1 + " -m -w 1\n-a -t " + seedVIP80 + " -r " + seedRS2 + " -m -w 2\n"
	if r := n.runIn("dir", rules, labtest.RefIpvsadm, "-R"); r.Code != 0 {
		t.Fatalf("ipvsadm -R: %+v", r)
	}
	// Counts the ICMP port-unreachable messages the director sends (rule 1 of OUTPUT).
	n.must("dir", "/usr/sbin/iptables", "-I", "OUTPUT", "1", "-p", "icmp", "--icmp-type", "port-unreachable")
	icmpSent := func() int { return n.counters("dir", "filter", "OUTPUT")[0] }

	phase := func(name string, edit func(i int) []string) editPhase {
		p := editPhase{name: name, edits: edits}
		icmp0 := icmpSent()
		stop := make(chan struct{})
		res := n.connLoop("client", seedVIP80, stop)
		time.Sleep(500 * time.Millisecond)
		for i := range edits {
			args := edit(i)
			start := time.Now()
			if r := n.run("dir", labtest.RefIpvsadm, args...); r.Code != 0 {
				t.Fatalf("ipvsadm %s: %+v", strings.Join(args, " "), r)
			}
			p.editTime += time.Since(start)
		}
		time.Sleep(500 * time.Millisecond)
		close(stop)
		p.conns = <-res
		p.icmp = icmpSent() - icmp0
		return p
	}
	sched := func(i int) []string { return []string{"-E", "-t", seedVIP80, "-s", []string{"wlc", "wrr"}[i%2]} }
	weight := func(i int) []string {
		return []string{"-e", "-t", seedVIP80, "-r", seedRS1, "-m", "-w", []string{"3", "1"}[i%2]}
	}

	phases := []editPhase{phase("weight edits (-e -w 3/1)", weight), phase("scheduler edits (-E -s wlc/wrr)", sched)}
	// The same scheduler edits with the director's ICMP port-unreachable
	// dropped: the refused SYN is lost instead and the client sends it again.
	n.must("dir", "/usr/sbin/iptables", "-I", "OUTPUT", "2", "-p", "icmp", "--icmp-type", "port-unreachable", "-j", "DROP")
	phases = append(phases, phase("scheduler edits, ICMP unreachable dropped", sched))
	n.must("dir", "/usr/sbin/iptables", "-D", "OUTPUT", "2")
	// And with expedited RCU grace periods (a host-wide knob), which
	// shortens the window without closing it.
	if old, err := os.ReadFile("/sys/kernel/rcu_expedited"); err == nil {
		if err := os.WriteFile("/sys/kernel/rcu_expedited", []byte("1"), 0); err != nil {
			t.Fatal(err)
		}
		phases = append(phases, phase("scheduler edits, rcu_expedited=1", sched))
		os.WriteFile("/sys/kernel/rcu_expedited", old, 0)
	} else {
		fmt.Printf("no /sys/kernel/rcu_expedited in this kernel: %v\n", err)
	}

	fmt.Printf("%-44s %6s %10s %9s %8s %8s %6s %6s %8s %6s\n", "edits (Debian ipvsadm, one process each)", "edits", "per edit", "connects", "refused", "per edit", "other", "slow", "slowest", "icmp")
	for _, p := range phases {
		fmt.Printf("%-44s %6d %9.1fms %9d %8d %8.3f %6d %6d %7.2fs %6d\n", p.name, p.edits, float64(p.editTime.Microseconds())/1000/float64(p.edits),
			p.conns.attempts, p.conns.refused, float64(p.conns.refused)/float64(p.edits), p.conns.other, p.conns.slow, p.conns.slowest.Seconds(), p.icmp)
		if p.conns.firstOther != "" {
			fmt.Printf("  first other failure: %s\n", p.conns.firstOther)
		}
		if p.conns.ok == 0 {
			t.Errorf("%s: no connection succeeded: the client measured nothing", p.name)
		}
	}
	if w := phases[0]; w.conns.refused != 0 || w.conns.other != 0 || w.icmp != 0 {
		t.Errorf("weight edits: %d refused, %d other failures, %d ICMP port unreachable: weight edits must not refuse", w.conns.refused, w.conns.other, w.icmp)
	}
	if d := phases[2]; d.conns.refused != 0 || d.conns.other != 0 {
		t.Errorf("with ICMP port unreachable dropped: %d refused, %d other failures", d.conns.refused, d.conns.other)
	}
	if s := phases[1]; s.conns.refused != s.icmp {
		t.Logf("scheduler edits: %d refused, %d ICMP port unreachable sent (a difference means another cause)", s.conns.refused, s.icmp)
	}
}
