//go:build lab

package packaging_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lvskit/lvskit/lab/labtest"
)

// guestPkgs is where labrun -pkgs puts the packages (make lab builds them:
// lab-pkgs): Debian's ipvsadm, our .deb at the previous version (0~0) and
// at the tree's.
const guestPkgs = "/opt/lvskit/pkgs"

// debSystem is a copy of the guest's system, /usr and /etc, in which dpkg
// installs packages for real (dpkg, maintainer scripts and the installed
// programs run chrooted there, against the lab's kernel, in the test's
// network namespace), so the guest's own reference ipvsadm stays intact
// for the other tests of the boot.
type debSystem struct {
	t    *testing.T
	root string
}

func newDebSystem(t *testing.T) *debSystem {
	t.Helper()
	root := t.TempDir()
	s := &debSystem{t: t, root: root}
	if r := labtest.Sh(t, `set -e
cd "$R"
cp -a /usr /etc .
rm -rf usr/lib/modules
for d in bin sbin lib lib64; do [ -e /$d ] && cp -a /$d .; done
mkdir -p proc dev tmp run var/lib/dpkg/info var/lib/dpkg/updates var/lib/dpkg/triggers var/log
: > var/lib/dpkg/status
: > var/lib/dpkg/available
# Debian's maintainer scripts call the SysV tools: update-rc.d only links
# runlevels (nothing here boots by them); invoke-rc.d runs the init script,
# as it does on a host without a policy forbidding it.
printf '#!/bin/sh\necho "update-rc.d $*" >> /var/log/rc.log\n' > usr/sbin/update-rc.d
printf '#!/bin/sh\necho "invoke-rc.d $*" >> /var/log/rc.log\nexec /etc/init.d/"$1" "$2"\n' > usr/sbin/invoke-rc.d
# dpkg insists on finding ldconfig in PATH (libc-bin's, not in the lab's
# image); the packages here ship no libraries.
printf '#!/bin/sh\nexit 0\n' > usr/sbin/ldconfig
chmod 755 usr/sbin/update-rc.d usr/sbin/invoke-rc.d usr/sbin/ldconfig
mount -t proc proc proc
mount --bind /dev dev
cp /opt/lvskit/pkgs/*.deb tmp/
# On a Debian host the directories packages install into (/sbin, /lib,
# /etc/default, ...) belong to other packages too, so dpkg never removes
# them with one package: here a package of those directories owns them
# (without it, removing ours would take /lib, a link into /usr, with it).
B=$(mktemp -d)
mkdir "$B/DEBIAN"
for d in tmp/*.deb; do dpkg-deb -c "$d"; done | awk '$1 ~ /^d/ { print $6 }' | sort -u | while read -r d; do mkdir -p "$B/$d"; done
# a file of its own: dpkg lets a package without files disappear
mkdir -p "$B/usr/share/doc/lab-system"
echo 'directories of the rest of the system' > "$B/usr/share/doc/lab-system/README"
printf 'Package: lab-system\nVersion: 1\nArchitecture: all\nMaintainer: lab <root@localhost>\nDescription: directories of the rest of the system\n' > "$B/DEBIAN/control"
dpkg-deb --root-owner-group -b "$B" tmp/lab-system.deb >/dev/null
chroot . dpkg -i /tmp/lab-system.deb >/dev/null
`, "R="+root); r.Code != 0 {
		t.Fatalf("copying the guest's system: %+v", r)
	}
	t.Cleanup(func() {
		_ = exec.Command("umount", filepath.Join(root, "proc")).Run()
		_ = exec.Command("umount", filepath.Join(root, "dev")).Run()
	})
	return s
}

// sh runs script chrooted in the system with a standard PATH.
func (s *debSystem) sh(script string) labtest.Result {
	s.t.Helper()
	cmd := exec.Command("/usr/sbin/chroot", s.root, "/bin/sh", "-c", script)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive", "HOME=/root"}
	return labtest.RunCmd(s.t, cmd, labtest.RunOptions{Timeout: 5 * time.Minute})
}

