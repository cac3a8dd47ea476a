//go:build lab

package labtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// netnsID names the network namespace of the calling thread.
func netnsID(t *testing.T) string {
	t.Helper()
	id, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestNetnsIsolatesLinksAndIPVS(t *testing.T) {
	Require(t)
	initial, err := os.Readlink("/proc/1/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	var first string
	t.Run("first", func(t *testing.T) {
		Netns(t)
		first = netnsID(t)
		if first == initial {
			t.Fatalf("still in the initial namespace %s", initial)
		}
		if r := Run(t, "", "/usr/bin/ip", "link", "add", "labtest0", "type", "dummy"); r.Code != 0 {
			t.Fatalf("ip link add: %+v", r)
		}
		if r := Run(t, "", RefIpvsadm, "-A", "-t", "10.9.9.9:80"); r.Code != 0 {
			t.Fatalf("ipvsadm -A: %+v", r)
		}
		// Children started from this goroutine share its namespace.
		if r := Run(t, "", "/usr/bin/ip", "link", "show", "labtest0"); r.Code != 0 {
			t.Fatalf("the dummy link is not visible to a second child: %+v", r)
		}
		if r := Run(t, "", RefIpvsadm, "-Ln"); !strings.Contains(r.Stdout, "10.9.9.9:80") {
			t.Fatalf("the service is not visible to a second child:\n%s", r.Stdout)
		}
		if r := Sh(t, "readlink /proc/self/ns/net"); strings.TrimSpace(r.Stdout) != first {
			t.Fatalf("sh runs in %q, the test in %q", r.Stdout, first)
		}
	})
	t.Run("second", func(t *testing.T) {
		Netns(t)
		if id := netnsID(t); id == first || id == initial {
			t.Fatalf("second namespace %s is not fresh (first %s, initial %s)", id, first, initial)
		}
		if r := Run(t, "", "/usr/bin/ip", "link", "show", "labtest0"); r.Code == 0 {
			t.Fatalf("the first test's dummy link leaked into the second:\n%s", r.Stdout)
		}
		r := Run(t, "", RefIpvsadm, "-Ln")
		if r.Code != 0 || strings.Contains(r.Stdout, "10.9.9.9") {
			t.Fatalf("the first test's service leaked into the second: %+v", r)
		}
	})
	// Back in the initial namespace: nothing of either test is there.
	if r := Run(t, "", "/usr/bin/ip", "link", "show", "labtest0"); r.Code == 0 {
		t.Fatalf("the dummy link leaked into the initial namespace:\n%s", r.Stdout)
	}
	if r := Run(t, "", RefIpvsadm, "-Ln"); strings.Contains(r.Stdout, "10.9.9.9") {
		t.Fatalf("the service leaked into the initial namespace:\n%s", r.Stdout)
	}
}

func TestNetnsHasLoopbackUp(t *testing.T) {
	Netns(t)
	r := Run(t, "", "/usr/bin/ip", "-o", "link", "show", "lo")
	if r.Code != 0 || !strings.Contains(r.Stdout, "LOWER_UP") {
		t.Fatalf("lo is not up: %+v", r)
	}
	// The kernel refuses destinations while lo is down; with it up a
	// masquerading real server is accepted.
	if r := Run(t, "", RefIpvsadm, "-A", "-t", "10.0.0.1:80"); r.Code != 0 {
		t.Fatalf("ipvsadm -A: %+v", r)
	}
	if r := Run(t, "", RefIpvsadm, "-a", "-t", "10.0.0.1:80", "-r", "192.168.1.1:80", "-m"); r.Code != 0 {
		t.Fatalf("ipvsadm -a: %+v", r)
	}
}

func TestReferenceIpvsadmHeader(t *testing.T) {
	Netns(t)
	r := Run(t, "", RefIpvsadm, "-Ln")
	want := "IP Virtual Server version 1.2.1 (size=4096)\n" +
		"Prot LocalAddress:Port Scheduler Flags\n" +
		"  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n"
	if r.Code != 0 || r.Stdout != want || r.Stderr != "" {
		t.Fatalf("ipvsadm -Ln = %+v, want stdout\n%s", r, want)
	}
}

func TestRunUsesBaseNameAsArgv0(t *testing.T) {
	Require(t)
	r := Run(t, "from stdin", "/bin/sh", "-c", `echo "$0"; cat`)
	if r.Stdout != "sh\nfrom stdin" || r.Code != 0 {
		t.Fatalf("got %+v", r)
	}
	r = Run(t, "", "/bin/sh", "-c", "echo oops >&2; exit 7")
	if r.Code != 7 || r.Stderr != "oops\n" {
		t.Fatalf("got %+v", r)
	}
	r = Sh(t, `echo "$LABTEST_X"; kill -TERM $$`, "LABTEST_X=42")
	if r.Stdout != "42\n" || r.Code != 128+15 {
		t.Fatalf("got %+v", r)
	}
}

func TestRefSaveAndRestoreScripts(t *testing.T) {
	Netns(t)
	rules := "-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r 192.168.1.1:80 -m -w 1\n"
	if r := Run(t, rules, RefIpvsadmRestore); r.Code != 0 {
		t.Fatalf("ipvsadm-restore: %+v", r)
	}
	r := Run(t, "", RefIpvsadmSave, "-n")
	if r.Code != 0 || r.Stdout != rules {
		t.Fatalf("ipvsadm-save -n = %+v, want\n%s", r, rules)
	}
}

func TestIptablesNATWithIPVSMatch(t *testing.T) {
	for _, ipt := range []string{"/usr/sbin/iptables", "/usr/sbin/iptables-legacy"} {
		t.Run(filepath.Base(ipt), func(t *testing.T) {
			Netns(t)
			for _, args := range [][]string{
				{"-t", "nat", "-A", "POSTROUTING", "-m", "ipvs", "--vaddr", "10.0.0.1/32", "--vport", "80", "-j", "SNAT", "--to-source", "192.168.1.254"},
				{"-t", "nat", "-A", "POSTROUTING", "-o", "lo", "-m", "comment", "--comment", "lvskit", "-j", "MASQUERADE"},
			} {
				if r := Run(t, "", ipt, args...); r.Code != 0 {
					t.Fatalf("%s %s: %+v", ipt, strings.Join(args, " "), r)
				}
			}
			r := Run(t, "", ipt+"-save", "-t", "nat")
			for _, want := range []string{
				"-A POSTROUTING -m ipvs --vaddr 10.0.0.1 --vport 80 -j SNAT --to-source 192.168.1.254",
				`-A POSTROUTING -o lo -m comment --comment lvskit -j MASQUERADE`,
			} {
				if !strings.Contains(r.Stdout, want) {
					t.Errorf("%s-save lacks %q:\n%s%s", ipt, want, r.Stdout, r.Stderr)
				}
			}
		})
	}
}

func TestModulesLoaded(t *testing.T) {
	Require(t)
	b, err := os.ReadFile("/proc/modules")
	if err != nil {
		t.Fatal(err)
	}
	loaded := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			loaded[f[0]] = true
		}
	}
	for _, m := range []string{
		"ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_lc", "ip_vs_wlc", "ip_vs_lblc", "ip_vs_lblcr",
		"ip_vs_dh", "ip_vs_sh", "ip_vs_sed", "ip_vs_nq", "ip_vs_fo", "ip_vs_ovf", "ip_vs_mh",
		"ip_vs_pe_sip", "ip_vs_ftp", "nf_conntrack", "nf_nat", "ipip", "veth", "dummy",
		"nf_tables", "xt_ipvs", "iptable_nat",
	} {
		if !loaded[m] {
			t.Errorf("module %s is not loaded", m)
		}
	}
}

