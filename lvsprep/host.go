package lvsprep

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/lvskit/lvskit/internal/netnsid"
	"github.com/lvskit/lvskit/ipvs"
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
	// IPVS opens the kernel's IPVS tables, which check reads for the ECMP
	// profile.
	IPVS func() (ipvs.Client, error)
	// IsRoot reports whether changes may be attempted.
	IsRoot func() bool
	Now    func() time.Time
	// StateDir is the default for --state-dir.
	StateDir string
	// UID is a user whose state files are trusted besides root's: the
	// effective user, so that a read-only run by another user (check,
	// status, --dry-run) can read its own; -1 trusts root alone.
	UID int
	// Identity tells which network namespace instance lvsprep runs in
	// (nil: not checked).
	Identity func() (nsIdentity, error)

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
		IPVS:     openIPVS,
		IsRoot:   func() bool { return os.Geteuid() == 0 },
		Now:      time.Now,
		StateDir: netnsid.Dir(DefaultStateDir),
		UID:      os.Geteuid(),
		Identity: currentIdentity,
	}
}

func openIPVS() (ipvs.Client, error) {
	c, err := ipvs.Open()
	if err != nil {
		return nil, err
	}
	return c, nil
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

// Module names come from the profiles (and from state files only when they
// name a step of a profile); "--" keeps one from ever being read as an
// option.
func (modprobe) Load(name string) error   { return runModprobe("--", name) }
func (modprobe) Unload(name string) error { return runModprobe("-r", "--", name) }

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
