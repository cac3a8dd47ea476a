package vm

import (
	"fmt"
	"os/exec"
	"strings"
)

// Packages are the Debian 12 packages the lab takes its VM from: the
// emulator, the guest kernel with its modules, the guest user space, the
// reference ipvsadm, BIRD 2, keepalived, tmux and watch (with the
// terminal descriptions they read), and the host tools the image builder
// runs (modprobe resolves module order).
var Packages = []string{
	"qemu-system-x86",
	"linux-image-cloud-amd64",
	"busybox-static",
	"iptables",
	"iproute2",
	"ipvsadm",
	"kmod",
	"bash",
	"dash",
	"netbase", // /etc/services and /etc/protocols
	"cpio",
	"bird2",        // BGP speaker of the ECMP topology (e2e)
	"keepalived",   // the oracle of lvsctl's checks and keepalived import
	"tmux",         // drives lvsctl top's full screen in the lab
	"procps",       // watch(1), what lvsctl top's cost is measured against
	"ncurses-base", // the terminal descriptions tmux and watch read
	"libc-bin",     // C.UTF-8, the locale tmux needs
}

// Arm64Packages are the host's packages of the arm64 lab: the emulator,
// qemu-aarch64-static (busybox lists its applets under it), and what the
// image builder takes from the host: modprobe and depmod (kmod), cpio,
// netbase's /etc files, and iptables' command names. The guest's own
// packages are arm64 builds unpacked by tools/lab-root.sh (the Makefile's
// LAB_GUEST_PACKAGES).
var Arm64Packages = []string{"qemu-system-arm", "qemu-user-static", "kmod", "cpio", "netbase", "iptables"}

// missingPackages returns the packages of pkgs that dpkg does not list as
// installed (on the host: only the host's own architecture counts).
func missingPackages(pkgs []string) ([]string, error) {
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		return nil, fmt.Errorf("lab: dpkg-query not found: the lab needs a Debian 12 host (packages: %s)", strings.Join(pkgs, " "))
	}
	args := append([]string{"-W", "-f", "${Package} ${db:Status-Abbrev}\n"}, pkgs...)
	// dpkg-query exits 1 when some package is unknown; its output still
	// lists the known ones.
	out, _ := exec.Command("dpkg-query", args...).Output()
	installed := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && strings.HasPrefix(f[1], "ii") {
			installed[strings.SplitN(f[0], ":", 2)[0]] = true
		}
	}
	var missing []string
	for _, p := range pkgs {
		if !installed[p] {
			missing = append(missing, p)
		}
	}
	return missing, nil
}

// checkPackages returns an error naming the lab packages that are missing
// and the command that installs them. The lab installs nothing itself:
// `make deps` installs every package the suite needs, once, before any test
// runs (several test processes installing at once is what made a fresh
// machine's first run fail).
func checkPackages(pkgs []string) error {
	missing, err := missingPackages(pkgs)
	if err != nil {
		return err
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("lab: missing Debian packages: %s\n(run `make deps` as root, or: apt-get update && apt-get install -y --no-install-recommends %s)",
		strings.Join(missing, " "), strings.Join(missing, " "))
}
