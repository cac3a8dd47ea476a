package packaging_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lvskit/lvskit/packaging/hosttool"
)

// The programs the package ships, and where (Debian's ipvsadm puts its
// three in /sbin; lvsprep is new and goes to /usr/sbin).
var programs = map[string]string{
	"ipvsadm":         "/sbin/ipvsadm",
	"ipvsadm-save":    "/sbin/ipvsadm-save",
	"ipvsadm-restore": "/sbin/ipvsadm-restore",
	"lvsprep":         "/usr/sbin/lvsprep",
	"lvsctl":          "/usr/sbin/lvsctl",
}

// shared is the directory holding the fresh clone and what is built in it;
// removed by TestMain.
var shared string

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != "" {
		os.RemoveAll(shared)
	}
	os.Exit(code)
}

// command runs name with args in dir and returns its combined output; a
// failure is returned as an error carrying that output.
func command(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

var (
	cloneOnce sync.Once
	cloneDir  string
	cloneErr  error
	// makeMu serialises make runs in the clone: deb and install both build bin/.
	makeMu sync.Mutex
)

// freshClone returns a clone of this repository with the work tree's
// uncommitted changes (tracked and untracked, not ignored files) copied over
// it: on CI, where the tree is a fresh clone, that is exactly the committed
// state; during development it is what `make deb` would package. Nothing
// built or cached in the work tree (bin/, dist/, .cache/) is carried over.
func freshClone(t *testing.T) string {
	t.Helper()
	cloneOnce.Do(func() {
		var err error
		if shared, err = os.MkdirTemp("", "lvskit-packaging-"); err != nil {
			cloneErr = err
			return
		}
		top, err := command(".", nil, "git", "rev-parse", "--show-toplevel")
		if err != nil {
			cloneErr = err
			return
		}
		top = strings.TrimSpace(top)
		dir := filepath.Join(shared, "src")
		if _, err := command(".", nil, "git", "clone", "-q", "--local", top, dir); err != nil {
			cloneErr = err
			return
		}
		cloneErr = overlayWorkTree(top, dir)
		cloneDir = dir
	})
	if cloneErr != nil {
		t.Fatalf("fresh clone: %v", cloneErr)
	}
	return cloneDir
}

// overlayWorkTree copies the work tree's non-ignored files of top over the
// clone dir and removes the files deleted or moved away in the work tree.
func overlayWorkTree(top, dir string) error {
	list, err := command(top, nil, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return err
	}
	cloned, err := command(dir, nil, "git", "ls-files", "-z")
	if err != nil {
		return err
	}
	kept := map[string]bool{}
	for rel := range strings.SplitSeq(list, "\x00") {
		kept[rel] = true
	}
	for rel := range strings.SplitSeq(cloned, "\x00") {
		if rel != "" && !kept[rel] {
			os.Remove(filepath.Join(dir, rel))
		}
	}
	for rel := range strings.SplitSeq(list, "\x00") {
		if rel == "" {
			continue
		}
		src, dst := filepath.Join(top, rel), filepath.Join(dir, rel)
		fi, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			os.Remove(dst)
			continue
		} else if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err != nil {
				return err
			}
			os.Remove(dst)
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(src)
			if err != nil {
				return err
			}
			os.Remove(dst)
			if err := os.WriteFile(dst, b, fi.Mode().Perm()); err != nil {
				return err
			}
		}
	}
	return nil
}

// buildsWithMake skips, under -short, a test that builds in the fresh
// clone with make (a release, a package or an install); runs without
// -short, CI's among them, build and test.
func buildsWithMake(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds with make in a fresh clone: run without -short")
	}
}

// cleanMakeEnv keeps an outer make (make test runs go test) from passing
// its flags and jobserver to the make the tests run in the clone.
var cleanMakeEnv = []string{"MAKEFLAGS=", "MFLAGS=", "MAKELEVEL="}

var (
	debOnce sync.Once
	debFile string
	debErr  error
)

