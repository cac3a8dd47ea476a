//go:build lab

package lvsprep

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/lab/labtest"
)

// ecmpState is what director ecmp touches, beyond hostState: the IPVS
// sysctls and the raw table.
func ecmpState(t *testing.T) string {
	var b strings.Builder
	b.WriteString(hostState(t))
	b.WriteString(labtest.Run(t, "", "/usr/sbin/iptables", "-t", "raw", "-S").Stdout)
	files, _ := filepath.Glob("/proc/sys/net/ipv4/vs/*")
	for _, f := range files {
		v, _ := os.ReadFile(f)
		b.WriteString(f + "=" + string(v))
	}
	return b.String()
}

// TestLabDirectorECMP applies director ecmp on the real kernel, checks it
// against services made with our ipvsadm, and undoes it exactly.
func TestLabDirectorECMP(t *testing.T) {
	labtest.Netns(t)
	sh(t, "ip link add eth0 type dummy && ip link set eth0 up && ip address add 10.0.0.1/24 dev eth0 && modprobe ip_vs")
	dir := t.TempDir()
	before := ecmpState(t)
	lvsprep := func(args ...string) labtest.Result {
		return labtest.Run(t, "", lvsprepBin, append([]string{"--state-dir", dir}, args...)...)
	}
	r := lvsprep("director", "ecmp", "--vip", "192.0.2.10")
	if r.Code != 0 || !strings.Contains(r.Stdout, "changed   sysctl -w net.ipv4.vs.schedule_icmp=1") ||
		!strings.Contains(r.Stdout, "changed   iptables -t raw -A PREROUTING -d 192.0.2.10/32 -j CT --notrack") {
		t.Fatalf("apply: %+v", r)
	}
	for f, want := range map[string]string{"vs/sloppy_tcp": "1", "vs/sloppy_sctp": "1", "vs/schedule_icmp": "1", "vs/conntrack": "0",
		"conf/all/arp_ignore": "1", "conf/all/arp_announce": "2", "conf/all/accept_local": "1"} {
		if v, _ := os.ReadFile("/proc/sys/net/ipv4/" + f); strings.TrimSpace(string(v)) != want {
			t.Errorf("%s = %q, want %s", f, v, want)
		}
	}
	if r := lvsprep("director", "ecmp", "--vip", "192.0.2.10"); r.Code != 0 || !strings.Contains(r.Stdout, "0 changed, 12 already in place") {
		t.Errorf("second apply: %+v", r)
	}
	ipvsadm := labtest.Ours("ipvsadm")
	check := func() labtest.Result { return lvsprep("check", "director", "ecmp", "--vip", "192.0.2.10") }
	if r := check(); r.Code != 1 || !strings.Contains(r.Stdout, "| missing | a service on 192.0.2.10 ") {
		t.Errorf("check without services: %+v", r)
	}
	sh(t, ipvsadm+" -A -t 192.0.2.10:80 -s mh -b mh-port && "+ipvsadm+" -a -t 192.0.2.10:80 -r 10.0.0.2 -g && "+
		ipvsadm+" -a -t 192.0.2.10:80 -r 10.0.0.3 -i")
	if r := check(); r.Code != 0 || !strings.Contains(r.Stdout, "mh, mh-port, 2 of 2 real servers by DR or TUN") {
		t.Errorf("check with an mh service: %+v", r)
	}
	sh(t, ipvsadm+" -A -u 192.0.2.10:53 -s rr && "+ipvsadm+" -A -t 192.0.2.10:443 -s mh && "+ipvsadm+" -a -t 192.0.2.10:443 -r 10.0.0.2 -m")
	r = check()
	for _, w := range []string{"service -u 192.0.2.10:53", "| scheduler rr ", "| mh without mh-port; 10.0.0.2:443 by NAT ",
		"ipvsadm -E -u 192.0.2.10:53 -s mh -b mh-port", "ipvsadm -e -t 192.0.2.10:443 -r 10.0.0.2:443 -g"} {
		if r.Code != 1 || !strings.Contains(r.Stdout, w) {
			t.Errorf("check with bad services lacks %q (exit %d):\n%s", w, r.Code, r.Stdout)
		}
	}
	sh(t, ipvsadm+" -C")
	if r := lvsprep("director", "ecmp", "--vip", "192.0.2.10", "--undo"); r.Code != 0 {
		t.Fatalf("undo: %+v", r)
	}
	if after := ecmpState(t); after != before {
		t.Errorf("undo did not restore the host:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
