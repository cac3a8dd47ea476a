//go:build lab

package lvsctl

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/lab/labtest"
)

func lvsctlBin() string { return labtest.Ours("lvsctl") }

// TestLvsctlListJSONRoundTrip: on a populated table (IPv4, IPv6, fwmark,
// persistence, mh flags, tunnels), the output of lvsctl list --json fed
// back to lvsctl plan and apply changes nothing: Debian's ipvsadm -Sn and
// the counters read the same before and after.
func TestLvsctlListJSONRoundTrip(t *testing.T) {
	labtest.Netns(t)
	t.Setenv("LVSCTL_JOURNAL_DIR", filepath.Join(t.TempDir(), "journal"))
	var b strings.Builder
	for i := range 40 {
		vip := fmt.Sprintf("-t 10.1.0.%d:80", 1+i)
		designator, settings := vip, []string{"-s wrr", "-s mh -b mh-fallback,mh-port", "", "-s wlc -p 600 -M 255.255.255.0", "-s rr"}[i%5]
		switch i % 5 {
		case 2:
			designator, settings = fmt.Sprintf("-u 10.1.0.%d:80", 1+i), "-s sh -b sh-port -o"
		case 4:
			designator = fmt.Sprintf("-f %d", 100+i)
		}
		fmt.Fprintf(&b, "-A %s %s\n", designator, settings)
		for j := range 4 {
			opt := []string{"-m", "-g", "-i --tun-type gue --tun-port 6080 --tun-csum", "-i"}[j]
			fmt.Fprintf(&b, "-a %s -r 192.168.%d.%d:80 %s -w %d -x 100 -y 10\n", designator, i, 10+j, opt, j)
		}
	}
	b.WriteString("-A -t [2001:db8::1]:443 -s mh -p 300 -M 64\n-a -t [2001:db8::1]:443 -r [2001:db8:1::2]:443 -g -w 2\n")
	b.WriteString("-A -f 7 -6 -s rr\n-a -f 7 -6 -r [2001:db8:1::3]:0 -g -w 1\n")
	if r := labtest.Run(t, b.String(), labtest.RefIpvsadm, "-R"); r.Code != 0 {
		t.Fatalf("Debian's ipvsadm -R: %+v", r)
	}
	before := labtest.Run(t, "", labtest.RefIpvsadm, "-Sn").Stdout
	thresholds := labtest.Run(t, "", labtest.RefIpvsadm, "-Ln", "--thresholds").Stdout
	list := labtest.Run(t, "", lvsctlBin(), "list", "--json", "--stats")
	if list.Code != 0 || !strings.Contains(list.Stdout, `"fwmark": 7`) || !strings.Contains(list.Stdout, `"upper_threshold": 100`) {
		t.Fatalf("lvsctl list --json: %+v", list)
	}
	if p := labtest.Run(t, list.Stdout, lvsctlBin(), "plan", "-"); p.Code != exitOK {
		t.Fatalf("lvsctl plan of list --json: %+v", p)
	}
	a := labtest.Run(t, list.Stdout, lvsctlBin(), "apply", "-")
	if a.Code != exitOK || !strings.Contains(a.Stdout, "in sync, no changes") {
		t.Fatalf("lvsctl apply of list --json: %+v", a)
	}
	if after := labtest.Run(t, "", labtest.RefIpvsadm, "-Sn").Stdout; after != before {
		t.Errorf("the round trip changed the table:\n%s\nbefore:\n%s", after, before)
	}
	if after := labtest.Run(t, "", labtest.RefIpvsadm, "-Ln", "--thresholds").Stdout; after != thresholds {
		t.Errorf("the round trip changed thresholds:\n%s", after)
	}
	t.Logf("%d services, %d real servers: list --json -> apply made no change", strings.Count(before, "-A "), strings.Count(before, "-a "))
}

