package testscripts

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseCorpus(t *testing.T) {
	in := "# comment\n\nipvsadm -Ln\n@same ipvsadm -L\n  # indented comment\n@timing ipvsadm -L -c\n@setup ip link add d0 type dummy\n"
	got, err := parseCorpus("x.txt", strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []corpusLine{
		{File: "x.txt", Num: 3, Kind: plain, Cmd: "ipvsadm -Ln"},
		{File: "x.txt", Num: 4, Kind: same, Cmd: "ipvsadm -L"},
		{File: "x.txt", Num: 6, Kind: timing, Cmd: "ipvsadm -L -c"},
		{File: "x.txt", Num: 7, Kind: setup, Cmd: "ip link add d0 type dummy"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if s := got[1].String(); s != "x.txt:4: @same ipvsadm -L" {
		t.Errorf("String() = %q", s)
	}
	for _, bad := range []string{"@sam ipvsadm -L\n", "@same\n", "@setup   \n", "ipvsadm -L\r\n"} {
		if _, err := parseCorpus("bad.txt", strings.NewReader(bad)); err == nil {
			t.Errorf("parseCorpus(%q) accepted it", bad)
		}
	}
}

func TestCountInvocations(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		want int
	}{
		{"ipvsadm -Ln", 1},
		{"/usr/sbin/ipvsadm -h | head -3", 1},
		{"./sbin/ipvsadm -h", 1},
		{"ipvsadm-save -n; ipvsadm-restore < x", 2},
		{"ipvsadm -A -t 1.1.1.1:80; ipvsadm -a -t 1.1.1.1:80 -r 2.2.2.2 && ipvsadm -Ln || echo no", 3},
		{`ipvsadm -C; printf "ipvsadm -A -t 1.1.1.1:80\n-A ipvsadm -t x\n" | ipvsadm -R; echo rc=$?`, 2},
		{`printf -- "-A -t 1.1.1.1:80" | ipvsadm -R`, 1},
		{`su nobody -s /bin/sh -c "ipvsadm -L -n"; echo rc=$?`, 1},
		{`su nobody -s /bin/sh -c "ipvsadm -h | head -2"`, 1},
		{`bash -c 'ipvsadm -Ln; ipvsadm -S'`, 2},
		{"POSIXLY_CORRECT=1 ipvsadm -L foo -n; echo rc=$?", 1},
		{"for i in 5 3 9 1; do ipvsadm -a -t 10.0.0.2:80 -r 10.1.1.$i -m; done; ipvsadm -Ln", 2},
		{"ipvsadm -S -n > s.txt; grep -v -- \"-f -1\" s.txt | ipvsadm -R 2>&1; echo ipvsadm", 2},
		{"ipvsadm -L -n --rate --thresholds | head -3", 1},
		{"(ipvsadm -Ln)", 1},
		{"timeout 5 ipvsadm -Ln", 1},
		{"echo ipvsadm; cat ipvsadm.txt; ipvsadmx -L", 0},
		{"sleep 3; ipvsadm -L -n --rate", 1},
		{"ipvsadm -A -t 10.0.0.7:80\\ ; echo", 1},
		{"x=$(ipvsadm -Sn); echo \"$x\"", 1},
	} {
		if got := countInvocations(c.cmd); got != c.want {
			t.Errorf("countInvocations(%q) = %d, want %d", c.cmd, got, c.want)
		}
	}
}

func TestSimpleArgv(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		want []string
	}{
		{"ipvsadm -A -t 10.0.0.1:80 -s rr", []string{"ipvsadm", "-A", "-t", "10.0.0.1:80", "-s", "rr"}},
		{"ipvsadm  -L   -n", []string{"ipvsadm", "-L", "-n"}},
		{"./sbin/ipvsadm --start-daemon=master --syncid=5 -p=5", []string{"./sbin/ipvsadm", "--start-daemon=master", "--syncid=5", "-p=5"}},
		{"ipvsadm -a -f 1 -r 1.1.1.1:99 -g -b flag-1,flag-2", []string{"ipvsadm", "-a", "-f", "1", "-r", "1.1.1.1:99", "-g", "-b", "flag-1,flag-2"}},
		{"ipvsadm -A -t [2001:db8::1]:80", nil},
		{"ipvsadm -Ln; ipvsadm -S", nil},
		{`ipvsadm -p " 5"`, nil},
		{"ipvsadm -A -t 1.1.1.1:80 # x", nil},
		{"POSIXLY_CORRECT=1 ipvsadm -L", nil},
		{"ipvsadm -S > x", nil},
		{"ipvsadm -L -t *", nil},
		{"", nil},
	} {
		got, ok := simpleArgv(c.cmd)
		if ok != (c.want != nil) || !reflect.DeepEqual(got, c.want) {
			t.Errorf("simpleArgv(%q) = %q, %v; want %q", c.cmd, got, ok, c.want)
		}
	}
}

func TestMaskTiming(t *testing.T) {
	conn := "IPVS connection entries\n" +
		"pro expire state       source             virtual            destination\n" +
		"UDP 04:54  UDP         10.10.0.1:59256    10.10.0.1:53       10.30.0.2:5353\n" +
		"TCP 120:00 ESTABLISHED 10.10.0.1:49344    10.10.0.1:80       10.30.0.3:80\n"
	wantConn := "IPVS connection entries\n" +
		"pro expire state       source             virtual            destination\n" +
		"UDP ##:## UDP         10.10.0.1:59256    10.10.0.1:53       10.30.0.2:5353\n" +
		"TCP ##:## ESTABLISHED 10.10.0.1:49344    10.10.0.1:80       10.30.0.3:80\n"
	if got := maskTiming(conn); got != wantConn {
		t.Errorf("conn mask:\n%s", lineDiff(wantConn, got))
	}
	// Same values at another time: the same after masking.
	other := strings.Replace(strings.Replace(conn, "04:54 ", "04:53 ", 1), "120:00", "119:59", 1)
	if maskTiming(other) != wantConn {
		t.Errorf("conn mask depends on the countdown:\n%s", lineDiff(wantConn, maskTiming(other)))
	}

	rate := "IP Virtual Server version 1.2.1 (size=4096)\n" +
		rateTitle + "\n" + rateTitle2 + "\n" +
		"UDP  10.10.0.1:53                        0     1555        0  101115K        0\n" +
		"  -> 10.30.0.2:5353                      0     1555        0  101115K        0\n" +
		"FWM  1                                   0        0        0        0        0\n" +
		"IP Virtual Server version 1.2.1 (size=4096)\n" +
		"Prot LocalAddress:Port               Conns   InPkts  OutPkts  InBytes OutBytes\n" +
		rateTitle2 + "\n" +
		"UDP  10.10.0.1:53                     2000     2000        0  120000K        0\n"
	wantRate := "IP Virtual Server version 1.2.1 (size=4096)\n" +
		rateTitle + "\n" + rateTitle2 + "\n" +
		"UDP  10.10.0.1:53 # # # # #\n" +
		"  -> 10.30.0.2:5353 # # # # #\n" +
		"FWM  1 # # # # #\n" +
		"IP Virtual Server version 1.2.1 (size=4096)\n" +
		"Prot LocalAddress:Port               Conns   InPkts  OutPkts  InBytes OutBytes\n" +
		rateTitle2 + "\n" +
		"UDP  10.10.0.1:53                     2000     2000        0  120000K        0\n"
	if got := maskTiming(rate); got != wantRate {
		t.Errorf("rate mask (stats must stay):\n%s", lineDiff(wantRate, got))
	}
	// Nothing outside -c and --rate output is touched.
	plainOut := "TCP  10.0.0.1:80 wlc\n  -> 1.1.1.1:80                   Route   1      0          0         \nUDP 04:54 x\n"
	if got := maskTiming(plainOut); got != plainOut {
		t.Errorf("masked a listing without timing columns:\n%s", lineDiff(plainOut, got))
	}
}

func TestParseSnapshot(t *testing.T) {
	// The same table as two namespaces dump it: services in different
	// orders, connection counts different.
	a := "-A -t 10.0.0.1:80 -s wlc\n-a -t 10.0.0.1:80 -r 1.1.1.1:80 -g -w 1\n-A -u 10.0.0.2:53 -s rr\n" +
		"Timeout (tcp tcpfin udp): 900 120 300\n" +
		"master sync daemon (mcast=lo, syncid=0, maxlen=1472, group=224.0.0.81, port=8848, ttl=1)\n" +
		"IP Virtual Server version 1.2.1 (size=4096)\n" +
		"Prot LocalAddress:Port            Uthreshold Lthreshold ActiveConn InActConn \n" +
		"  -> RemoteAddress:Port\n" +
		"TCP  10.0.0.1:80 wlc\n" +
		"  -> 1.1.1.1:80                   10         5          1          0         \n" +
		"UDP  10.0.0.2:53 rr\n"
	b := "-A -u 10.0.0.2:53 -s rr\n-A -t 10.0.0.1:80 -s wlc\n-a -t 10.0.0.1:80 -r 1.1.1.1:80 -g -w 1\n" +
		"Timeout (tcp tcpfin udp): 900 120 300\n" +
		"master sync daemon (mcast=lo, syncid=0, maxlen=1472, group=224.0.0.81, port=8848, ttl=1)\n" +
		"IP Virtual Server version 1.2.1 (size=4096)\n" +
		"Prot LocalAddress:Port            Uthreshold Lthreshold ActiveConn InActConn \n" +
		"  -> RemoteAddress:Port\n" +
		"UDP  10.0.0.2:53 rr\n" +
		"TCP  10.0.0.1:80 wlc\n" +
		"  -> 1.1.1.1:80                   10         5          0          0         \n"
	sa, sb := parseSnapshot(a, "", 0), parseSnapshot(b, "", 0)
	if d := diffSnapshots(sa, sb); d != "" {
		t.Errorf("equal tables reported as different:\n%s", d)
	}
	if sa.Timeout != "Timeout (tcp tcpfin udp): 900 120 300\n" || !strings.HasPrefix(sa.Daemon, "master sync daemon") {
		t.Errorf("parts misclassified: %+v", sa)
	}
	// A threshold that differs, a destination under another service, a
	// timeout, a daemon: each is a difference.
	for _, change := range [][2]string{
		{"10         5  ", "10         6  "},
		{"Timeout (tcp tcpfin udp): 900", "Timeout (tcp tcpfin udp): 901"},
		{"syncid=0", "syncid=1"},
		{"-a -t 10.0.0.1:80 -r 1.1.1.1:80 -g -w 1", "-a -t 10.0.0.1:80 -r 1.1.1.1:80 -g -w 2"},
	} {
		c := strings.Replace(b, change[0], change[1], 1)
		if c == b {
			t.Fatalf("test bug: %q not in the sample", change[0])
		}
		if diffSnapshots(sa, parseSnapshot(c, "", 0)) == "" {
			t.Errorf("change %q -> %q not reported", change[0], change[1])
		}
	}
	moved := "UDP  10.0.0.2:53 rr\n  -> 1.1.1.1:80                   10         5          0          0         \nTCP  10.0.0.1:80 wlc\n"
	if diffSnapshots(parseSnapshot("IP Virtual Server version 1.2.1 (size=4096)\n"+moved, "", 0),
		parseSnapshot("IP Virtual Server version 1.2.1 (size=4096)\nTCP  10.0.0.1:80 wlc\n  -> 1.1.1.1:80                   10         5          0          0         \nUDP  10.0.0.2:53 rr\n", "", 0)) == "" {
		t.Errorf("a destination that moved to another service is not reported")
	}
	if diffSnapshots(sa, parseSnapshot(a, "x\n", 0)) == "" || diffSnapshots(sa, parseSnapshot(a, "", 1)) == "" {
		t.Errorf("stderr or exit status of the snapshot not compared")
	}
}

func TestLineDiff(t *testing.T) {
	d := lineDiff("a\nb\nc\n", "a\nB\nc\nd")
	want := "    \"a\"\n   -\"b\"\n   +\"B\"\n    \"c\"\n   +\"d \\\\ no newline at end\"\n"
	if d != want {
		t.Errorf("lineDiff:\n%s\nwant:\n%s", d, want)
	}
	long := strings.Repeat("x\n", 10)
	d = lineDiff(long+"y\n", long+"z\n")
	if !strings.HasPrefix(d, "    ...\n") || strings.Count(d, "\"x\"") != 2 {
		t.Errorf("context not elided:\n%s", d)
	}
	if lineDiff("same\n", "same\n") != "    ...\n" {
		t.Errorf("identical inputs: %q", lineDiff("same\n", "same\n"))
	}
}

// TestCorpus checks the corpus on the host: every file parses, every
// compared line invokes one of the programs under test, no setup line does,
// and the corpus keeps its promised size.
func TestCorpus(t *testing.T) {
	paths, err := filepath.Glob("differential/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	total := 0
	var perFile strings.Builder
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := parseCorpus(filepath.Base(p), f)
		f.Close()
		if err != nil {
			t.Error(err)
			continue
		}
		if len(lines) == 0 {
			t.Errorf("%s: no commands", p)
		}
		fileTotal := 0
		for _, l := range lines {
			n := countInvocations(l.Cmd)
			switch {
			case l.compared() && n == 0:
				t.Errorf("%v: compared line without an ipvsadm invocation (make it @setup or drop it)", l)
			case !l.compared():
				// Setup may prepare tables with the reference, named by
				// path so that both namespaces get the same preparation.
				for _, p := range invokedPrograms(l.Cmd) {
					if p != "/usr/sbin/ipvsadm" {
						t.Errorf("%v: setup line runs %s; its output would not be compared (prepare with /usr/sbin/ipvsadm, or make it a compared line)", l, p)
					}
				}
			}
			if l.compared() {
				fileTotal += n
			}
		}
		fmt.Fprintf(&perFile, "%-28s %5d lines %5d invocations\n", filepath.Base(p), len(lines), fileTotal)
		total += fileTotal
	}
	t.Logf("%d files, %d invocations\n%s", len(paths), total, perFile.String())
	if total < minInvocations {
		t.Errorf("the corpus has %d invocations; it must keep at least %d", total, minInvocations)
	}
}
