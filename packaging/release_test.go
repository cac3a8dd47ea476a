package packaging_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/lvskit/lvskit/packaging/hosttool"
)

// releaseVersion is the VERSION the release tests give make release.
const releaseVersion = "1.2.3"

// releaseArtifacts are the files make release VERSION=1.2.3 writes, besides
// SHA256SUMS.
var releaseArtifacts = []string{
	"lvskit_1.2.3_linux_amd64.tar.gz", "lvskit_1.2.3_linux_arm64.tar.gz",
	"lvskit_1.2.3_amd64.deb", "lvskit_1.2.3_arm64.deb",
	"lvskit-1.2.3-1.x86_64.rpm", "lvskit-1.2.3-1.aarch64.rpm",
	"lvskit_1.2.3.cdx.json",
}

// secondClone makes another clone of this repository, with the work tree's
// changes over it as freshClone has, at a different path.
func secondClone(t *testing.T) string {
	t.Helper()
	top, err := command(".", nil, "git", "rev-parse", "--show-toplevel")
	if err != nil {
		t.Fatal(err)
	}
	top = strings.TrimSpace(top)
	dir := filepath.Join(t.TempDir(), "elsewhere", "lvskit-source")
	if _, err := command(".", nil, "git", "clone", "-q", "--local", top, dir); err != nil {
		t.Fatal(err)
	}
	if err := overlayWorkTree(top, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

var (
	releaseOnce sync.Once
	releaseDist string
	releaseErr  error
)

// builtRelease returns the dist directory make release VERSION=1.2.3 wrote
// from the fresh clone.
func builtRelease(t *testing.T) string {
	t.Helper()
	clone := freshClone(t)
	releaseOnce.Do(func() {
		makeMu.Lock()
		defer makeMu.Unlock()
		releaseDist = filepath.Join(shared, "release-dist")
		_, releaseErr = command(clone, cleanMakeEnv, "make", "release", "VERSION="+releaseVersion, "DISTDIR="+releaseDist)
	})
	if releaseErr != nil {
		t.Fatalf("make release: %v", releaseErr)
	}
	return releaseDist
}

// TestReleaseReproducible runs make release from two clones at different
// paths, one after the other (so at different times, from files checked out
// at different times), and requires byte-identical artifacts; then checks
// SHA256SUMS with sha256sum -c.
func TestReleaseReproducible(t *testing.T) {
	buildsWithMake(t)
	t.Parallel()
	first := builtRelease(t)
	other := secondClone(t)
	second := filepath.Join(t.TempDir(), "dist")
	if _, err := command(other, cleanMakeEnv, "make", "release", "VERSION="+releaseVersion, "DISTDIR="+second); err != nil {
		t.Fatal(err)
	}

	sums := func(dir string) (string, []string) {
		b, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for line := range strings.Lines(string(b)) {
			f := strings.Fields(line)
			if len(f) != 2 || len(f[0]) != 64 {
				t.Fatalf("%s/SHA256SUMS: bad line %q", dir, line)
			}
			names = append(names, f[1])
		}
		return string(b), names
	}
	sumsA, names := sums(first)
	sumsB, _ := sums(second)
	want := slices.Sorted(slices.Values(releaseArtifacts))
	if !slices.Equal(names, want) {
		t.Errorf("SHA256SUMS lists %q, want %q", names, want)
	}
	if sumsA != sumsB {
		t.Errorf("SHA256SUMS differ between the two builds:\n%s\n%s", sumsA, sumsB)
	}
	for _, dir := range []string{first, second} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
		}
		if w := append(slices.Clone(want), "SHA256SUMS"); !slices.Equal(got, slices.Sorted(slices.Values(w))) {
			t.Errorf("%s holds %q, want %q", dir, got, w)
		}
	}
	for _, name := range releaseArtifacts {
		a, errA := os.ReadFile(filepath.Join(first, name))
		b, errB := os.ReadFile(filepath.Join(second, name))
		if errA != nil || errB != nil {
			t.Errorf("%s: %v %v", name, errA, errB)
			continue
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between the two builds (%d and %d bytes)", name, len(a), len(b))
		}
	}
	for _, dir := range []string{first, second} {
		out, err := command(dir, nil, "sha256sum", "-c", "SHA256SUMS")
		if err != nil {
			t.Errorf("sha256sum -c in %s: %v", dir, err)
		}
		if n := strings.Count(out, ": OK\n"); n != len(releaseArtifacts) {
			t.Errorf("sha256sum -c in %s: %d files OK, want %d:\n%s", dir, n, len(releaseArtifacts), out)
		}
	}
	// A changed artifact fails the check.
	tampered := t.TempDir()
	for _, name := range append(slices.Clone(releaseArtifacts), "SHA256SUMS") {
		b, _ := os.ReadFile(filepath.Join(first, name))
		if name == "lvskit_1.2.3.cdx.json" {
			b = append(b, '\n')
		}
		if err := os.WriteFile(filepath.Join(tampered, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := command(tampered, nil, "sha256sum", "-c", "SHA256SUMS"); err == nil || !strings.Contains(out, "lvskit_1.2.3.cdx.json: FAILED") {
		t.Errorf("sha256sum -c accepted a changed SBOM: %v\n%s", err, out)
	}
}

// TestReleaseTarballs: each tarball holds the five programs built for its
// architecture (lvsctl and lvsprep report the release's version; ipvsadm's
// -v stays ipvsadm 1.31's), the manual pages, completions,
// units with their helper and configuration, README, LICENSE and CHANGELOG,
// owned by root and dated by the commit.
func TestReleaseTarballs(t *testing.T) {
	buildsWithMake(t)
	t.Parallel()
	dist := builtRelease(t)
	commitTime, err := command(freshClone(t), nil, "git", "log", "-1", "--format=%ct")
	if err != nil {
		t.Fatal(err)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		name := "lvskit_1.2.3_linux_" + arch
		list, err := command(".", nil, "tar", "--list", "--verbose", "--full-time", "--numeric-owner", "-zf", filepath.Join(dist, name+".tar.gz"))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for line := range strings.Lines(list) {
			f := strings.Fields(line)
			if len(f) < 5 || f[1] != "0/0" {
				t.Errorf("%s: %q is not owned by 0/0", name, line)
				continue
			}
			got = append(got, f[len(f)-1])
		}
		want := []string{name + "/README.md", name + "/LICENSE", name + "/CHANGELOG.md",
			name + "/libexec/lvskit/ipvsadm-service", name + "/etc/default/ipvsadm", name + "/etc/ipvsadm.rules"}
		for _, d := range userDocs {
			if d != "README.md" { // at the top
				want = append(want, name+"/doc/"+d)
			}
		}
		for p := range programs {
			want = append(want, name+"/bin/"+p)
		}
		for _, glob := range []string{"../man/*.8", "../completions/bash/*", "../completions/zsh/_*", "../completions/fish/*.fish", "systemd/*.service"} {
			files, _ := filepath.Glob(glob)
			if len(files) == 0 {
				t.Fatalf("no files match %s", glob)
			}
			for _, f := range files {
				dir := strings.TrimPrefix(filepath.Dir(f), "../")
				if dir == "man" {
					dir = "man/man8"
				}
				want = append(want, name+"/"+dir+"/"+filepath.Base(f))
			}
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("%s lacks %s", name, w)
			}
		}
		for _, g := range got {
			if !strings.HasSuffix(g, "/") && !slices.Contains(want, g) {
				t.Errorf("%s holds the unexpected %s", name, g)
			}
		}

		// The programs: linux/arch, stamped with the version.
		dir := t.TempDir()
		if _, err := command(dir, nil, "tar", "-xzf", filepath.Join(dist, name+".tar.gz")); err != nil {
			t.Fatal(err)
		}
		for p := range programs {
			bin := filepath.Join(dir, name, "bin", p)
			info, err := command(".", nil, "go", "version", "-m", bin)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []string{"\tbuild\tGOOS=linux\n", "\tbuild\tGOARCH=" + arch + "\n", "\tbuild\tCGO_ENABLED=0\n",
				"\tbuild\t-trimpath=true\n"} {
				if !strings.Contains(info, w) {
					t.Errorf("go version -m %s/bin/%s lacks %q:\n%s", name, p, w, info)
				}
			}
			fi, err := os.Stat(bin)
			if err != nil || fi.ModTime().Unix() != parseInt(t, commitTime) {
				t.Errorf("%s/bin/%s: mtime %v, want the commit's time %s (%v)", name, p, fi.ModTime(), strings.TrimSpace(commitTime), err)
			}
		}
		if arch == runtime.GOARCH {
			for _, p := range []string{"lvsctl", "lvsprep"} {
				out, err := command(".", nil, filepath.Join(dir, name, "bin", p), "--version")
				if err != nil || out != p+" 1.2.3\n" {
					t.Errorf("%s --version: %q %v, want %q", p, out, err, p+" 1.2.3\n")
				}
			}
		}
	}
}

func parseInt(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// TestReleasePackagesArch: each .deb and .rpm names its architecture and the
// release's version, and holds programs built for it.
func TestReleasePackagesArch(t *testing.T) {
	buildsWithMake(t)
	t.Parallel()
	hosttool.Require(t, "dpkg-deb", "dpkg")
	hosttool.Require(t, "rpm", "rpm")
	dist := builtRelease(t)
	for arch, rpmArch := range map[string]string{"amd64": "x86_64", "arm64": "aarch64"} {
		deb := filepath.Join(dist, "lvskit_1.2.3_"+arch+".deb")
		if out, err := command(".", nil, "dpkg-deb", "--show", "--showformat", "${Architecture} ${Version}", deb); err != nil || out != arch+" 1.2.3" {
			t.Errorf("%s: %q %v", deb, out, err)
		}
		rpm := filepath.Join(dist, "lvskit-1.2.3-1."+rpmArch+".rpm")
		if out, err := command(".", nil, "rpm", "-qp", "--queryformat", "%{ARCH} %{VERSION}-%{RELEASE}", rpm); err != nil || out != rpmArch+" 1.2.3-1" {
			t.Errorf("%s: %q %v", rpm, out, err)
		}
		dir := t.TempDir()
		if _, err := command(".", nil, "dpkg-deb", "--extract", deb, dir); err != nil {
			t.Fatal(err)
		}
		if info, err := command(".", nil, "go", "version", "-m", filepath.Join(dir, "usr/sbin/lvsctl")); err != nil || !strings.Contains(info, "\tbuild\tGOARCH="+arch+"\n") {
			t.Errorf("lvsctl in %s is not built for %s: %v\n%s", deb, arch, err, info)
		}
	}
}

// TestCheckArchRefusesForeignPrograms: the packaging targets refuse
// programs built for another architecture than ARCH (the check every deb,
// rpm and tarball runs first).
func TestCheckArchRefusesForeignPrograms(t *testing.T) {
	buildsWithMake(t)
	t.Parallel()
	builtRelease(t)
	clone := freshClone(t)
	// The release left the amd64 programs in .cache/build/linux_amd64.
	amd64 := filepath.Join(clone, ".cache/build/linux_amd64")
	out, err := command(clone, cleanMakeEnv, "make", "check-arch", "ARCH=arm64", "PKG_BINDIR="+amd64)
	if err == nil || !strings.Contains(out, "is built for 'linux/amd64', not linux/arm64 (ARCH=arm64): not packaging it") {
		t.Errorf("make check-arch ARCH=arm64 on amd64 programs: %v\n%s", err, out)
	}
	if _, err := command(clone, cleanMakeEnv, "make", "check-arch", "ARCH=amd64", "PKG_BINDIR="+amd64); err != nil {
		t.Errorf("make check-arch ARCH=amd64 on amd64 programs: %v", err)
	}
	// Not a Go program at all.
	bogus := t.TempDir()
	for p := range programs {
		if err := os.WriteFile(filepath.Join(bogus, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := command(clone, cleanMakeEnv, "make", "check-arch", "ARCH=amd64", "PKG_BINDIR="+bogus); err == nil || !strings.Contains(out, "not packaging it") {
		t.Errorf("make check-arch on shell scripts: %v\n%s", err, out)
	}
}

var (
	rpmOnce sync.Once
	rpmFile string
	rpmErr  error
)

// builtRpm returns the .rpm that make rpm builds in the fresh clone for this
// machine's architecture.
func builtRpm(t *testing.T) string {
	t.Helper()
	clone := freshClone(t)
	rpmOnce.Do(func() {
		makeMu.Lock()
		defer makeMu.Unlock()
		dist := filepath.Join(shared, "rpm-dist")
		if _, rpmErr = command(clone, cleanMakeEnv, "make", "rpm", "DISTDIR="+dist, "PKG_BINDIR="+filepath.Join(shared, "rpm-bin")); rpmErr != nil {
			return
		}
		rpms, _ := filepath.Glob(filepath.Join(dist, "*.rpm"))
		if len(rpms) != 1 {
			rpmErr = fmt.Errorf("make rpm left %d .rpm files in %s, want 1", len(rpms), dist)
			return
		}
		rpmFile = rpms[0]
	})
	if rpmErr != nil {
		t.Fatalf("make rpm: %v", rpmErr)
	}
	return rpmFile
}

// TestRpmlint: rpmlint reports no error on the .rpm (the filtered checks
// carry their reasons in rpm/rpmlint.toml). rpmlint unpacks the package
// with cpio; rpm/bin/cpio keeps nfpm's absolute names inside its directory.
func TestRpmlint(t *testing.T) {
	buildsWithMake(t)
	t.Parallel()
	rpmlint := hosttool.Require(t, "rpmlint", "rpmlint")
	rpm := builtRpm(t)
	shim, err := filepath.Abs("rpm/bin")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(rpmlint, "-c", "rpm/rpmlint.toml", rpm)
	cmd.Env = append(os.Environ(), "PATH="+shim+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	t.Logf("rpmlint:\n%s", out)
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, ": E: ") {
			t.Errorf("rpmlint error: %s", strings.TrimSpace(line))
		}
	}
	if !regexp.MustCompile(`\b0 errors\b`).Match(out) || err != nil {
		t.Errorf("rpmlint: %v", err)
	}
}

// TestRpmInstallsIntoEmptyRoot installs the .rpm into an empty root with rpm
// (its scriptlets run there, busybox as /bin/sh), verifies it with rpm -V,
// and compares its files with the .deb's: the same files, at rpm's paths.
func TestRpmInstallsIntoEmptyRoot(t *testing.T) {
	buildsWithMake(t)
	t.Parallel()
	hosttool.Require(t, "rpm", "rpm")
	hosttool.Require(t, "dpkg-deb", "dpkg")
	rpm := builtRpm(t)
	deb := builtDeb(t)
	root := throwawayRoot(t)
	// --force-debian: Debian's rpm otherwise warns that dpkg owns the system.
	if out, err := command(".", nil, "rpm", "--force-debian", "--root", root, "-i", "--nodeps", rpm); err != nil || out != "" {
		t.Fatalf("rpm -i: %v\n%s", err, out)
	}
	if out, err := command(".", nil, "rpm", "--root", root, "-V", "lvskit"); err != nil || out != "" {
		t.Errorf("rpm -V lvskit: %v\n%s", err, out)
	}
	out, err := command(".", nil, "rpm", "--root", root, "-ql", "lvskit")
	if err != nil {
		t.Fatal(err)
	}
	rpmFiles := strings.Fields(out)
	for _, f := range rpmFiles {
		if _, err := os.Lstat(filepath.Join(root, f)); err != nil {
			t.Errorf("%s not installed: %v", f, err)
		}
	}
	for name := range programs {
		built, _ := os.ReadFile(filepath.Join(shared, "rpm-bin", name))
		if got, err := os.ReadFile(filepath.Join(root, "usr/sbin", name)); err != nil || !bytes.Equal(got, built) {
			t.Errorf("/usr/sbin/%s in the root is not the %s that make rpm built (%v)", name, name, err)
		}
	}
	// The .deb's files at rpm's paths: all programs in /usr/sbin, units in
	// /usr/lib/systemd/system; Debian's policy files stay in the .deb, the
	// license goes where rpm-based systems keep it.
	var want []string
	for p, e := range debContents(t, deb) {
		if strings.HasPrefix(e.mode, "d") {
			continue
		}
		switch {
		case slices.Contains(userDocs, strings.TrimPrefix(p, "/usr/share/doc/lvskit/")):
			// the user documentation, in both
		case strings.HasPrefix(p, "/usr/share/doc/lvskit/"), strings.HasPrefix(p, "/usr/share/lintian/"):
			continue
		case strings.HasPrefix(p, "/sbin/"):
			p = "/usr" + p
		case strings.HasPrefix(p, "/lib/systemd/"):
			p = "/usr" + p
		}
		want = append(want, p)
	}
	want = append(want, "/usr/share/licenses/lvskit/LICENSE")
	slices.Sort(want)
	slices.Sort(rpmFiles)
	if !slices.Equal(rpmFiles, want) {
		t.Errorf("the .rpm's files:\n%s\nwant (the .deb's, at rpm's paths):\n%s", strings.Join(rpmFiles, "\n"), strings.Join(want, "\n"))
	}
	// Conffiles as %config(noreplace), manual pages and the user
	// documentation as %doc.
	if out, _ := command(".", nil, "rpm", "--root", root, "-qc", "lvskit"); out != "/etc/default/ipvsadm\n/etc/ipvsadm.rules\n" {
		t.Errorf("rpm -qc: %q", out)
	}
	out, _ = command(".", nil, "rpm", "--root", root, "-qd", "lvskit")
	docs := strings.Fields(out)
	pages, _ := filepath.Glob("../man/*.8")
	for _, p := range pages {
		if !slices.Contains(docs, "/usr/share/man/man8/"+filepath.Base(p)+".gz") {
			t.Errorf("rpm -qd lacks the manual page %s: %q", filepath.Base(p), docs)
		}
	}
	for _, d := range userDocs {
		if !slices.Contains(docs, "/usr/share/doc/lvskit/"+d) {
			t.Errorf("rpm -qd lacks /usr/share/doc/lvskit/%s: %q", d, docs)
		}
	}
	for tag, want := range map[string]string{"RECOMMENDNEVRS": "iptables\nkmod\niproute\n", "CONFLICTNEVRS": "ipvsadm\n", "OBSOLETENEVRS": ""} {
		if out, err := command(".", nil, "rpm", "-qp", "--queryformat", "[%{"+tag+"}\n]", rpm); err != nil || out != want {
			t.Errorf("rpm %s: %q, want %q (%v)", tag, out, want, err)
		}
	}
	if out, _ := command(".", nil, "rpm", "-qp", "--provides", rpm); !strings.Contains(out, "ipvsadm = 1.31\n") {
		t.Errorf("rpm provides %q, want ipvsadm = 1.31 among them", out)
	}
	// Erase runs the scriptlets again and leaves no file behind.
	if out, err := command(".", nil, "rpm", "--force-debian", "--root", root, "-e", "--nodeps", "lvskit"); err != nil || out != "" {
		t.Errorf("rpm -e: %v\n%s", err, out)
	}
	for _, f := range rpmFiles {
		if _, err := os.Lstat(filepath.Join(root, f)); err == nil {
			t.Errorf("%s left after rpm -e", f)
		}
	}
}

// TestMaintainerAddressEverywhere: the maintainer nfpm.yaml names is the
// one the Debian changelog's trailer, the copyright file's
// Upstream-Contact, the .rpm's Packager and %changelog, and the packaging
// page name: a packager writing to one of them reaches the same list.
func TestMaintainerAddressEverywhere(t *testing.T) {
	t.Parallel()
	nfpm, err := os.ReadFile("nfpm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^maintainer: (.+ <[^@> ]+@[^> ]+>)$`).FindSubmatch(nfpm)
	if m == nil {
		t.Fatal("nfpm.yaml: no maintainer with an address")
	}
	who := string(m[1])
	for file, want := range map[string]string{
		"changelog":            "\n -- " + who + "  ",
		"copyright":            "\nUpstream-Contact: " + who + "\n",
		"../docs/packaging.md": "`" + who + "`",
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s does not name the maintainer as %q", file, want)
		}
	}
	buildsWithMake(t) // the rest reads the .rpm
	hosttool.Require(t, "rpm", "rpm")
	out, err := command(".", nil, "rpm", "-qp", "--queryformat", "%{PACKAGER}\n%{CHANGELOGNAME}\n", builtRpm(t))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	if len(lines) < 2 || lines[0] != who || !strings.HasPrefix(lines[1], who+" - ") {
		t.Errorf("the .rpm's Packager and %%changelog name %q, want %s", out, who)
	}
}

// TestRpmArm64LintsAndInstalls: the released aarch64 .rpm passes rpmlint
// with no errors, and installs into an empty root (rpm --ignorearch on
// this amd64 host; busybox runs its scriptlets) with rpm -V clean, like
// the host's own.
func TestRpmArm64LintsAndInstalls(t *testing.T) {
	buildsWithMake(t)
	t.Parallel()
	rpmlint := hosttool.Require(t, "rpmlint", "rpmlint")
	hosttool.Require(t, "rpm", "rpm")
	rpm := filepath.Join(builtRelease(t), "lvskit-1.2.3-1.aarch64.rpm")
	shim, err := filepath.Abs("rpm/bin")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(rpmlint, "-c", "rpm/rpmlint.toml", rpm)
	cmd.Env = append(os.Environ(), "PATH="+shim+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil || !regexp.MustCompile(`\b0 errors\b`).Match(out) {
		t.Errorf("rpmlint %s: %v\n%s", rpm, err, out)
	}
	root := throwawayRoot(t)
	if out, err := command(".", nil, "rpm", "--force-debian", "--root", root, "-i", "--nodeps", "--ignorearch", rpm); err != nil || out != "" {
		t.Fatalf("rpm -i: %v\n%s", err, out)
	}
	if out, err := command(".", nil, "rpm", "--root", root, "-V", "lvskit"); err != nil || out != "" {
		t.Errorf("rpm -V lvskit: %v\n%s", err, out)
	}
	info, err := command(".", nil, "go", "version", "-m", filepath.Join(root, "usr/sbin/lvsctl"))
	if err != nil || !strings.Contains(info, "\tbuild\tGOARCH=arm64\n") {
		t.Errorf("/usr/sbin/lvsctl from the aarch64 .rpm is not an arm64 build: %v\n%s", err, info)
	}
}
