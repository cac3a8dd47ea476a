//go:build lab

package lvsprep

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lvskit/lvskit/lab/labtest"
)

// TestLabBirdAnnounce runs BIRD with lvsprep bird's configurations on a
// router (the test's namespace) and one director (a named namespace) on
// one link. An address on the director's lvs-announce becomes the
// router's route, a subnet on it does not, and deleting the device
// withdraws the route within a few seconds.
func TestLabBirdAnnounce(t *testing.T) {
	labtest.Netns(t)
	const ns = "lvsprep-bird-dir"
	dir := t.TempDir()
	sh(t, "ip netns add "+ns)
	t.Cleanup(func() { labtest.Sh(t, "ip netns del "+ns) })
	sh(t, "ip link set lo up && ip link add r0 type veth peer name d0 netns "+ns+
		" && ip address add 10.2.0.1/24 dev r0 && ip link set r0 up"+
		" && ip -n "+ns+" link set lo up && ip -n "+ns+" address add 10.2.0.11/24 dev d0 && ip -n "+ns+" link set d0 up")

	// Both configurations take their router id from the routing table.
	router := labtest.Run(t, "", lvsprepBin, "bird", "router", "--as", "65000", "--director-as", "65001", "--director", "10.2.0.11")
	director := labtest.Run(t, "", "/usr/bin/ip", "netns", "exec", ns, lvsprepBin, "bird", "director",
		"--router", "10.2.0.1", "--router-as", "65000", "--as", "65001")
	if router.Code != 0 || director.Code != 0 || !strings.Contains(router.Stdout, "router id 10.2.0.1;") ||
		!strings.Contains(director.Stdout, "router id 10.2.0.11;") {
		t.Fatalf("lvsprep bird: %+v\n%+v", router, director)
	}
	birdc := map[string][]string{}
	start := func(name, conf string, prefix ...string) {
		cf, ctl := filepath.Join(dir, name+".conf"), filepath.Join(dir, name+".ctl")
		if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		args := append(prefix, "/usr/sbin/bird", "-f", "-c", cf, "-s", ctl, "-P", filepath.Join(dir, name+".pid"))
		cmd := exec.Command(args[0], args[1:]...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		birdc[name] = append(prefix, "/usr/sbin/birdc", "-s", ctl)
	}
	start("router", router.Stdout)
	start("director", director.Stdout, "/usr/bin/ip", "netns", "exec", ns)
	state := func() string {
		var b strings.Builder
		for _, name := range []string{"router", "director"} {
			args := append(birdc[name], "show", "protocols", "all")
			r := labtest.Run(t, "", args[0], args[1:]...)
			b.WriteString(name + ":\n" + r.Stdout + r.Stderr)
		}
		return b.String()
	}
	routes := func() string { return labtest.Run(t, "", "/usr/bin/ip", "route", "show", "proto", "bird").Stdout }

	sh(t, "ip -n "+ns+" link add lvs-announce type dummy && ip -n "+ns+" link set lvs-announce up"+
		" && ip -n "+ns+" address add 10.3.0.1/32 dev lvs-announce && ip -n "+ns+" address add 10.4.0.1/24 dev lvs-announce")
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(routes(), "10.3.0.1 via 10.2.0.11 dev r0") {
		if time.Now().After(deadline) {
			t.Fatalf("no route to 10.3.0.1 via the director after 60 s: %q\n%s", routes(), state())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r := routes(); strings.Contains(r, "10.4.0.0/24") {
		t.Errorf("the router took the director's subnet: %q", r)
	}

	sh(t, "ip -n "+ns+" link del lvs-announce")
	deleted := time.Now()
	for strings.Contains(routes(), "10.3.0.1") {
		if time.Since(deleted) > 5*time.Second {
			t.Fatalf("route still there 5 s after the device went: %q\n%s", routes(), state())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("route withdrawn %v after ip link del", time.Since(deleted).Round(10*time.Millisecond))
}
