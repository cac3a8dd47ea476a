//go:build lab

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lvskit/lvskit/lab/labtest"
	"golang.org/x/sys/unix"
)

// network is one test's simulated hosts: named network namespaces (so
// lvsprep and ip(8) see them as such) joined by veth pairs to bridges in a
// switch namespace. Commands run in a host's namespace from a thread that
// has entered it (see in), which costs nothing, unlike ip netns exec, whose
// remount of /sys takes a third of a second under TCG. Everything the
// network creates (namespaces, background processes) goes away when the
// test ends.
type network struct {
	t      *testing.T
	prefix string
	hosts  []string
	procs  []*exec.Cmd
	// batches are ip(8) commands per host ("" is the VM) that build
	// queues and build runs, one ip -batch process per host.
	batches map[string][]string
	order   []string
	// diag holds what the helper programs write to stderr; it is printed
	// only if the test fails.
	diag diagLog
}

// diagLog collects the stderr of a network's helper programs (the echo
// servers' reports of connections they dropped, a client's errors), each
// line prefixed with the host and role. A passing test's output is then
// only what the test itself says; a failing one prints it all (see close).
type diagLog struct {
	mu      sync.Mutex
	b       strings.Builder
	writers []*diagWriter
}

// writer returns a writer for one program whose lines get the prefix.
func (d *diagLog) writer(prefix string) io.Writer {
	d.mu.Lock()
	defer d.mu.Unlock()
	w := &diagWriter{d: d, prefix: prefix}
	d.writers = append(d.writers, w)
	return w
}

// String is everything written so far, unfinished lines included.
func (d *diagLog) String() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.b.String()
	for _, w := range d.writers {
		if len(w.partial) > 0 {
			s += w.prefix + string(w.partial) + "\n"
		}
	}
	return s
}

type diagWriter struct {
	d       *diagLog
	prefix  string
	partial []byte
}

func (w *diagWriter) Write(p []byte) (int, error) {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.d.b.WriteString(w.prefix)
		w.d.b.Write(w.partial[:i+1])
		w.partial = w.partial[i+1:]
	}
}

// ipCmd is iproute2's ip (in the lab, busybox applets never shadow it).
var ipCmd = "/usr/bin/ip"

func init() {
	if p, err := exec.LookPath("ip"); err == nil {
		ipCmd = p
	}
}

func newNetwork(t *testing.T, prefix string, hosts ...string) *network {
	t.Helper()
	labtest.Require(t)
	n := &network{t: t, prefix: prefix, batches: map[string][]string{}}
	t.Cleanup(n.close)
	for _, h := range append([]string{"sw"}, hosts...) {
		n.queue("", "netns add "+n.name(h))
		n.hosts = append(n.hosts, h)
		n.queue(h, "link set lo up")
	}
	return n
}

func (n *network) name(host string) string { return n.prefix + "-" + host }

func (n *network) close() {
	for _, p := range n.procs {
		p.Process.Kill()
		p.Wait()
	}
	var b strings.Builder
	for _, h := range slices.Backward(n.hosts) {
		fmt.Fprintf(&b, "netns del %s\n", n.name(h))
	}
	labtest.Run(n.t, b.String(), ipCmd, "-force", "-batch", "-")
	if d := n.diag.String(); d != "" && n.t.Failed() {
		n.t.Logf("the helper programs wrote (shown because the test failed):\n%s", d)
	}
}

func (n *network) queue(host string, cmd string) {
	if _, ok := n.batches[host]; !ok {
		n.order = append(n.order, host)
	}
	n.batches[host] = append(n.batches[host], cmd)
}

// bridge queues a segment: a bridge in the switch namespace.
func (n *network) bridge(name string) {
	n.queue("sw", "link add "+name+" type bridge")
	n.queue("sw", "link set "+name+" up")
}

// plug queues connecting host to the segment with an interface named dev
// holding the given addresses (ADDR/LEN).
func (n *network) plug(host, dev, segment string, addrs ...string) {
	peer := host + "-" + dev
	n.queue("", fmt.Sprintf("link add %s netns %s type veth peer name %s netns %s", dev, n.name(host), peer, n.name("sw")))
	n.queue("sw", "link set "+peer+" master "+segment+" up")
	for _, a := range addrs {
		n.queue(host, "address add "+a+" dev "+dev)
	}
	n.queue(host, "link set "+dev+" up")
}

// build runs the queued commands: the VM's first (it creates the
// namespaces and links), then each host's.
func (n *network) build() {
	n.t.Helper()
	for _, h := range n.order {
		r := n.runIn(h, strings.Join(n.batches[h], "\n")+"\n", ipCmd, "-batch", "-")
		if r.Code != 0 {
			n.t.Fatalf("building the network on %s: %s%s", n.where(h), r.Stdout, r.Stderr)
		}
	}
	n.batches, n.order = map[string][]string{}, nil
}