// mhFlows sends one SYN from each local port in ports to vip:80 and returns
// the real server IPVS chose for each, from the connection table of the
// thread's namespace (/proc/net would show the main thread's).
func mhFlows(t *testing.T, src, vip string, ports []int) map[int]string {
	t.Helper()
	srcIP, dstIP := netip.MustParseAddr(src).As4(), netip.MustParseAddr(vip).As4()
	for _, p := range ports {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: p, Addr: srcIP}); err != nil {
			unix.Close(fd)
			t.Fatalf("bind %s:%d: %v", src, p, err)
		}
		if err := unix.Connect(fd, &unix.SockaddrInet4{Port: 80, Addr: dstIP}); err != nil && err != unix.EINPROGRESS {
			unix.Close(fd)
			t.Fatalf("connect from %d: %v", p, err)
		}
		unix.Close(fd)
	}
	f, err := os.Open("/proc/thread-self/net/ip_vs_conn")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vipHex := fmt.Sprintf("%02X%02X%02X%02X", dstIP[0], dstIP[1], dstIP[2], dstIP[3])
	want := map[int]bool{}
	for _, p := range ports {
		want[p] = true
	}
	out := map[int]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 8 || fl[0] != "TCP" || fl[3] != vipHex {
			continue
		}
		var cport int
		fmt.Sscanf(fl[2], "%X", &cport)
		if want[cport] {
			a, _ := procAddr([]byte(fl[5]))
			out[cport] = a.String()
		}
	}
	if len(out) != len(ports) {
		t.Fatalf("%d of %d flows to %s found in the connection table", len(out), len(ports), vip)
	}
	return out
}

// TestLvsctlMHOrder proves on the kernel whether the order in which real
// servers were added changes which server mh picks for a flow, and that
// after lvsctl apply of one file (canonical order) two services built in
// different orders pick the same server for every flow. Two layouts: 5
// servers of weight 1, and 10 servers of weights 1 to 10.
func TestLvsctlMHOrder(t *testing.T) {
	labtest.Netns(t)
	t.Setenv("LVSCTL_JOURNAL_DIR", filepath.Join(t.TempDir(), "journal"))
	if r := labtest.Sh(t, "ip link add dummy0 type dummy && ip link set dummy0 up && ip addr add 10.9.0.1/24 dev dummy0"); r.Code != 0 {
		t.Fatalf("dummy0: %+v", r)
	}
	port := 20000
	for _, layout := range []struct {
		servers int
		weights bool
	}{{5, false}, {10, true}} {
		weight := func(i int) int {
			if layout.weights {
				return i + 1
			}
			return 1
		}
		var b strings.Builder
		b.WriteString("-A -t 10.9.0.100:80 -s mh -b mh-port\n-A -t 10.9.0.101:80 -s mh -b mh-port\n")
		for i := range layout.servers {
			j := layout.servers - 1 - i
			fmt.Fprintf(&b, "-a -t 10.9.0.100:80 -r 10.9.0.%d:80 -g -w %d\n", 11+i, weight(i))
			fmt.Fprintf(&b, "-a -t 10.9.0.101:80 -r 10.9.0.%d:80 -g -w %d\n", 11+j, weight(j))
		}
		if r := labtest.Run(t, "", labtest.RefIpvsadm, "-C"); r.Code != 0 {
			t.Fatalf("ipvsadm -C: %+v", r)
		}
		if r := labtest.Run(t, b.String(), labtest.RefIpvsadm, "-R"); r.Code != 0 {
			t.Fatalf("ipvsadm -R: %+v", r)
		}
		mismatches := func() int {
			ports := make([]int, 1000)
			for i := range ports {
				ports[i] = port + i
			}
			port += 1000
			a, c := mhFlows(t, "10.9.0.1", "10.9.0.100", ports), mhFlows(t, "10.9.0.1", "10.9.0.101", ports)
			n := 0
			for _, p := range ports {
				if a[p] != c[p] {
					n++
				}
			}
			return n
		}
		before := mismatches()
		var file strings.Builder
		file.WriteString("-A -t 10.9.0.100:80 -s mh -b mh-port\n-A -t 10.9.0.101:80 -s mh -b mh-port\n")
		for i := range layout.servers {
			fmt.Fprintf(&file, "-a -t 10.9.0.100:80 -r 10.9.0.%d:80 -g -w %d\n-a -t 10.9.0.101:80 -r 10.9.0.%d:80 -g -w %d\n", 11+i, weight(i), 11+i, weight(i))
		}
		a := labtest.Run(t, file.String(), lvsctlBin(), "apply", "--drain-timeout", "0", "-")
		if a.Code != exitOK {
			t.Fatalf("lvsctl apply: %+v", a)
		}
		after := mismatches()
		t.Logf("mh, %d real servers (weights %s), 1,000 flows: added in opposite orders, %d flows pick a different server; after lvsctl apply of one file, %d (re-adds made: %d)",
			layout.servers, map[bool]string{false: "all 1", true: "1 to 10"}[layout.weights], before, after, strings.Count(a.Stdout, "re-add-dest"))
		if after != 0 {
			t.Errorf("after lvsctl apply, %d of 1000 flows still pick different servers", after)
		}
	}
}
