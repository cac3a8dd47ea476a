//go:build lab

package announce

import (
	"bufio"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/lvskit/lvskit/lab/labtest"
)

// addrsOf lists the prefixes on the device name (nil when it is gone).
func addrsOf(t *testing.T, name string) []netip.Prefix {
	t.Helper()
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil
	}
	as, err := netlink.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	var out []netip.Prefix
	for _, a := range as {
		ip, _ := netip.AddrFromSlice(a.IP)
		if ip.IsLinkLocalUnicast() {
			continue // the kernel's own IPv6 link-local address
		}
		ones, _ := a.Mask.Size()
		out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}

// TestLabAnnounce: Set makes the device's addresses exactly the ones
// given, IPv4 and IPv6; a second Open of the name is refused while the
// first holds it; Close deletes the device.
func TestLabAnnounce(t *testing.T) {
	labtest.Netns(t)
	d, err := Open("lvs-test")
	if err != nil {
		t.Fatal(err)
	}
	if l, err := netlink.LinkByName("lvs-test"); err != nil || l.Attrs().Flags&(1<<0) == 0 {
		t.Fatalf("the device is not there and up: %v", err)
	}
	a, b, c := netip.MustParsePrefix("10.3.0.1/32"), netip.MustParsePrefix("10.3.0.2/32"), netip.MustParsePrefix("2001:db8::1/128")
	for _, want := range [][]netip.Prefix{{a, b, c}, {b}, {a, c}, nil} {
		if err := d.Set(want); err != nil {
			t.Fatal(err)
		}
		if got := addrsOf(t, "lvs-test"); !slices.Equal(got, want) {
			t.Errorf("after Set(%v) the device has %v", want, got)
		}
	}
	if _, err := Open("lvs-test"); !errors.Is(err, errInUse) {
		t.Errorf("a second Open: %v, want errInUse", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName("lvs-test"); err == nil {
		t.Error("the device outlived Close")
	}
}

// TestLabAnnounceDiesWithTheProcess: a process that announces and is
// SIGKILLed leaves no device and no address behind: the kernel deletes
// them with the namespace only that process held.
func TestLabAnnounceDiesWithTheProcess(t *testing.T) {
	labtest.Netns(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestAnnounceHelperProcess$")
	cmd.Env = append(os.Environ(), "LVSKIT_ANNOUNCE_HELPER=lvs-kill")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "announcing\n" {
		t.Fatalf("the helper said %q, %v", line, err)
	}
	if got := addrsOf(t, "lvs-kill"); len(got) != 1 {
		t.Fatalf("the helper's device has %v", got)
	}
	killed := time.Now()
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	for {
		if _, err := netlink.LinkByName("lvs-kill"); err != nil {
			t.Logf("the device went %v after SIGKILL", time.Since(killed).Round(time.Millisecond))
			return
		}
		if time.Since(killed) > 10*time.Second {
			t.Fatal("the device outlived its process by 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAnnounceHelperProcess is the announcing process of
// TestLabAnnounceDiesWithTheProcess; it does nothing in a normal run.
func TestAnnounceHelperProcess(t *testing.T) {
	name := os.Getenv("LVSKIT_ANNOUNCE_HELPER")
	if name == "" {
		return
	}
	d, err := Open(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Set([]netip.Prefix{netip.MustParsePrefix("10.3.0.1/32")}); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("announcing\n")
	time.Sleep(time.Minute)
}
