package vm

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/lvskit/lvskit/lab/internal/wire"
)

// baseFormat changes whenever the builder lays the image out differently, so
// cached bases from an older builder are not reused.
const baseFormat = "lvskit-lab-base-5"

// Base is the cached part of the lab's initramfs: Debian's user space and
// kernel modules, everything that does not depend on the source tree. It is
// an uncompressed cpio archive: the guest reaches /init about a second
// sooner than when its kernel must gunzip the same archive under emulation
// (measured: docs/lab.md), and the host only copies it.
type Base struct {
	Path      string        // the .cpio file
	Kernel    string        // the vmlinuz it was built for
	KVer      string        // its release, e.g. 6.1.0-57-cloud-amd64
	Arch      *Arch         // the guest architecture it was built for
	Cached    bool          // reused, not built now
	BuildTime time.Duration // time spent building (or checking the cache)
	Files     int
}

// Preloaded modules: loaded by the guest's /init in modules.dep order before
// any test runs. IPVS with every scheduler and its helpers, the NAT and
// conntrack pieces the companion tool configures, tunnels, virtual links for
// traffic tests, and what iptables (nft and legacy) needs for
// "-t nat -A POSTROUTING -m ipvs ... -j SNAT/MASQUERADE".
var preloadModules = []string{
	"ip_vs", "ip_vs_rr", "ip_vs_wrr", "ip_vs_lc", "ip_vs_wlc", "ip_vs_lblc",
	"ip_vs_lblcr", "ip_vs_dh", "ip_vs_sh", "ip_vs_sed", "ip_vs_nq", "ip_vs_fo",
	"ip_vs_ovf", "ip_vs_mh", "ip_vs_pe_sip", "ip_vs_ftp",
	"nf_conntrack", "nf_conntrack_ftp", "nf_nat",
	"ipip", "ip6_tunnel", "veth", "dummy", "bridge",
	"nf_tables", "nft_chain_nat", "nft_nat", "nft_compat", "nft_ct",
	"ip_tables", "iptable_nat", "iptable_filter", "iptable_mangle",
	"xt_ipvs", "xt_MASQUERADE", "xt_conntrack", "xt_comment", "xt_tcpudp",
	"xt_nat", "xt_mark", "xt_addrtype", "xt_multiport", "xt_state",
}

// Preloaded when the kernel has them.
var optionalPreloadModules = []string{"fou", "nft_masq", "ip_vs_twos"}

// Directories (under /lib/modules/<kver>/) whose modules are in the image
// but only loaded on demand, by the kernel's request_module (busybox
// modprobe with the image's own modules.dep) or by iptables.
var lazyModuleDirs = []string{
	"kernel/net/netfilter", "kernel/net/ipv4", "kernel/net/ipv6", "kernel/net/bridge",
	"kernel/net/sched", "kernel/net/8021q",
	"kernel/drivers/net/ipvlan", "kernel/drivers/net/vxlan",
}
var lazyModuleFiles = []string{
	"kernel/drivers/net/dummy.ko", "kernel/drivers/net/veth.ko", "kernel/drivers/net/macvlan.ko",
	"kernel/drivers/net/ifb.ko", "kernel/drivers/net/vrf.ko", "kernel/drivers/net/geneve.ko",
	"kernel/drivers/net/tun.ko",
}

