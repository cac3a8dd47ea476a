package main

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/lvskit/lvskit/internal/kmod"
	"github.com/lvskit/lvskit/netfilter"
)

// modprobe is the real netfilter.Modules: it asks internal/kmod whether a
// module is there, and runs modprobe(8) to load or unload.
type modprobe struct{}

var _ netfilter.Modules = modprobe{}

// Loaded reports whether the module is loaded or built in.
func (modprobe) Loaded(name string) (bool, error) { return modules.Loaded(name) }

// modules is the running kernel's module tree, read once.
var modules kmod.Modules

// Load and Unload run modprobe. Module names come from lvsprep's profiles
// (and from state files only when they name a step of a profile); "--"
// keeps one from ever being read as an option.
func (modprobe) Load(name string) error { return runModprobe("--", name) }

// Unload runs modprobe -r.
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
