package vm

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// Packages are the Debian 12 packages the lab takes its VM from: the
// emulator, the guest kernel with its modules, the guest user space, the
// reference ipvsadm, BIRD 2, and the host tools the image builder runs (modprobe
// resolves module order).
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
	"bird2", // BGP daemon of the ECMP tests (e2e TestECMP)
}

// MissingPackages returns the packages of Packages that dpkg does not list
// as installed.
func MissingPackages() ([]string, error) {
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		return nil, fmt.Errorf("lab: dpkg-query not found: the lab needs a Debian 12 host (packages: %s)", strings.Join(Packages, " "))
	}
	args := append([]string{"-W", "-f", "${Package} ${db:Status-Abbrev}\n"}, Packages...)
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
	for _, p := range Packages {
		if !installed[p] {
			missing = append(missing, p)
		}
	}
	return missing, nil
}

// EnsurePackages installs the missing lab packages with apt-get when running
// as root, and otherwise returns an error naming them and the command that
// installs them. Progress goes to log.
func EnsurePackages(log io.Writer) error {
	missing, err := MissingPackages()
	if err != nil {
		return err
	}
	if len(missing) == 0 {
		return nil
	}
	install := "apt-get install -y --no-install-recommends " + strings.Join(missing, " ")
	if os.Geteuid() != 0 {
		return fmt.Errorf("lab: missing Debian packages: %s\n(run the lab as root so it installs them, or run: apt-get update && %s)",
			strings.Join(missing, " "), install)
	}
	fmt.Fprintf(log, "lab: installing missing Debian packages: %s\n", strings.Join(missing, " "))
	var buf bytes.Buffer
	for _, argv := range [][]string{
		{"apt-get", "update"},
		append([]string{"apt-get", "install", "-y", "--no-install-recommends"}, missing...),
	} {
		buf.Reset()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout = &buf
		cmd.Stderr = &buf
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("lab: %s: %v\n%s", strings.Join(argv, " "), err, tail(buf.String(), 40))
		}
	}
	still, err := MissingPackages()
	if err != nil {
		return err
	}
	if len(still) > 0 {
		return fmt.Errorf("lab: still missing after apt-get install: %s", strings.Join(still, " "))
	}
	return nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