// Programs copied from the guest's files (with their shared libraries): the guest
// shell (dash, as /bin/sh: busybox's ash runs its own applets before PATH,
// which would shadow iproute2 and iptables), bash for Debian's
// ipvsadm-save/-restore scripts, iproute2, iptables, the reference
// ipvsadm, BIRD 2 (daemon and both clients) for the routers and
// directors of the ECMP tests, Debian's keepalived 2.2.7, the oracle of
// lvsctl's health checks and keepalived import, tmux and procps' watch,
// which drive and measure lvsctl top, and dpkg with the LSB init
// functions, for the package tests (Debian's ipvsadm, then ours, installed
// with dpkg in a copy of the guest's system).
var hostPrograms = []string{
	"/bin/dash", "/bin/bash",
	"/bin/ip", "/sbin/ip", "/sbin/bridge",
	"/sbin/ipvsadm", "/sbin/ipvsadm-save", "/sbin/ipvsadm-restore",
	"/usr/sbin/xtables-nft-multi", "/usr/sbin/xtables-legacy-multi",
	"/usr/sbin/bird", "/usr/sbin/birdc", "/usr/sbin/birdcl",
	"/usr/sbin/keepalived",
	"/usr/bin/tmux", "/usr/bin/watch",
	"/usr/bin/dpkg", "/usr/bin/dpkg-deb", "/usr/bin/dpkg-query", "/usr/bin/dpkg-split",
	"/usr/bin/dpkg-divert", "/usr/bin/dpkg-trigger", "/usr/bin/dpkg-maintscript-helper",
	"/usr/bin/dpkg-statoverride", "/usr/bin/update-alternatives", "/bin/tar",
	"/usr/lib/lsb/init-functions",
}

// terminfos are the terminal descriptions tmux and watch read (ncurses
// looks in /lib/terminfo): tmux's panes are "screen", its clients the
// others; and glibc's C.UTF-8 character classes, without which tmux does
// not start.
var terminfos = []string{
	"/lib/terminfo/s/screen", "/lib/terminfo/t/tmux", "/lib/terminfo/t/tmux-256color", "/lib/terminfo/x/xterm",
	"/lib/terminfo/x/xterm-256color", "/lib/terminfo/d/dumb", "/lib/terminfo/l/linux",
	"/usr/lib/locale/C.utf8/LC_CTYPE",
}

// findKernel returns the newest Debian cloud kernel image of a's guest
// files and its release.
func findKernel(a *Arch) (vmlinuz, kver string, err error) {
	matches, _ := filepath.Glob(a.hostPath("/boot/vmlinuz-*-" + a.flavour))
	if len(matches) == 0 {
		return "", "", fmt.Errorf("lab: no %s (install linux-image-%s)", a.hostPath("/boot/vmlinuz-*-"+a.flavour), a.flavour)
	}
	sort.Slice(matches, func(i, j int) bool { return versionLess(matches[i], matches[j]) })
	vmlinuz = matches[len(matches)-1]
	kver = strings.TrimPrefix(filepath.Base(vmlinuz), "vmlinuz-")
	f, err := os.Open(vmlinuz)
	if err != nil {
		return "", "", fmt.Errorf("lab: kernel image not readable (run as root): %w", err)
	}
	f.Close()
	if _, err := os.Stat(a.hostPath(filepath.Join("/lib/modules", kver, "modules.dep"))); err != nil {
		return "", "", fmt.Errorf("lab: kernel %s has no modules: %w", kver, err)
	}
	return vmlinuz, kver, nil
}

// versionLess orders kernel file names by their numeric parts (6.1.0-9 <
// 6.1.0-10).
func versionLess(a, b string) bool {
	split := func(s string) []string {
		return strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '-' })
	}
	pa, pb := split(a), split(b)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] == pb[i] {
			continue
		}
		var na, nb int
		_, ea := fmt.Sscanf(pa[i], "%d", &na)
		_, eb := fmt.Sscanf(pb[i], "%d", &nb)
		if ea == nil && eb == nil && na != nb {
			return na < nb
		}
		return pa[i] < pb[i]
	}
	return len(pa) < len(pb)
}

// merged maps a host path to the guest's merged-/usr layout, where /bin,
// /sbin, /lib and /lib64 are symlinks into /usr (as on Debian 12).
func merged(p string) string {
	for _, d := range []string{"/bin/", "/sbin/", "/lib/", "/lib64/"} {
		if strings.HasPrefix(p, d) {
			return "/usr" + p
		}
	}
	return p
}

// manifest collects the base image's entries by guest path.
type manifest map[string]Entry

