package lvsprep

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/lvskit/lvskit/netfilter"
	"golang.org/x/sys/unix"
)

// Host is everything lvsprep reads and changes on a machine. Main uses the
// real one; tests build one from netfilter's fakes.
type Host struct {
	Sysctl  netfilter.Sysctl
	Links   netfilter.Links
	Modules netfilter.Modules
	// IPTables returns the rule table client for a family; it is called only
	// when a profile has rules, because the real one needs the iptables
	// command.
	IPTables func(netfilter.Family) (netfilter.IPTables, error)
	// IsRoot reports whether changes may be attempted.
	IsRoot func() bool
	Now    func() time.Time
	// StateDir is the default for --state-dir.
	StateDir string

	ipt map[netfilter.Family]netfilter.IPTables
}

func (h *Host) iptables(f netfilter.Family) (netfilter.IPTables, error) {
	if ipt, ok := h.ipt[f]; ok {
		return ipt, nil
	}
	ipt, err := h.IPTables(f)
	if err != nil {
		return nil, err
	}
	if h.ipt == nil {
		h.ipt = map[netfilter.Family]netfilter.IPTables{}
	}
	h.ipt[f] = ipt
	return ipt, nil
}

// RealHost is the machine lvsprep runs on, in the current network namespace.
func RealHost() *Host {
	return &Host{
		Sysctl:   netfilter.ProcSys{},
		Links:    netfilter.Netlink{},
		Modules:  modprobe{},
		IPTables: netfilter.NewIPTables,
		IsRoot:   func() bool { return os.Geteuid() == 0 },
		Now:      time.Now,
		StateDir: namespaceStateDir(DefaultStateDir),
	}
}

// namespaceStateDir gives each network namespace its own state directory
// below root. A namespace is a separate network stack with its own
// addresses, routes, rules and per-namespace sysctls, but it shares /run
// with the host: without this, "realserver dr --vip X" in two namespaces
// (containers, or the lab's hosts) would share one state file. The initial
// namespace uses root itself; a named one (ip netns add) netns-NAME, any
// other netns-INODE.
func namespaceStateDir(root string) string {
	self, err := os.Stat("/proc/self/ns/net")
	if err != nil {
		return root
	}
	if initial, err := os.Stat("/proc/1/ns/net"); err != nil || os.SameFile(self, initial) {
		return root
	}
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			if fi, err := os.Stat(filepath.Join("/run/netns", e.Name())); err == nil && os.SameFile(self, fi) {
				return filepath.Join(root, "netns-"+e.Name())
			}
		}
	}
	if st, ok := self.Sys().(*syscall.Stat_t); ok {
		return filepath.Join(root, fmt.Sprintf("netns-%d", st.Ino))
	}
	return root
}

// modprobe is the real Modules: it looks in /sys/module and the kernel's
// modules.builtin, and runs modprobe(8) to load or unload.
type modprobe struct{}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

func (modprobe) Loaded(name string) (bool, error) {
	modRoot := ""
	if r := kernelRelease(); r != "" {
		modRoot = "/lib/modules/" + r
	}
	return netfilter.ModuleLoaded("", modRoot, name)
}

func (modprobe) Load(name string) error   { return runModprobe(name) }
func (modprobe) Unload(name string) error { return runModprobe("-r", name) }

func runModprobe(args ...string) error {
	path, err := exec.LookPath("modprobe")
	if err != nil {
		return errors.New("modprobe not found in PATH (install kmod)")
	}
	var out bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("modprobe %s: %s", strings.Join(args, " "), msg)
	}
	return nil
}
