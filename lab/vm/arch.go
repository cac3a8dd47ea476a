package vm

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Arch is what differs between the lab's guest architectures: where the
// guest's Debian files come from, which kernel flavour boots, the emulator
// and its machine, and the library directories of the guest's loader.
//
// The host's own architecture takes the guest's user space from the host
// (Root "/", the packages `make deps` installs). Another architecture takes
// it from Root, a tree of that architecture's Debian packages unpacked by
// tools/lab-root.sh (`make lab ARCH=arm64` makes it): its programs never
// run on the host, except busybox under Emulator to list its applets.
type Arch struct {
	Name     string   // Go's and Debian's name: amd64, arm64
	Root     string   // the guest's files: "/" or an unpacked package tree
	Packages []string // the host's Debian packages this lab needs
	Qemu     string   // the system emulator
	Emulator string   // user-mode emulator for the guest's programs on the host; "" for the host's own architecture
	triplet  string   // Debian's multiarch directory name
	flavour  string   // the kernel flavour: /boot/vmlinuz-*-<flavour>
	console  string   // the kernel console's device
	machine  []string // QEMU's machine and CPU options
	// results are QEMU options that make the guest's ttyS1 the results
	// channel on QEMU's stdio, with ttyS0 (or the console) before it.
	results func(console string) []string
}

// x86Results: the pc machine's two 16550 UARTs, ttyS0 the kernel console.
func x86Results(console string) []string {
	return []string{"-serial", "file:" + console, "-serial", "stdio"}
}

// armResults: the virt machine has one PL011 UART (ttyAMA0, the kernel
// console, there from the first message); two 16550s on PCI are ttyS0
// (unused) and ttyS1, the results channel, as on x86 (Debian's arm64
// kernels build the 8250 PCI driver in).
func armResults(console string) []string {
	return []string{
		"-serial", "file:" + console,
		"-chardev", "null,id=lab0", "-device", "pci-serial,chardev=lab0",
		"-chardev", "stdio,id=lab1", "-device", "pci-serial,chardev=lab1",
	}
}

// arches are the architectures the lab can boot.
var arches = map[string]*Arch{
	"amd64": {
		Name: "amd64", Root: "/", Packages: Packages,
		Qemu: "qemu-system-x86_64", triplet: "x86_64-linux-gnu", flavour: "cloud-amd64",
		console: "ttyS0", machine: []string{"-machine", "pc"}, results: x86Results,
	},
	"arm64": {
		Name: "arm64", Packages: Arm64Packages,
		Qemu: "qemu-system-aarch64", Emulator: "qemu-aarch64-static",
		triplet: "aarch64-linux-gnu", flavour: "cloud-arm64", console: "ttyAMA0",
		// cortex-a57 (ARMv8.0): the max CPU's pointer authentication
		// costs TCG dearly and nothing here needs it.
		machine: []string{"-machine", "virt", "-cpu", "cortex-a57"}, results: armResults,
	},
}

// ArchFor returns the lab architecture name (Go's name; "" is the host's),
// with root the unpacked package tree of a foreign architecture.
func ArchFor(name, root string) (*Arch, error) {
	if name == "" {
		name = runtime.GOARCH
	}
	a, ok := arches[name]
	if !ok {
		return nil, fmt.Errorf("lab: no lab for the architecture %q (amd64, arm64)", name)
	}
	c := *a
	if name == runtime.GOARCH {
		c.Root, c.Emulator = "/", ""
		if name != "amd64" {
			return nil, fmt.Errorf("lab: a lab on a %s host is not supported", name)
		}
		return &c, nil
	}
	if runtime.GOARCH != "amd64" {
		return nil, fmt.Errorf("lab: a %s lab on a %s host is not supported", name, runtime.GOARCH)
	}
	if root == "" {
		return nil, fmt.Errorf("lab: the %s lab needs the unpacked %s packages (make lab ARCH=%s makes them)", name, name, name)
	}
	if _, err := os.Stat(filepath.Join(root, ".packages")); err != nil {
		return nil, fmt.Errorf("lab: %s has no unpacked %s packages (make lab ARCH=%s makes them): %w", root, name, name, err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	c.Root = abs
	return &c, nil
}

// Foreign reports whether the guest's files come from an unpacked tree.
func (a *Arch) Foreign() bool { return a.Root != "/" }

// hostPath is where the guest's file p is on the host.
func (a *Arch) hostPath(p string) string {
	if !a.Foreign() {
		return p
	}
	return filepath.Join(a.Root, p)
}

// libDirs are the directories the guest's dynamic loader searches without
// an ld.so.cache, which the lab image does not have.
func (a *Arch) libDirs() []string {
	return []string{"/lib/" + a.triplet, "/usr/lib/" + a.triplet, "/lib64", "/usr/lib64", "/lib", "/usr/lib"}
}

// resolve returns the guest path p with every symbolic link resolved, an
// absolute link's target taken inside Root as the guest would.
func (a *Arch) resolve(p string) (string, error) {
	if !a.Foreign() {
		return filepath.EvalSymlinks(p)
	}
	todo := strings.Split(strings.TrimPrefix(path.Clean("/"+p), "/"), "/")
	cur := "/"
	for hops := 0; len(todo) > 0; {
		next := path.Join(cur, todo[0])
		todo = todo[1:]
		fi, err := os.Lstat(a.hostPath(next))
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%s: too many levels of symbolic links", p)
		}
		t, err := os.Readlink(a.hostPath(next))
		if err != nil {
			return "", err
		}
		if !path.IsAbs(t) {
			t = path.Join(cur, t)
		}
		todo = append(strings.Split(strings.TrimPrefix(path.Clean(t), "/"), "/"), todo...)
		cur = "/"
	}
	return cur, nil
}

// guestCommand is how the host runs the guest's program p with args (under
// Emulator for a foreign architecture): the command and its arguments.
func (a *Arch) guestCommand(p string, args ...string) (string, []string) {
	if !a.Foreign() {
		return p, args
	}
	return a.Emulator, append([]string{a.hostPath(p)}, args...)
}

// qemuArgs are the emulator's options for a boot with memMiB of memory.
func (a *Arch) qemuArgs(memMiB int, kernel, initrd, cmdline, console string) []string {
	args := append([]string{"-accel", "tcg"}, a.machine...)
	// debug-threads names the vCPU thread, for the sampling of HostWaits.
	args = append(args, "-name", "debug-threads=on", "-m", strconv.Itoa(memMiB), "-smp", "1",
		"-nodefaults", "-no-user-config", "-display", "none", "-nic", "none", "-no-reboot",
		"-kernel", kernel, "-initrd", initrd, "-append", cmdline)
	return append(args, a.results(console)...)
}
