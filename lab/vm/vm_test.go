package vm

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lvskit/lvskit/lab/internal/wire"
)

// parsedEntry is one parsed newc entry.
type parsedEntry struct {
	name         string
	mode         uint32
	data         string
	major, minor uint32
}

// parseNewc is an independent reader of the newc format, as the kernel's
// initramfs unpacker reads it.
func parseNewc(t *testing.T, b []byte) []parsedEntry {
	t.Helper()
	var out []parsedEntry
	off := 0
	field := func(i int) uint32 {
		v, err := strconv.ParseUint(string(b[off+6+8*i:off+6+8*i+8]), 16, 32)
		if err != nil {
			t.Fatalf("bad header field at %d: %v", off, err)
		}
		return uint32(v)
	}
	align := func(n int) int { return (n + 3) &^ 3 }
	for {
		if off%4 != 0 {
			t.Fatalf("entry at unaligned offset %d", off)
		}
		if string(b[off:off+6]) != "070701" {
			t.Fatalf("bad magic at %d: %q", off, b[off:off+6])
		}
		mode, size, major, minor, namesize := field(1), field(6), field(9), field(10), field(11)
		name := string(b[off+110 : off+110+int(namesize)-1])
		dataOff := align(off + 110 + int(namesize))
		data := string(b[dataOff : dataOff+int(size)])
		off = align(dataOff + int(size))
		if name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("%d bytes after the trailer", len(b)-off)
			}
			return out
		}
		out = append(out, parsedEntry{name, mode, data, major, minor})
	}
}