func TestModulesLoadOnDemand(t *testing.T) {
	Netns(t)
	// xt_statistic is in the image but not preloaded: iptables makes the
	// kernel request it, which runs busybox modprobe on the image's
	// modules.dep.
	r := Run(t, "", "/usr/sbin/iptables-legacy", "-A", "INPUT", "-m", "statistic", "--mode", "nth", "--every", "2", "--packet", "0", "-j", "ACCEPT")
	if r.Code != 0 {
		t.Fatalf("iptables -m statistic: %+v", r)
	}
	if _, err := os.Stat("/sys/module/xt_statistic"); err != nil {
		t.Fatalf("xt_statistic was not loaded on demand: %v", err)
	}
	// by alias, the way nf_tables asks for its expressions
	if r := Run(t, "", "/sbin/modprobe", "nft-expr-numgen"); r.Code != 0 {
		t.Fatalf("modprobe nft-expr-numgen: %+v", r)
	}
	if _, err := os.Stat("/sys/module/nft_numgen"); err != nil {
		t.Fatalf("modprobe by alias did not load nft_numgen: %v", err)
	}
}

func TestLabLayout(t *testing.T) {
	Require(t)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if wd != SrcDir+"/lab/labtest" {
		t.Errorf("working directory %s, want %s/lab/labtest", wd, SrcDir)
	}
	hosts, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(SrcDir + "/testscripts/golden/hosts")
	if err != nil {
		t.Fatal(err)
	}
	if string(hosts) != string(golden) {
		t.Errorf("/etc/hosts is not testscripts/golden/hosts")
	}
	for _, dir := range strings.Split(os.Getenv("PATH"), ":") {
		if dir == OurBinDir {
			t.Errorf("PATH %s has our bin dir: tests must choose ipvsadm explicitly", os.Getenv("PATH"))
		}
	}
	if fi, err := os.Stat(OurBinDir); err != nil || !fi.IsDir() {
		t.Errorf("%s: %v", OurBinDir, err)
	}
	for _, p := range []string{RefIpvsadm, RefIpvsadmSave, RefIpvsadmRestore, "/usr/bin/bash", "/usr/bin/ip", "/usr/sbin/bridge"} {
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
	if r := Sh(t, "readlink -f /bin/sh"); strings.TrimSpace(r.Stdout) != "/usr/bin/dash" {
		t.Errorf("/bin/sh is %q, want dash", r.Stdout)
	}
}

// TestKeepalivedChecker: Debian's keepalived 2.2.7 runs in the lab, its
// checker alone in a test's namespace, and builds the IPVS table of its
// configuration: the oracle of lvsctl's health checks.
func TestKeepalivedChecker(t *testing.T) {
	Netns(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "keepalived.conf")
	if err := os.WriteFile(conf, []byte(`global_defs {
    router_id lab
}
virtual_server 10.9.9.9 80 {
    delay_loop 1
    lb_algo wrr
    lb_kind NAT
    protocol TCP
    real_server 192.168.77.1 80 {
        weight 3
    }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/usr/sbin/keepalived", "--check", "--dont-fork", "--log-console", "--use-file", conf,
		"--pid", filepath.Join(dir, "keepalived.pid"), "--checkers_pid", filepath.Join(dir, "checkers.pid"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	want := "-A -t 10.9.9.9:80 -s wrr\n-a -t 10.9.9.9:80 -r 192.168.77.1:80 -m -w 3\n"
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := Run(t, "", RefIpvsadm, "-Sn")
		if r.Stdout == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("keepalived's table: %q, want %q; keepalived printed:\n%s", r.Stdout, want, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNetnsProcNetIsTheMainThreads pins why tests read their namespace's
// tables under /proc/thread-self/net: /proc/net is /proc/self/net, which
// shows the namespace of the process's main thread, not of a test's
// thread that Netns moved. A test reading /proc/net/ip_vs_conn saw its own
// connections only when its goroutine happened to run on the main thread.
func TestNetnsProcNetIsTheMainThreads(t *testing.T) {
	Require(t)
	// A locked goroutine on a thread other than the main one: when the
	// first lands on the main thread, the second cannot.
	done := make(chan struct{})
	var moved func()
	moved = func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			go moved()
			<-done // the main thread stays held until the other is done
			runtime.UnlockOSThread()
			return
		}
		// Never unlocked: the thread dies with the goroutine, in its namespace.
		defer close(done)
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		if r := Run(t, "", "/usr/bin/ip", "link", "add", "labtest1", "type", "dummy"); r.Code != 0 {
			t.Errorf("ip link add: %+v", r)
			return
		}
		own, err := os.ReadFile("/proc/thread-self/net/dev")
		if err != nil {
			t.Error(err)
			return
		}
		main, err := os.ReadFile("/proc/net/dev")
		if err != nil {
			t.Error(err)
			return
		}
		if !strings.Contains(string(own), "labtest1:") {
			t.Errorf("/proc/thread-self/net/dev lacks the thread's own link:\n%s", own)
		}
		if strings.Contains(string(main), "labtest1:") {
			t.Errorf("/proc/net/dev shows the moved thread's namespace:\n%s", main)
		}
	}
	go moved()
	<-done
}