// must runs script and fails the test unless it exits 0.
func (s *debSystem) must(script string) string {
	s.t.Helper()
	r := s.sh(script)
	if r.Code != 0 {
		s.t.Fatalf("%s: status %d\nstdout:\n%s\nstderr:\n%s", script, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout + r.Stderr
}

func (s *debSystem) read(p string) string {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.root, p))
	if err != nil {
		s.t.Fatal(err)
	}
	return string(b)
}

func (s *debSystem) exists(p string) bool {
	_, err := os.Lstat(filepath.Join(s.root, p))
	return err == nil
}

// pkgFile returns the one package in guestPkgs matching glob.
func pkgFile(t *testing.T, glob string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(guestPkgs, glob))
	if len(m) != 1 {
		all, _ := filepath.Glob(filepath.Join(guestPkgs, "*"))
		t.Fatalf("want one %s in %s, have %v (make lab builds them: lab-pkgs)", glob, guestPkgs, all)
	}
	return "/tmp/" + filepath.Base(m[0])
}

// sortedLines is a listing's lines in order, without comments (the unit's
// save heads the rules file with one): the kernel lists services in hash
// order, which a reload may change.
func sortedLines(s string) []string {
	var l []string
	for line := range strings.Lines(s) {
		if !strings.HasPrefix(line, "#") {
			l = append(l, strings.TrimRight(line, "\n"))
		}
	}
	slices.Sort(l)
	return l
}

// The table the test loads with Debian's ipvsadm: each forwarding method,
// persistence, a firewall mark, IPv6, weights and thresholds.
const labTable = `-A -t 10.1.0.1:80 -s wrr
-a -t 10.1.0.1:80 -r 10.2.0.1:80 -m -w 3
-a -t 10.1.0.1:80 -r 10.2.0.2:8080 -m -w 1 -x 100 -y 10
-A -u 10.1.0.2:53 -s rr -p 120
-a -u 10.1.0.2:53 -r 10.2.0.3:53 -g -w 1
-A -f 7 -s sh
-a -f 7 -r 10.2.0.4:0 -i -w 5
-A -t [2001:db8::1]:443 -s lc
-a -t [2001:db8::1]:443 -r [2001:db8::10]:443 -m -w 2
`