func TestCpioWritesParentsAndEveryKind(t *testing.T) {
	dir := t.TempDir()
	host := filepath.Join(dir, "hostfile")
	if err := os.WriteFile(host, []byte("from the host\n"), 0o751); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, err := writeCpio(&buf, []Entry{
		{Path: "/usr/bin/x", HostPath: host},
		{Path: "/etc/lab/plan.json", Data: []byte("{}")},
		{Path: "/bin", Link: "usr/bin"},
		{Path: "/dev/console", IsDev: true, Dev: [2]uint32{5, 1}},
		{Path: "/tmp", Dir: true, Mode: 0o777 | fs.ModeSticky},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range parseNewc(t, buf.Bytes()) {
		got = append(got, fmt.Sprintf("%s %o %q %d,%d", f.name, f.mode, f.data, f.major, f.minor))
	}
	want := []string{
		`bin 120777 "usr/bin" 0,0`,
		`dev 40755 "" 0,0`,
		`dev/console 20600 "" 5,1`,
		`etc 40755 "" 0,0`,
		`etc/lab 40755 "" 0,0`,
		`etc/lab/plan.json 100644 "{}" 0,0`,
		`tmp 41777 "" 0,0`,
		`usr 40755 "" 0,0`,
		`usr/bin 40755 "" 0,0`,
		`usr/bin/x 100751 "from the host\n" 0,0`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("archive:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestInitrdOverlayStartsFourByteAligned(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base.cpio.gz")
	init := filepath.Join(dir, "init")
	// 4n+1, 4n+2, 4n+3 and 4n long bases
	for _, n := range []int{101, 102, 103, 104} {
		if err := os.WriteFile(base, bytes.Repeat([]byte{0x1f}, n), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(init, []byte("guest init"), 0o755); err != nil {
			t.Fatal(err)
		}
		l := &Lab{Base: &Base{Path: base}, GuestInit: init}
		out := filepath.Join(dir, "initrd")
		rep := &Report{}
		run := Run{Plan: wire.Plan{Steps: []wire.Step{{Name: "x", Argv: []string{"/bin/true"}}}}}
		if err := l.writeInitrd(out, run, rep); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		start := (n + 3) &^ 3
		if !bytes.Equal(b[n:start], make([]byte, start-n)) {
			t.Fatalf("base %d: padding is not zeros", n)
		}
		files := parseNewc(t, b[start:])
		names := map[string]string{}
		for _, f := range files {
			names[f.name] = f.data
		}
		if names["init"] != "guest init" || !strings.Contains(names["etc/lab/plan.json"], `"/bin/true"`) {
			t.Fatalf("base %d: overlay %v", n, names)
		}
		if rep.InitrdBytes != int64(len(b)) {
			t.Errorf("report says %d bytes, file has %d", rep.InitrdBytes, len(b))
		}
	}
}

func TestMergedUsr(t *testing.T) {
	for in, want := range map[string]string{
		"/bin/ip":                         "/usr/bin/ip",
		"/sbin/ipvsadm":                   "/usr/sbin/ipvsadm",
		"/lib/x86_64-linux-gnu/libc.so.6": "/usr/lib/x86_64-linux-gnu/libc.so.6",
		"/lib64/ld-linux-x86-64.so.2":     "/usr/lib64/ld-linux-x86-64.so.2",
		"/usr/sbin/xtables-nft-multi":     "/usr/sbin/xtables-nft-multi",
		"/binary":                         "/binary",
		"/etc/services":                   "/etc/services",
	} {
		if got := merged(in); got != want {
			t.Errorf("merged(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestVersionLessOrdersKernelsNumerically(t *testing.T) {
	if !versionLess("/boot/vmlinuz-6.1.0-9-cloud-amd64", "/boot/vmlinuz-6.1.0-10-cloud-amd64") {
		t.Error("6.1.0-9 should sort before 6.1.0-10")
	}
	if versionLess("/boot/vmlinuz-6.1.0-57-cloud-amd64", "/boot/vmlinuz-6.1.0-50-cloud-amd64") {
		t.Error("6.1.0-57 should sort after 6.1.0-50")
	}
}

func TestSharedLibsOfDash(t *testing.T) {
	libs, err := sharedLibs(arches["amd64"], "/bin/dash", map[string]bool{})
	if err != nil {
		t.Fatal(err)
	}
	var interp, libc bool
	for _, l := range libs {
		interp = interp || strings.HasSuffix(l, "/ld-linux-x86-64.so.2")
		libc = libc || strings.HasSuffix(l, "/libc.so.6")
	}
	if !interp || !libc {
		t.Errorf("sharedLibs(/bin/dash) = %v, want the loader and libc", libs)
	}
	if isELF("/etc/services") || !isELF("/bin/dash") {
		t.Error("isELF misjudges a text file or dash")
	}
}

// TestResolveStaysInTheGuestRoot: a foreign guest's links, absolute or
// relative, resolve inside its unpacked tree, never on the host.
func TestResolveStaysInTheGuestRoot(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "usr/sbin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(root, "usr/bin/ip"), []byte("ip"), 0o755))
	must(os.Symlink("usr/bin", filepath.Join(root, "bin")))
	must(os.Symlink("/bin/ip", filepath.Join(root, "usr/sbin/ip")))
	must(os.Symlink("../bin/ip", filepath.Join(root, "usr/sbin/ip2")))
	must(os.Symlink("/etc/passwd", filepath.Join(root, "usr/sbin/host")))
	a := &Arch{Name: "arm64", Root: root, triplet: "aarch64-linux-gnu"}
	for _, p := range []string{"/usr/sbin/ip", "/usr/sbin/ip2", "/bin/ip"} {
		got, err := a.resolve(p)
		if err != nil || got != "/usr/bin/ip" {
			t.Errorf("resolve(%s) = %q, %v; want /usr/bin/ip", p, got, err)
		}
	}
	if got, err := a.resolve("/usr/sbin/host"); err == nil {
		t.Errorf("resolve(/usr/sbin/host) = %q, want an error: /etc/passwd is not in the guest's tree", got)
	}
	if a.hostPath("/usr/bin/ip") != filepath.Join(root, "usr/bin/ip") {
		t.Errorf("hostPath = %s", a.hostPath("/usr/bin/ip"))
	}
}

func TestFilterAliasesKeepsImageModulesOnly(t *testing.T) {
	f := filepath.Join(t.TempDir(), "modules.alias")
	in := "# Aliases extracted from modules themselves.\nalias nft-expr-numgen nft_numgen\nalias pci:v00008086d* e1000e\nalias ip6t_REJECT ip6t-REJECT\n"
	if err := os.WriteFile(f, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := filterAliases(f, map[string]bool{"nft_numgen": true, "ip6t_REJECT": true})
	if err != nil {
		t.Fatal(err)
	}
	if want := "alias nft-expr-numgen nft_numgen\nalias ip6t_REJECT ip6t-REJECT\n"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