// in runs f on the calling goroutine's thread moved into host's network
// namespace: processes f starts live there. "" is the VM's namespace.
func (n *network) in(host string, f func()) {
	n.t.Helper()
	if host == "" {
		f()
		return
	}
	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		n.t.Fatal(err)
	}
	target, err := unix.Open(filepath.Join("/run/netns", n.name(host)), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(orig)
		runtime.UnlockOSThread()
		n.t.Fatalf("host %s: %v", host, err)
	}
	defer func() {
		// If going back fails the thread stays locked, and the runtime
		// discards it when the goroutine ends; the test cannot go on.
		err := unix.Setns(orig, unix.CLONE_NEWNET)
		unix.Close(orig)
		if err != nil {
			n.t.Fatalf("leaving host %s: %v", host, err)
		}
		runtime.UnlockOSThread()
	}()
	err = unix.Setns(target, unix.CLONE_NEWNET)
	unix.Close(target)
	if err != nil {
		n.t.Fatalf("entering host %s: %v", host, err)
	}
	f()
}

// runIn runs a program on a host with stdin.
func (n *network) runIn(host, stdin, path string, args ...string) labtest.Result {
	n.t.Helper()
	var r labtest.Result
	n.in(host, func() { r = labtest.Run(n.t, stdin, path, args...) })
	return r
}

// run runs a program on a host.
func (n *network) run(host, path string, args ...string) labtest.Result {
	n.t.Helper()
	return n.runIn(host, "", path, args...)
}