// builtDeb returns the .deb that `make deb` builds in the fresh clone.
func builtDeb(t *testing.T) string {
	t.Helper()
	clone := freshClone(t)
	debOnce.Do(func() {
		makeMu.Lock()
		defer makeMu.Unlock()
		dist := filepath.Join(shared, "dist")
		// Its own PKG_BINDIR: make release in the same clone rebuilds the
		// default one with another version.
		if _, debErr = command(clone, cleanMakeEnv, "make", "deb", "DISTDIR="+dist, "PKG_BINDIR="+filepath.Join(shared, "deb-bin")); debErr != nil {
			return
		}
		debs, _ := filepath.Glob(filepath.Join(dist, "*.deb"))
		if len(debs) != 1 {
			debErr = fmt.Errorf("make deb left %d .deb files in %s, want 1", len(debs), dist)
			return
		}
		debFile = debs[0]
	})
	if debErr != nil {
		t.Fatalf("make deb: %v", debErr)
	}
	return debFile
}

func TestDebControl(t *testing.T) {
	buildsWithMake(t)
	hosttool.Require(t, "dpkg-deb", "dpkg")
	deb := builtDeb(t)
	out, err := command(".", nil, "dpkg-deb", "--show", "--showformat",
		"${Package}|${Architecture}|${Section}|${Priority}|${Conflicts}|${Replaces}|${Provides}|${Depends}|${Recommends}|${Maintainer}|${Version}", deb)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(out, "|")
	goarch, _ := command(".", nil, "go", "env", "GOARCH")
	// lvsprep runs iptables and modprobe (kmod), the units' save check ip.
	want := []string{"lvskit", strings.TrimSpace(goarch), "admin", "optional", "ipvsadm", "ipvsadm", "ipvsadm (= 1:1.31)", "",
		"iptables, kmod, iproute2", "lvskit developers <lvskit-dev@lists.lvskit.org>"}
	if !slices.Equal(f[:10], want) {
		t.Errorf("control fields %q, want %q", f[:10], want)
	}
	// A Debian version (starts with a digit, only the allowed characters);
	// the clone has no tags, so it is a snapshot version.
	if !regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`).MatchString(f[10]) {
		t.Errorf("version %q is not a valid native Debian version", f[10])
	}
	if filepath.Base(deb) != "lvskit_"+f[10]+"_"+f[1]+".deb" {
		t.Errorf("file name %s does not match version %s", filepath.Base(deb), f[10])
	}
}

// debEntry is one line of `dpkg-deb --contents`.
type debEntry struct{ mode, path, link string }

func debContents(t *testing.T, deb string) map[string]debEntry {
	t.Helper()
	out, err := command(".", nil, "dpkg-deb", "--contents", deb)
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]debEntry{}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) < 6 {
			t.Fatalf("unexpected dpkg-deb line %q", line)
		}
		e := debEntry{mode: f[0], path: strings.TrimSuffix(strings.TrimPrefix(f[5], "."), "/")}
		if len(f) == 8 && f[6] == "->" {
			e.link = f[7]
		}
		if f[1] != "root/root" {
			t.Errorf("%s is owned by %s, want root/root", e.path, f[1])
		}
		entries[e.path] = e
	}
	return entries
}

func TestDebContents(t *testing.T) {
	buildsWithMake(t)
	hosttool.Require(t, "dpkg-deb", "dpkg")
	deb := builtDeb(t)
	entries := debContents(t, deb)
	want := map[string]string{
		"/usr/libexec/lvskit/ipvsadm-service":                       "-rwxr-xr-x",
		"/etc/default/ipvsadm":                                      "-rw-r--r--",
		"/etc/ipvsadm.rules":                                        "-rw-r--r--",
		"/lib/systemd/system/ipvsadm.service":                       "-rw-r--r--",
		"/lib/systemd/system/ipvsadm-sync.service":                  "-rw-r--r--",
		"/lib/systemd/system/lvsctl.service":                        "-rw-r--r--",
		"/usr/share/bash-completion/completions/ipvsadm":            "-rw-r--r--",
		"/usr/share/bash-completion/completions/ipvsadm-save":       "-rw-r--r--",
		"/usr/share/bash-completion/completions/ipvsadm-restore":    "-rw-r--r--",
		"/usr/share/bash-completion/completions/lvsprep":            "-rw-r--r--",
		"/usr/share/bash-completion/completions/lvsctl":             "-rw-r--r--",
		"/usr/share/zsh/vendor-completions/_ipvsadm":                "-rw-r--r--",
		"/usr/share/zsh/vendor-completions/_lvsprep":                "-rw-r--r--",
		"/usr/share/zsh/vendor-completions/_lvsctl":                 "-rw-r--r--",
		"/usr/share/fish/vendor_completions.d/ipvsadm.fish":         "-rw-r--r--",
		"/usr/share/fish/vendor_completions.d/ipvsadm-save.fish":    "-rw-r--r--",
		"/usr/share/fish/vendor_completions.d/ipvsadm-restore.fish": "-rw-r--r--",
		"/usr/share/fish/vendor_completions.d/lvsprep.fish":         "-rw-r--r--",
		"/usr/share/fish/vendor_completions.d/lvsctl.fish":          "-rw-r--r--",
		"/usr/share/doc/lvskit/copyright":                           "-rw-r--r--",
		"/usr/share/doc/lvskit/changelog.gz":                        "-rw-r--r--",
		"/usr/share/lintian/overrides/lvskit":                       "-rw-r--r--",
	}
	for _, p := range programs {
		want[p] = "-rwxr-xr-x"
	}
	for _, d := range userDocs {
		want["/usr/share/doc/lvskit/"+d] = "-rw-r--r--"
	}
	pages, _ := filepath.Glob("../man/*.8")
	if len(pages) < 4 {
		t.Fatalf("found only %d manual pages in ../man", len(pages))
	}
	for _, p := range pages {
		want["/usr/share/man/man8/"+filepath.Base(p)+".gz"] = "-rw-r--r--"
	}
	for p, mode := range want {
		if e, ok := entries[p]; !ok {
			t.Errorf("the package lacks %s", p)
		} else if e.mode != mode {
			t.Errorf("%s has mode %s, want %s", p, e.mode, mode)
		}
	}
	for p, e := range entries {
		if _, ok := want[p]; !ok && !strings.HasPrefix(e.mode, "d") {
			t.Errorf("unexpected file %s in the package", p)
		}
	}

	// Control area: conffiles and maintainer scripts.
	ctl := t.TempDir()
	if _, err := command(".", nil, "dpkg-deb", "--control", deb, ctl); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ctl, "conffiles")); string(b) != "/etc/default/ipvsadm\n/etc/ipvsadm.rules\n" {
		t.Errorf("conffiles = %q", b)
	}
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		got, err := os.ReadFile(filepath.Join(ctl, s))
		if err != nil {
			t.Errorf("no %s: %v", s, err)
			continue
		}
		if src, _ := os.ReadFile(filepath.Join("scripts", s)); !bytes.Equal(got, src) {
			t.Errorf("%s in the package differs from scripts/%s", s, s)
		}
	}

	// The gzipped pages are this tree's pages, the changelog names this version.
	data := t.TempDir()
	if _, err := command(".", nil, "dpkg-deb", "--extract", deb, data); err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		src, _ := os.ReadFile(p)
		if got := gunzip(t, filepath.Join(data, "usr/share/man/man8", filepath.Base(p)+".gz")); !bytes.Equal(got, src) {
			t.Errorf("packaged %s differs from the source", filepath.Base(p))
		}
	}
	for _, d := range userDocs {
		src, _ := os.ReadFile(userDocSource(d))
		if got, err := os.ReadFile(filepath.Join(data, "usr/share/doc/lvskit", d)); err != nil || !bytes.Equal(got, src) {
			t.Errorf("packaged /usr/share/doc/lvskit/%s differs from the source (%v)", d, err)
		}
	}
	version, _ := command(".", nil, "dpkg-deb", "--show", "--showformat", "${Version}", deb)
	if first, _, _ := strings.Cut(string(gunzip(t, filepath.Join(data, "usr/share/doc/lvskit/changelog.gz"))), "\n"); first != "lvskit ("+version+") unstable; urgency=medium" {
		t.Errorf("changelog starts with %q, want version %s", first, version)
	}
}

func gunzip(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}

// TestLintian: lintian reports no error on the package (warnings and
// informational tags are logged; overridden tags carry a justification in
// lintian-overrides).
func TestLintian(t *testing.T) {
	buildsWithMake(t)
	t.Parallel()
	lintian := hosttool.Require(t, "lintian", "lintian")
	deb := builtDeb(t)
	// (--show-overrides would make lintian 2.116 count the overridden tags
	// for --fail-on; lintian-overrides carries the justification.)
	cmd := exec.Command(lintian, "--fail-on", "error", "--display-info", deb)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("lintian:\n%s", stdout.String())
	for line := range strings.Lines(stdout.String()) {
		if strings.HasPrefix(line, "E: ") {
			t.Errorf("lintian error: %s", strings.TrimSpace(line))
		}
	}
	if err != nil {
		t.Fatalf("lintian: %v\n%s", err, stderr.String())
	}
}

// throwawayRoot makes an empty system root that dpkg can install into: the
// dpkg database, busybox as /bin/sh and the usual tools for the maintainer
// scripts (dpkg runs them chrooted into the root), and /dev/null.
func throwawayRoot(t *testing.T) string {
	t.Helper()
	busybox := hosttool.RequireFile(t, "/bin/busybox", "busybox-static")
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers", "bin", "dev", "usr/sbin", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"var/lib/dpkg/status", "var/lib/dpkg/available"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin/busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := command(".", nil, "chroot", root, "/bin/busybox", "--install", "-s", "/bin"); err != nil {
		t.Fatal(err)
	}
	if _, err := command(".", nil, "mknod", "-m", "666", filepath.Join(root, "dev/null"), "c", "1", "3"); err != nil {
		t.Fatal(err)
	}
	return root
}

// dpkgRoot runs dpkg on the throw-away root and fails on any warning or
// error it prints.
func dpkgRoot(t *testing.T, root string, args ...string) string {
	t.Helper()
	out, err := command(".", nil, "dpkg", append([]string{"--root=" + root}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`(?i)warning|error|can't|not found`).MatchString(out) {
		t.Fatalf("dpkg %q complained:\n%s", args, out)
	}
	return out
}