func (m manifest) add(e Entry) { e.Path = merged(path.Clean(e.Path)); m[e.Path] = e }

// addHostFile adds the guest file p from a's files (a symlink with what it
// points to) and, for ELF files, its shared libraries.
func (m manifest) addHostFile(a *Arch, p string, seen map[string]bool) error {
	fi, err := os.Lstat(a.hostPath(p))
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(a.hostPath(p))
		if err != nil {
			return err
		}
		m.add(Entry{Path: p, Link: target})
		real, err := a.resolve(p)
		if err != nil {
			return fmt.Errorf("lab: %s: %w", p, err)
		}
		return m.addHostFile(a, real, seen)
	}
	m.add(Entry{Path: p, HostPath: a.hostPath(p), Mode: fi.Mode().Perm()})
	if !isELF(a.hostPath(p)) {
		return nil
	}
	libs, err := sharedLibs(a, p, seen)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	for _, lib := range libs {
		real, err := a.resolve(lib)
		if err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		fi, err := os.Stat(a.hostPath(real))
		if err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		m.add(Entry{Path: lib, HostPath: a.hostPath(real), Mode: fi.Mode().Perm()})
	}
	return nil
}

// buildBase returns the base initramfs of a for its newest cloud kernel,
// building it into cacheDir unless a base built from the same inputs is
// there.
func buildBase(cacheDir string, a *Arch, log io.Writer) (*Base, error) {
	start := time.Now()
	vmlinuz, kver, err := findKernel(a)
	if err != nil {
		return nil, err
	}
	m, err := baseManifest(a, kver)
	if err != nil {
		return nil, err
	}
	key, err := m.key(vmlinuz)
	if err != nil {
		return nil, err
	}
	b := &Base{
		Path:   filepath.Join(cacheDir, "base-"+kver+"-"+key[:16]+".cpio"),
		Kernel: vmlinuz,
		KVer:   kver,
		Arch:   a,
		Files:  len(m),
	}
	if _, err := os.Stat(b.Path); err == nil {
		b.Cached = true
		b.BuildTime = time.Since(start)
		return b, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "lab: building base initramfs for %s (%d files)\n", kver, len(m))
	tmp, err := os.CreateTemp(cacheDir, "base-*.tmp")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriterSize(tmp, 1<<20)
	entries := make([]Entry, 0, len(m))
	for _, e := range m {
		entries = append(entries, e)
	}
	if _, err := writeCpio(bw, entries); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("lab: write base: %w", err)
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), b.Path); err != nil {
		return nil, err
	}
	pruneOldBases(cacheDir, b.Path)
	b.BuildTime = time.Since(start)
	fmt.Fprintf(log, "lab: base initramfs built in %.1fs: %s\n", b.BuildTime.Seconds(), b.Path)
	return b, nil
}

// pruneOldBases removes bases for other inputs that nobody used for a day.
func pruneOldBases(dir, keep string) {
	old, _ := filepath.Glob(filepath.Join(dir, "base-*.cpio*"))
	for _, p := range old {
		if fi, err := os.Stat(p); err == nil && p != keep && time.Since(fi.ModTime()) > 24*time.Hour {
			os.Remove(p)
		}
	}
}