// must runs a program and fails the test unless it exits 0; it returns
// the standard output.
func (n *network) must(host, path string, args ...string) string {
	n.t.Helper()
	r := n.run(host, path, args...)
	if r.Code != 0 {
		n.t.Fatalf("on %s: %s %s: exit %d\nstdout:\n%s\nstderr:\n%s", n.where(host), path, strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

func (n *network) where(host string) string {
	if host == "" {
		return "the VM"
	}
	return host
}

// ipvsadm runs our ipvsadm on a host.
func (n *network) ipvsadm(host string, args ...string) string {
	n.t.Helper()
	return n.must(host, labtest.Ours("ipvsadm"), args...)
}

// lvsprep runs the companion tool on a host.
func (n *network) lvsprep(host string, args ...string) string {
	n.t.Helper()
	return n.must(host, labtest.Ours("lvsprep"), args...)
}

// start runs a role of this binary in the background on a host and waits
// for it to print "ready".
func (n *network) start(host, role string, args ...string) {
	n.t.Helper()
	self, err := os.Executable()
	if err != nil {
		n.t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), RoleEnv+"="+role)
	out, err := cmd.StdoutPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	cmd.Stderr = n.diag.writer(host + " " + role + ": ")
	n.in(host, func() { err = cmd.Start() })
	if err != nil {
		n.t.Fatal(err)
	}
	n.procs = append(n.procs, cmd)
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- line
		io.Copy(io.Discard, out)
	}()
	select {
	case line := <-ready:
		if strings.TrimSpace(line) != "ready" {
			n.t.Fatalf("%s on %s did not start: %q", role, host, line)
		}
	case <-time.After(30 * time.Second):
		n.t.Fatalf("%s on %s: not ready after 30s", role, host)
	}
}

// role runs a role of this binary to completion on a host and decodes its
// JSON output into v.
func (n *network) role(host, role string, v any, args ...string) {
	n.t.Helper()
	self, err := os.Executable()
	if err != nil {
		n.t.Fatal(err)
	}
	var r labtest.Result
	n.in(host, func() { r = labtest.Sh(n.t, shellJoin(append([]string{self}, args...)), RoleEnv+"="+role) })
	if r.Code != 0 {
		n.t.Fatalf("%s %s on %s: exit %d\n%s%s", role, strings.Join(args, " "), host, r.Code, r.Stdout, r.Stderr)
	}
	if err := json.Unmarshal([]byte(r.Stdout), v); err != nil {
		n.t.Fatalf("%s on %s: %v in %q", role, host, err, r.Stdout)
	}
}

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// get makes count requests from host to addr, a new connection each.
func (n *network) get(host, addr string, count int) tally {
	n.t.Helper()
	var t tally
	n.role(host, "get", &t, addr, strconv.Itoa(count))
	return t
}

// keepAlive is a client process holding one HTTP connection open.
type keepAlive struct {
	t     *testing.T
	in    io.WriteCloser
	out   *bufio.Scanner
	Local string // the client's address:port of the connection
}

// keepAlive opens one connection from host to addr, in a process that
// stays until the test ends.
func (n *network) keepAlive(host, addr string) *keepAlive {
	n.t.Helper()
	self, err := os.Executable()
	if err != nil {
		n.t.Fatal(err)
	}
	cmd := exec.Command(self, addr)
	cmd.Env = append(os.Environ(), RoleEnv+"=keepalive")
	in, err := cmd.StdinPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	cmd.Stderr = n.diag.writer(host + " keepalive: ")
	n.in(host, func() { err = cmd.Start() })
	if err != nil {
		n.t.Fatal(err)
	}
	n.procs = append(n.procs, cmd)
	k := &keepAlive{t: n.t, in: in, out: bufio.NewScanner(out)}
	var hello map[string]string
	k.read(&hello)
	k.Local = hello["local"]
	if k.Local == "" {
		n.t.Fatalf("keepalive to %s: %v", addr, hello)
	}
	return k
}

func (k *keepAlive) read(v any) {
	k.t.Helper()
	if !k.out.Scan() {
		k.t.Fatalf("keepalive client ended: %v", k.out.Err())
	}
	if err := json.Unmarshal(k.out.Bytes(), v); err != nil {
		k.t.Fatalf("keepalive client: %v in %q", err, k.out.Text())
	}
}

// get sends one request on the open connection.
func (k *keepAlive) get() (httpAnswer, error) {
	k.t.Helper()
	if _, err := io.WriteString(k.in, "get\n"); err != nil {
		k.t.Fatal(err)
	}
	var raw map[string]string
	k.read(&raw)
	if e := raw["error"]; e != "" {
		return httpAnswer{}, fmt.Errorf("%s", e)
	}
	b, _ := json.Marshal(raw)
	var a httpAnswer
	json.Unmarshal(b, &a)
	return a, nil
}

// count appends a rule without target to a chain: it only counts the
// packets it matches (read them with counters).
func (n *network) count(host, table, chain string, match ...string) {
	n.t.Helper()
	n.must(host, "/usr/sbin/iptables", append([]string{"-t", table, "-A", chain}, match...)...)
}

var counterLine = regexp.MustCompile(`^\s*(\d+)\s+\d+\s`)

// counters reads the packet counters of a chain's rules, in order.
func (n *network) counters(host, table, chain string) []int {
	n.t.Helper()
	out := n.must(host, "/usr/sbin/iptables", "-t", table, "-L", chain, "-v", "-n", "-x")
	var cs []int
	for _, l := range strings.Split(out, "\n") {
		if m := counterLine.FindStringSubmatch(l); m != nil {
			c, _ := strconv.Atoi(m[1])
			cs = append(cs, c)
		}
	}
	return cs
}

// snapshot is what lvsprep may change on a host, as text: addresses,
// links, routes, the nat table, the sysctls the profiles touch (read from
// the host's /proc/sys/net by a thread inside it) and lvsprep's own state.
func (n *network) snapshot(host string) string {
	n.t.Helper()
	var b strings.Builder
	r := n.runIn(host, "address show\nlink show\nroute show\n", ipCmd, "-o", "-batch", "-")
	if r.Code != 0 {
		n.t.Fatalf("snapshot of %s: %s", host, r.Stderr)
	}
	for _, l := range strings.Split(r.Stdout, "\n") {
		// Link-local IPv6 addresses go through duplicate address
		// detection by themselves, lifetimes count down, and link-layer
		// addresses are not lvsprep's business.
		if strings.Contains(l, "inet6 fe80:") {
			continue
		}
		l, _, _ = strings.Cut(l, "valid_lft")
		l, _, _ = strings.Cut(l, "link/")
		fmt.Fprintln(&b, l)
	}
	b.WriteString(n.must(host, "/usr/sbin/iptables", "-t", "nat", "-S"))
	n.in(host, func() {
		var files []string
		for _, pat := range []string{"ipv4/ip_forward", "ipv4/vs/conntrack", "ipv4/conf/*/arp_ignore", "ipv4/conf/*/arp_announce", "ipv4/conf/*/rp_filter"} {
			m, _ := filepath.Glob("/proc/sys/net/" + pat)
			files = append(files, m...)
		}
		for _, f := range files {
			v, err := os.ReadFile(f)
			if err != nil {
				n.t.Errorf("snapshot of %s: %v", host, err)
			}
			fmt.Fprintf(&b, "%s=%s", f, v)
		}
	})
	b.WriteString(n.lvsprep(host, "status"))
	return b.String()
}

// within reports whether got is want give or take tol.
func within(got, want, tol int) bool { return got >= want-tol && got <= want+tol }

func itoa(i int) string { return strconv.Itoa(i) }