// result is what one program run produced.
type result struct {
	stdout, stderr string
	status         int
}

// runAs runs path with argv[0] set to name (so that messages naming the
// program are comparable) and returns its output and status.
func runAs(t *testing.T, path, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Args[0] = name
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	status := 0
	if errors.As(err, &ee) {
		status = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return result{stdout.String(), stderr.String(), status}
}

// debianIpvsadm returns the path of Debian's own ipvsadm on this host (the
// reference); `make deps` installs the package.
func debianIpvsadm(t *testing.T) string {
	t.Helper()
	hosttool.RequirePackage(t, "ipvsadm")
	owner, err := command(".", nil, "dpkg-query", "--search", "/sbin/ipvsadm")
	if err != nil || !strings.HasPrefix(owner, "ipvsadm: ") {
		t.Fatalf("/sbin/ipvsadm does not belong to Debian's ipvsadm package (%s)", strings.TrimSpace(owner))
	}
	return "/sbin/ipvsadm"
}

// TestDebInstallsIntoThrowawayRoot installs the package into an empty root
// with dpkg (running its maintainer scripts there), runs what it installed
// and compares ipvsadm with Debian's on this host (both open the kernel's
// IPVS interface before anything else, so on a host without IPVS both fail
// the same way; in the lab VM the help text itself is compared), then
// removes and purges it.
func TestDebInstallsIntoThrowawayRoot(t *testing.T) {
	buildsWithMake(t)
	t.Parallel()
	hosttool.Require(t, "dpkg", "dpkg")
	deb := builtDeb(t)
	root := throwawayRoot(t)
	out := dpkgRoot(t, root, "--install", deb)
	if !strings.Contains(out, "Setting up lvskit") {
		t.Fatalf("dpkg --install did not configure lvskit:\n%s", out)
	}
	if st, _ := command(".", nil, "dpkg-query", "--root="+root, "--show", "--showformat", "${Status}", "lvskit"); st != "install ok installed" {
		t.Fatalf("lvskit status %q after installation", st)
	}
	for name, p := range programs {
		built, err := os.ReadFile(filepath.Join(shared, "deb-bin", name))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(root, p)); err != nil || !bytes.Equal(got, built) {
			t.Errorf("%s in the root is not the %s that make deb built (%v)", p, name, err)
		}
	}

	// ipvsadm as installed against Debian's, same argv[0], same environment.
	ref := debianIpvsadm(t)
	ours := filepath.Join(root, "sbin/ipvsadm")
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-v"}, {}, {"-L", "-n"}, {"--bogus"}} {
		want := runAs(t, ref, "ipvsadm", args...)
		got := runAs(t, ours, "ipvsadm", args...)
		if got != want {
			t.Errorf("ipvsadm %q:\nours:   %+v\nDebian: %+v", args, got, want)
		}
		if len(args) == 1 && args[0] == "-h" {
			t.Logf("ipvsadm -h here (both): status %d, stdout %d bytes, stderr %q", got.status, len(got.stdout), got.stderr)
		}
	}

	// Inside the root (chrooted): programs that need no kernel support.
	chroot := func(args ...string) result {
		return runAs(t, "/usr/sbin/chroot", "chroot", append([]string{root}, args...)...)
	}
	debSave := runAs(t, "/usr/sbin/ipvsadm-save", "/usr/sbin/ipvsadm-save", "-x")
	if got := chroot("/sbin/ipvsadm-save", "-x"); got != debSave || got.status != 1 {
		t.Errorf("ipvsadm-save -x in the root: %+v, Debian's: %+v", got, debSave)
	}
	if got := chroot("/usr/sbin/lvsprep", "--help"); got.status != 0 || !strings.Contains(got.stdout, "Usage: lvsprep") {
		t.Errorf("lvsprep --help in the root: %+v", got)
	}
	if got := chroot("/usr/sbin/lvsctl", "--help"); got.status != 0 || !strings.Contains(got.stdout, "Usage: lvsctl") {
		t.Errorf("lvsctl --help in the root: %+v", got)
	}
	if got := chroot("/usr/libexec/lvskit/ipvsadm-service", "sync-start"); got.status != 0 || !strings.Contains(got.stdout, `no sync daemon configured (DAEMON="none" in /etc/default/ipvsadm)`) {
		t.Errorf("ipvsadm-service sync-start with the shipped defaults: %+v", got)
	}
	if got := chroot("/usr/libexec/lvskit/ipvsadm-service", "start"); got.status != 0 || !strings.Contains(got.stdout, "AUTO is not") {
		t.Errorf("ipvsadm-service start with the shipped defaults: %+v", got)
	}

	// Remove keeps the conffiles, purge removes them.
	dpkgRoot(t, root, "--remove", "lvskit")
	if _, err := os.Stat(filepath.Join(root, "sbin/ipvsadm")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("/sbin/ipvsadm after remove: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/default/ipvsadm")); err != nil {
		t.Errorf("/etc/default/ipvsadm after remove: %v", err)
	}
	dpkgRoot(t, root, "--purge", "lvskit")
	for _, f := range []string{"etc/default/ipvsadm", "etc/ipvsadm.rules", "usr/share/man/man8/ipvsadm.8.gz"} {
		if _, err := os.Stat(filepath.Join(root, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("/%s after purge: %v", f, err)
		}
	}
}