// key hashes everything the image is made of: generated contents, and the
// identity (path, size, mtime) of every host file copied.
func (m manifest) key(vmlinuz string) (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, baseFormat)
	fi, err := os.Stat(vmlinuz)
	if err != nil {
		return "", err
	}
	fmt.Fprintln(h, vmlinuz, fi.Size(), fi.ModTime().UnixNano())
	paths := make([]string, 0, len(m))
	for p := range m {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		e := m[p]
		fmt.Fprintf(h, "%s %o %q %v %v %d\n", p, e.Mode, e.Link, e.Dir, e.IsDev, len(e.Data))
		h.Write(e.Data)
		if e.HostPath != "" {
			fi, err := os.Stat(e.HostPath)
			if err != nil {
				return "", fmt.Errorf("lab: %w", err)
			}
			fmt.Fprintln(h, e.HostPath, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func baseManifest(a *Arch, kver string) (manifest, error) {
	m := manifest{}
	for _, d := range []string{"/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib64", "/usr/local/bin",
		"/usr/local/sbin", "/etc", "/etc/lab", "/etc/bird", "/proc", "/sys", "/dev", "/run", "/root", "/opt", "/mnt", "/var", "/src"} {
		m.add(Entry{Path: d, Dir: true, Mode: 0o755})
	}
	m.add(Entry{Path: "/tmp", Dir: true, Mode: 0o777 | fs.ModeSticky})
	// merged /usr, as on Debian 12
	m["/bin"] = Entry{Path: "/bin", Link: "usr/bin"}
	m["/sbin"] = Entry{Path: "/sbin", Link: "usr/sbin"}
	m["/lib"] = Entry{Path: "/lib", Link: "usr/lib"}
	m["/lib64"] = Entry{Path: "/lib64", Link: "usr/lib64"}
	m.add(Entry{Path: "/var/run", Link: "../run"})
	m.add(Entry{Path: "/var/tmp", Link: "../tmp"})
	// the kernel gives /init this console as stdin/stdout/stderr
	m.add(Entry{Path: "/dev/console", IsDev: true, Dev: [2]uint32{5, 1}, Mode: 0o600})

	seen := map[string]bool{}
	if err := addBusybox(a, m, seen); err != nil {
		return nil, err
	}
	programs := append([]string(nil), hostPrograms...)
	xtablesPlugins := "/usr/lib/" + a.triplet + "/xtables"
	plugins, _ := filepath.Glob(filepath.Join(a.hostPath(xtablesPlugins), "*.so"))
	if len(plugins) == 0 {
		return nil, fmt.Errorf("lab: no iptables plugins in %s (install iptables)", a.hostPath(xtablesPlugins))
	}
	for _, p := range plugins {
		programs = append(programs, path.Join(xtablesPlugins, filepath.Base(p)))
	}
	hooks, _ := filepath.Glob(a.hostPath("/usr/lib/lsb/init-functions.d/*"))
	for _, p := range hooks {
		programs = append(programs, "/usr/lib/lsb/init-functions.d/"+filepath.Base(p))
	}
	for _, p := range programs {
		if err := m.addHostFile(a, p, seen); err != nil {
			return nil, err
		}
	}
	// Terminal descriptions and the locale's character classes are the
	// same data on every architecture (and Arch: all packages are not in a
	// foreign architecture's tree): the host's serve every guest.
	for _, p := range terminfos {
		if err := m.addHostFile(arches["amd64"], p, seen); err != nil {
			return nil, err
		}
	}
	m.add(Entry{Path: "/usr/bin/sh", Link: "dash"})
	if err := addXtablesLinks(a, m); err != nil {
		return nil, err
	}
	if err := addEtc(m); err != nil {
		return nil, err
	}
	if err := addModules(a, m, kver); err != nil {
		return nil, err
	}
	return m, nil
}

// addBusybox adds busybox and a link for each applet that no real program
// provides (the real ones are added after and must win on every PATH).
func addBusybox(a *Arch, m manifest, seen map[string]bool) error {
	bb := "/bin/busybox"
	if !a.Foreign() {
		var err error
		if bb, err = exec.LookPath("busybox"); err != nil {
			return fmt.Errorf("lab: busybox not found (install busybox-static)")
		}
	}
	if err := m.addHostFile(a, bb, seen); err != nil {
		return err
	}
	real, _ := a.resolve(bb)
	m.add(Entry{Path: "/usr/bin/busybox", HostPath: a.hostPath(real), Mode: 0o755})
	name, args := a.guestCommand(real, "--list-full")
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return fmt.Errorf("lab: %s %s: %w", name, strings.Join(args, " "), err)
	}
	shadowed := map[string]bool{}
	for _, p := range hostPrograms {
		shadowed[path.Base(p)] = true
	}
	for _, n := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore", "sh", "busybox"} {
		shadowed[n] = true
	}
	for _, a := range strings.Fields(string(out)) {
		if !strings.Contains(a, "/") || shadowed[path.Base(a)] {
			continue
		}
		m.add(Entry{Path: "/" + a, Link: "/usr/bin/busybox"})
	}
	return nil
}

// addXtablesLinks recreates the host's iptables command names, pointing
// straight at the multi-call binaries (Debian's alternatives resolved to
// their default, nft; the -legacy names stay legacy). A foreign guest's
// unpacked packages have no alternatives; the names are the host's (the
// same Debian 12 iptables, which Arm64Packages installs).
func addXtablesLinks(a *Arch, m manifest) error {
	ents, err := os.ReadDir("/usr/sbin")
	if err != nil {
		return err
	}
	n := 0
	for _, e := range ents {
		if e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		real, err := filepath.EvalSymlinks(filepath.Join("/usr/sbin", e.Name()))
		if err != nil {
			continue
		}
		switch filepath.Base(real) {
		case "xtables-nft-multi", "xtables-legacy-multi":
			if _, err := os.Stat(a.hostPath("/usr/sbin/" + filepath.Base(real))); err != nil {
				return fmt.Errorf("lab: the guest has no %s: %w", filepath.Base(real), err)
			}
			m.add(Entry{Path: "/usr/sbin/" + e.Name(), Link: filepath.Base(real)})
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("lab: no iptables commands link to xtables-*-multi in /usr/sbin (install iptables)")
	}
	return nil
}

func addEtc(m manifest) error {
	for _, f := range []string{"/etc/services", "/etc/protocols"} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("lab: %w (install netbase)", err)
		}
		m.add(Entry{Path: f, HostPath: f, Mode: 0o644})
	}
	if _, err := os.Stat("/etc/ethertypes"); err == nil {
		m.add(Entry{Path: "/etc/ethertypes", HostPath: "/etc/ethertypes", Mode: 0o644})
	}
	text := func(p, s string) { m.add(Entry{Path: p, Data: []byte(s), Mode: 0o644}) }
	text("/etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files\nnetworks: files\nprotocols: files\nservices: files\n")
	text("/etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
	text("/etc/group", "root:x:0:\nnogroup:x:65534:\n")
	text("/etc/hostname", "lab\n")
	// The source tree's golden hosts file replaces this one in every run.
	text("/etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	return nil
}

// moduleTree is the parsed modules.dep of a kernel.
type moduleTree struct {
	dir    string              // /lib/modules/<kver>
	byName map[string]string   // module name (underscores) -> relative path
	deps   map[string][]string // relative path -> relative paths it needs
}

func modName(rel string) string {
	base := path.Base(rel)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

func readModuleTree(a *Arch, kver string) (*moduleTree, error) {
	t := &moduleTree{dir: a.hostPath(filepath.Join("/lib/modules", kver)), byName: map[string]string{}, deps: map[string][]string{}}
	f, err := os.Open(filepath.Join(t.dir, "modules.dep"))
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		mod, deps, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		t.byName[modName(mod)] = mod
		t.deps[mod] = strings.Fields(deps)
	}
	return t, sc.Err()
}

// closure adds rel and everything it depends on to set.
func (t *moduleTree) closure(rel string, set map[string]bool) {
	if set[rel] {
		return
	}
	set[rel] = true
	for _, d := range t.deps[rel] {
		t.closure(d, set)
	}
}

// addModules adds the preloaded modules (in the load order the host's
// modprobe resolves from the guest kernel's modules.dep and softdeps, host
// configuration ignored), the on-demand ones, and modules.dep/alias files
// restricted to what the image holds.
func addModules(a *Arch, m manifest, kver string) error {
	t, err := readModuleTree(a, kver)
	if err != nil {
		return err
	}
	var names []string
	for _, n := range preloadModules {
		if _, ok := t.byName[n]; !ok {
			return fmt.Errorf("lab: kernel %s has no module %s", kver, n)
		}
		names = append(names, n)
	}
	for _, n := range optionalPreloadModules {
		if _, ok := t.byName[n]; ok {
			names = append(names, n)
		}
	}
	args := []string{"-C", "/dev/null", "-S", kver, "--show-depends", "-a"}
	if a.Foreign() {
		args = append(args, "-d", a.Root)
	}
	args = append(args, names...)
	out, err := exec.Command("modprobe", args...).Output()
	if err != nil {
		return fmt.Errorf("lab: modprobe --show-depends: %w (install kmod)", err)
	}
	set := map[string]bool{}
	var order strings.Builder
	prefix := t.dir + "/"
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "insmod" {
			continue // "builtin x" and blank lines
		}
		rel := strings.TrimPrefix(f[1], prefix)
		if rel == f[1] || !strings.HasSuffix(rel, ".ko") {
			return fmt.Errorf("lab: unexpected module %s (compressed modules are not supported)", f[1])
		}
		if set[rel] {
			continue
		}
		t.closure(rel, set)
		params := f[2:]
		if modName(rel) == "dummy" {
			params = append(params, "numdummies=0") // no stray dummy0 in the initial namespace
		}
		if strings.HasPrefix(rel, "kernel/arch/") {
			order.WriteString("?") // CPU-specific softdeps; the emulated CPU may lack them
		}
		order.WriteString(strings.Join(append([]string{"/usr/lib/modules/" + kver + "/" + rel}, params...), " ") + "\n")
	}
	m.add(Entry{Path: wire.ModulesPath, Data: []byte(order.String()), Mode: 0o644})

	for _, d := range lazyModuleDirs {
		_ = filepath.WalkDir(filepath.Join(t.dir, d), func(p string, de fs.DirEntry, err error) error {
			if err == nil && !de.IsDir() && strings.HasSuffix(p, ".ko") {
				t.closure(strings.TrimPrefix(p, prefix), set)
			}
			return nil
		})
	}
	for _, f := range lazyModuleFiles {
		if _, ok := t.deps[f]; ok {
			t.closure(f, set)
		}
	}
	rels := make([]string, 0, len(set))
	for rel := range set {
		rels = append(rels, rel)
	}
	sort.Strings(rels)
	var dep strings.Builder
	names2 := map[string]bool{}
	for _, rel := range rels {
		m.add(Entry{Path: "/usr/lib/modules/" + kver + "/" + rel, HostPath: filepath.Join(t.dir, rel), Mode: 0o644})
		fmt.Fprintf(&dep, "%s:", rel)
		for _, d := range t.deps[rel] {
			fmt.Fprintf(&dep, " %s", d)
		}
		dep.WriteString("\n")
		names2[modName(rel)] = true
	}
	gdir := "/usr/lib/modules/" + kver + "/"
	m.add(Entry{Path: gdir + "modules.dep", Data: []byte(dep.String()), Mode: 0o644})
	alias, err := filterAliases(filepath.Join(t.dir, "modules.alias"), names2)
	if err != nil {
		return err
	}
	m.add(Entry{Path: gdir + "modules.alias", Data: alias, Mode: 0o644})
	for _, f := range []string{"modules.softdep", "modules.builtin"} {
		if _, err := os.Stat(filepath.Join(t.dir, f)); err == nil {
			m.add(Entry{Path: gdir + f, HostPath: filepath.Join(t.dir, f), Mode: 0o644})
		}
	}
	return nil
}

// filterAliases keeps the "alias NAME MODULE" lines whose module is in the
// image.
func filterAliases(file string, have map[string]bool) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	var out strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "alias" && have[strings.ReplaceAll(f[2], "-", "_")] {
			out.WriteString(line + "\n")
		}
	}
	return []byte(out.String()), nil
}