// TestDebOverDebianIpvsadmUpgradeAndPurge installs our .deb the way an
// administrator would on a Debian host, in the lab's kernel: first Debian's
// ipvsadm with a table and /etc/ipvsadm.rules saved by Debian's
// ipvsadm-save; then our package at the previous version over it (dpkg
// removes ipvsadm in our favour, the rules file and the modified
// configuration stay, and Debian's prerm flushes the table, as its init
// script's stop does with AUTO="true"); the ipvsadm unit's start (its ExecStart) loads the
// rules into the kernel and its save writes them back unchanged; then the
// upgrade to this tree's version, which keeps the running table and the
// rules file; remove keeps the configuration and purge removes it, as
// Debian's package does. Not covered: systemd itself (the guest has no
// systemd, so the postinst's systemctl calls are skipped as on any host
// without it, and the units' commands are run directly, as systemd would
// run them).
func TestDebOverDebianIpvsadmUpgradeAndPurge(t *testing.T) {
	labtest.Netns(t)
	debian := pkgFile(t, "ipvsadm_*.deb")
	var old, cur string
	all, _ := filepath.Glob(filepath.Join(guestPkgs, "lvskit_*.deb"))
	for _, p := range all {
		if strings.HasPrefix(filepath.Base(p), "lvskit_0~0_") {
			old = "/tmp/" + filepath.Base(p)
		} else {
			cur = "/tmp/" + filepath.Base(p)
		}
	}
	if len(all) != 2 || old == "" || cur == "" {
		t.Fatalf("want lvskit_0~0_*.deb and this tree's in %s, have %v (make lab builds them: lab-pkgs)", guestPkgs, all)
	}
	curVersion := strings.SplitN(filepath.Base(cur), "_", 3)[1]
	s := newDebSystem(t)

	// Debian's ipvsadm, with its dependencies' files present but not
	// registered with this dpkg (they are the image's).
	out := s.must("dpkg --force-depends -i " + debian)
	if !strings.Contains(out, "Setting up ipvsadm") {
		t.Fatalf("Debian's ipvsadm did not install:\n%s", out)
	}
	if got := s.read("/var/log/rc.log"); !strings.Contains(got, "invoke-rc.d ipvsadm start") {
		t.Errorf("Debian's postinst did not start its init script: %q", got)
	}
	s.must(`sed -i 's/^AUTO=.*/AUTO="true"/' /etc/default/ipvsadm && grep -qx 'AUTO="true"' /etc/default/ipvsadm`)
	s.must("ipvsadm-restore <<'EOF'\n" + labTable + "EOF")
	debSave := s.must("ipvsadm-save -n")
	if n := strings.Count(debSave, "\n"); n != 9 {
		t.Fatalf("Debian's ipvsadm-save -n printed %d lines, want the 9 loaded:\n%s", n, debSave)
	}
	s.must("ipvsadm-save -n > /etc/ipvsadm.rules")
	rules := s.read("/etc/ipvsadm.rules")
	defaults := s.read("/etc/default/ipvsadm")

	// Our previous version over Debian's: dpkg removes ipvsadm, keeps the
	// administrator's configuration (--force-confold, as apt-get -o
	// Dpkg::Options::=--force-confold would).
	out = s.must("dpkg --force-confold -i " + old)
	for _, want := range []string{"will remove ipvsadm in favour of lvskit", "Removing ipvsadm", "Setting up lvskit (0~0)"} {
		if !strings.Contains(out, want) {
			t.Errorf("dpkg -i %s: no %q in:\n%s", old, want, out)
		}
	}
	st := s.must(`dpkg-query --show --showformat '${Package} ${db:Status-Abbrev}\n' ipvsadm lvskit`)
	if !regexp.MustCompile(`(?m)^ipvsadm [ir]c $`).MatchString(st) || !regexp.MustCompile(`(?m)^lvskit ii $`).MatchString(st) {
		t.Errorf("package states after the replacement:\n%s\nwant ipvsadm removed (conffiles left: ic or rc), lvskit installed (ii)", st)
	}
	if got := s.read("/etc/ipvsadm.rules"); got != rules {
		t.Errorf("/etc/ipvsadm.rules changed by the replacement:\n%s\nwas:\n%s", got, rules)
	}
	if got := s.read("/etc/default/ipvsadm"); got != defaults {
		t.Errorf("/etc/default/ipvsadm changed by the replacement:\n%s", got)
	}
	if got := s.must("lvsctl --version"); strings.TrimSpace(got) != "lvsctl 0~0" {
		t.Errorf("lvsctl --version after installing 0~0: %q", got)
	}

	// Debian's prerm stops its init script, whose stop flushes the table
	// when AUTO="true": the switch leaves an empty table until the unit
	// starts (on a systemd host our postinst starts it at once; here the
	// test does). docs/packaging.md tells administrators.
	if got := s.read("/var/log/rc.log"); !strings.Contains(got, "invoke-rc.d ipvsadm stop") {
		t.Errorf("Debian's prerm did not stop its init script on the switch: %q", got)
	}
	if got := s.must("ipvsadm-save -n"); got != "" {
		t.Errorf("the table after the switch to lvskit: %q; Debian's init script's stop should have flushed it", got)
	}

	// The unit's round trip with our programs: start loads the rules into
	// an empty table, save writes the same rules back.
	s.must("ipvsadm -C && /usr/libexec/lvskit/ipvsadm-service start")
	if got := s.must("ipvsadm-save -n"); !slices.Equal(sortedLines(got), sortedLines(debSave)) {
		t.Errorf("our ipvsadm-save -n after the unit's start:\n%s\nDebian's before:\n%s", got, debSave)
	}
	s.must("/usr/libexec/lvskit/ipvsadm-service save")
	if got := s.read("/etc/ipvsadm.rules"); !slices.Equal(sortedLines(got), sortedLines(rules)) {
		t.Errorf("the unit's save wrote:\n%s\nDebian's ipvsadm-save wrote:\n%s", got, rules)
	}
	rules = s.read("/etc/ipvsadm.rules")

	// The upgrade keeps the running table and the rules file.
	before := s.must("ipvsadm-save -n")
	out = s.must("dpkg --force-confold -i " + cur)
	if !strings.Contains(out, "Unpacking lvskit ("+curVersion+") over (0~0)") {
		t.Errorf("dpkg -i %s is no upgrade from 0~0:\n%s", cur, out)
	}
	if got := s.must("ipvsadm-save -n"); got != before {
		t.Errorf("the running table changed in the upgrade:\n%s\nwas:\n%s", got, before)
	}
	if got := s.read("/etc/ipvsadm.rules"); got != rules {
		t.Errorf("/etc/ipvsadm.rules changed in the upgrade:\n%s\nwas:\n%s", got, rules)
	}
	// The tree's programs, which the lab runs from /opt/lvskit/bin, carry
	// the same version as the package's.
	if got, want := s.must("lvsctl --version"), labtest.Run(t, "", labtest.Ours("lvsctl"), "--version").Stdout; got != want || strings.Contains(got, "0~0") {
		t.Errorf("lvsctl --version after the upgrade: %q, want %q", got, want)
	}
	// The round trip again with the upgraded programs: stop (AUTO="true")
	// clears the table, start restores it.
	s.must("/usr/libexec/lvskit/ipvsadm-service stop")
	if got := s.must("ipvsadm-save -n"); got != "" {
		t.Errorf("the table after the unit's stop: %q, want empty", got)
	}
	s.must("/usr/libexec/lvskit/ipvsadm-service start")
	if got := s.must("ipvsadm-save -n"); !slices.Equal(sortedLines(got), sortedLines(before)) {
		t.Errorf("the table after the unit's start:\n%s\nwant:\n%s", got, before)
	}

	// Remove keeps the configuration; purge removes it, rules included, as
	// Debian's postrm does.
	s.must("dpkg -r lvskit")
	for _, p := range []string{"/sbin/ipvsadm", "/usr/sbin/lvsctl", "/usr/libexec/lvskit/ipvsadm-service"} {
		if s.exists(p) {
			t.Errorf("%s after dpkg -r", p)
		}
	}
	for _, p := range []string{"/etc/ipvsadm.rules", "/etc/default/ipvsadm"} {
		if !s.exists(p) {
			t.Errorf("%s gone after dpkg -r; configuration stays until purge", p)
		}
	}
	for _, p := range []string{"/sbin", "/lib", "/lib/systemd/system", "/usr/share/man/man8"} {
		if fi, err := os.Stat(filepath.Join(s.root, p)); err != nil || !fi.IsDir() {
			t.Errorf("%s after dpkg -r: %v; the system's directories stay", p, err)
		}
	}
	s.must("dpkg -P lvskit")
	for _, p := range []string{"/etc/ipvsadm.rules", "/etc/default/ipvsadm"} {
		if s.exists(p) {
			t.Errorf("%s after dpkg -P", p)
		}
	}
	if got := s.must(`dpkg-query --show --showformat '${db:Status-Abbrev}' lvskit || true`); strings.HasPrefix(got, "i") || strings.HasPrefix(got, "r") {
		t.Errorf("lvskit's state after purge: %q", got)
	}
}