// repackDebianIpvsadm rebuilds the installed Debian ipvsadm package from the
// files and control data dpkg recorded (like dpkg-repack), so the test needs
// no network to get it.
func repackDebianIpvsadm(t *testing.T) string {
	t.Helper()
	debianIpvsadm(t)
	w := t.TempDir()
	pkg := filepath.Join(w, "pkg")
	if err := os.MkdirAll(filepath.Join(pkg, "DEBIAN"), 0o755); err != nil {
		t.Fatal(err)
	}
	list, err := os.ReadFile("/var/lib/dpkg/info/ipvsadm.list")
	if err != nil {
		t.Fatal(err)
	}
	for p := range strings.Lines(string(list)) {
		p = strings.TrimSpace(p)
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(pkg, p)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	status, err := command(".", nil, "dpkg-query", "--status", "ipvsadm")
	if err != nil {
		t.Fatal(err)
	}
	var control strings.Builder
	skip := false
	for line := range strings.Lines(status) {
		if strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
			if !skip {
				control.WriteString(line)
			}
			continue
		}
		field, _, _ := strings.Cut(line, ":")
		skip = field == "Status" || field == "Conffiles" || field == "Installed-Size"
		if !skip {
			control.WriteString(line)
		}
	}
	if err := os.WriteFile(filepath.Join(pkg, "DEBIAN/control"), []byte(control.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"postinst", "prerm", "postrm", "conffiles", "md5sums"} {
		b, err := os.ReadFile("/var/lib/dpkg/info/ipvsadm." + s)
		if err != nil {
			continue
		}
		mode := os.FileMode(0o644)
		if s != "conffiles" && s != "md5sums" {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(pkg, "DEBIAN", s), b, mode); err != nil {
			t.Fatal(err)
		}
	}
	deb := filepath.Join(w, "ipvsadm.deb")
	if _, err := command(".", nil, "dpkg-deb", "--root-owner-group", "--build", pkg, deb); err != nil {
		t.Fatal(err)
	}
	return deb
}

// TestDebReplacesDebianIpvsadm installs Debian's ipvsadm into a throw-away
// root, then the package: dpkg must remove ipvsadm in its favour and hand
// over the programs, manual pages and conffiles at the same paths.
func TestDebReplacesDebianIpvsadm(t *testing.T) {
	buildsWithMake(t)
	t.Parallel()
	hosttool.Require(t, "dpkg-deb", "dpkg")
	deb := builtDeb(t)
	debian := repackDebianIpvsadm(t)
	root := throwawayRoot(t)
	// Debian's maintainer scripts call the SysV tools; the root has none.
	for _, s := range []string{"update-rc.d", "invoke-rc.d"} {
		if err := os.WriteFile(filepath.Join(root, "usr/sbin", s), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Its libraries are not in the root either: only its files matter here.
	if out, err := command(".", nil, "dpkg", "--root="+root, "--force-depends", "--install", debian); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(out, "Setting up ipvsadm") {
		t.Fatalf("Debian's ipvsadm did not install:\n%s", out)
	}
	out := dpkgRoot(t, root, "--install", deb)
	if !strings.Contains(out, "will remove ipvsadm in favour of lvskit") || !strings.Contains(out, "Removing ipvsadm") {
		t.Errorf("dpkg did not replace ipvsadm:\n%s", out)
	}
	// dpkg leaves ipvsadm's selection alone ("i" or "r") but removes it:
	// only its conffiles remain ("c").
	st, _ := command(".", nil, "dpkg-query", "--root="+root, "--show", "--showformat", "${db:Status-Abbrev}|", "ipvsadm", "lvskit")
	if !regexp.MustCompile(`^[ir]c \|ii \|$`).MatchString(st) {
		t.Errorf("package states %q, want ipvsadm removed with its conffiles left (ic or rc) and lvskit installed (ii)", st)
	}
	for _, p := range []string{"/sbin/ipvsadm", "/sbin/ipvsadm-save", "/sbin/ipvsadm-restore", "/usr/share/man/man8/ipvsadm.8.gz", "/etc/default/ipvsadm", "/etc/ipvsadm.rules"} {
		if owner, err := command(".", nil, "dpkg-query", "--root="+root, "--search", p); err != nil || owner != "lvskit: "+p+"\n" {
			t.Errorf("%s belongs to %q (%v), want lvskit", p, owner, err)
		}
	}
	built, _ := os.ReadFile(filepath.Join(shared, "deb-bin/ipvsadm"))
	if got, _ := os.ReadFile(filepath.Join(root, "sbin/ipvsadm")); !bytes.Equal(got, built) {
		t.Error("/sbin/ipvsadm is not ours after the replacement")
	}
	want, _ := os.ReadFile("default/ipvsadm")
	if got, _ := os.ReadFile(filepath.Join(root, "etc/default/ipvsadm")); !bytes.Equal(got, want) {
		t.Error("the unmodified /etc/default/ipvsadm was not replaced by ours")
	}
}
