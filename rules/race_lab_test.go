//go:build lab

package rules_test

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/lab/labtest"
	"github.com/lvskit/lvskit/rules"
)

// TestPlanWhileEditing: while another process adds and deletes a service
// every 5 ms in bursts, no plan of the stable table skips a service (which
// would show as adding a service the kernel has): each plan is made from
// reads that agree, or gives up. A single read, as a plan without the
// check would make, is counted for comparison.
func TestPlanWhileEditing(t *testing.T) {
	labtest.Netns(t)
	ns, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ns)
	c, err := ipvs.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const stable = 400
	want := &rules.Set{}
	for i := range stable {
		s := ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.AddrFrom4([4]byte{10, 1, byte(i / 250), byte(i%250 + 1)}),
			Port: 80, Scheduler: "rr", Netmask: 0xffffffff}
		if err := c.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &s}); err != nil {
			t.Fatal(err)
		}
		want.Services = append(want.Services, rules.Service{Service: s})
	}
	stableKeys := map[rules.ServiceKey]bool{}
	for i := range want.Services {
		stableKeys[rules.KeyOf(&want.Services[i].Service)] = true
	}

	// Bursts of 40 changes, then a quiet second: plans made in the quiet
	// succeed, plans overlapping a burst must notice.
	defer labtest.ChurnServices(t, ns, 5*time.Millisecond, 40)()

	const plans = 100
	wrong, gaveUp, singleWrong := 0, 0, 0
	for range plans {
		p, err := rules.DiffKernel(c, want, rules.DiffOptions{})
		switch {
		case errors.Is(err, rules.ErrTableChanging):
			gaveUp++
		case err != nil:
			t.Fatal(err)
		default:
			for _, ch := range p.Changes {
				if ch.Action == rules.AddService { // a stable service the read skipped
					wrong++
					break
				}
			}
		}
		// The control: one read of the services, as a plan made without
		// the second read would see them.
		seen := map[rules.ServiceKey]int{}
		if err := ipvs.DumpServices(c, func(s *ipvs.ServiceEntry) error {
			seen[rules.KeyOf(&s.Service)]++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for k := range stableKeys {
			if seen[k] != 1 {
				singleWrong++
				break
			}
		}
	}
	msg := fmt.Sprintf("%d plans of %d stable services while another process adds and deletes a service every 5 ms in bursts of 40: %d wrong, %d gave up; single reads with a stable service skipped or repeated: %d of %d",
		plans, stable, wrong, gaveUp, singleWrong, plans)
	t.Log(msg)
	if wrong > 0 {
		t.Errorf("%s", msg)
	}
	if gaveUp == plans {
		t.Errorf("every plan gave up, even in the quiet between bursts: %s", msg)
	}
}
