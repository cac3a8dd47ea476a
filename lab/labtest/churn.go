//go:build linux

package labtest

import (
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/ipvs"
)

// ChurnServices keeps another client editing the IPVS table of the
// network namespace ns (an open file descriptor of it), as a busy health
// checker or orchestrator would, while a test reads the table: every
// interval it adds TCP service 10.5.(i%50).(i%200+1):80 and, from the
// 100th on, deletes the one added 100 changes before, so about 100 of
// them come and go. With burst > 0 it rests a second after every burst
// changes (reads made in the quiet succeed; reads overlapping a burst
// must notice it). It runs on a thread of its own until the returned
// function stops it and waits for it.
func ChurnServices(t testing.TB, ns int, interval time.Duration, burst int) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		// The thread enters the namespace and is thrown away with it.
		runtime.LockOSThread()
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			t.Error(err)
			return
		}
		c, err := ipvs.Open()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; ; i++ {
			if burst > 0 && i%burst == 0 && i > 0 {
				select {
				case <-done:
					return
				case <-time.After(time.Second):
				}
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
			add := churned(i)
			_ = c.Exec(ipvs.Request{Cmd: ipvs.CmdNewService, Service: &add})
			if i >= 100 {
				old := churned(i - 100)
				_ = c.Exec(ipvs.Request{Cmd: ipvs.CmdDelService, Service: &old})
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// churned is the i-th service ChurnServices adds.
func churned(i int) ipvs.Service {
	return ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.AddrFrom4([4]byte{10, 5, byte(i % 50), byte(i%200 + 1)}),
		Port: 80, Scheduler: "rr", Netmask: 0xffffffff}
}
