// Package cliutil holds what lvsctl's commands and lvsctl run share.
//
// That is the usage error, the guards of a plan, and the lines that tell the
// user what happened.
package cliutil

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/rules"
)

// UsageError is a mistake on the command line or in the rules file: exit 2,
// nothing changed. Help points the user at the command's help.
type UsageError struct {
	Err  error
	Help bool
}

func (e UsageError) Error() string { return e.Err.Error() }

// GuardFlags are the guards apply and run share: a plan that takes out
// too much of the table, or a file without any service, is refused
// before the first change.
type GuardFlags struct {
	AllowEmpty bool `name:"allow-empty" help:"Accept a FILE without any service, which deletes every service."`
	MaxDelete  int  `name:"max-delete" default:"50" help:"Refuse a plan that takes out more than this percentage of the kernel's real servers (a service without any counts as one); 100 allows any."`
}

// RemovalGuard refuses a plan that takes out more than --max-delete
// percent of the kernel's real servers: what a truncated file, or a file
// meant for another director, asks for.
func (g GuardFlags) RemovalGuard(p *rules.Plan) error {
	n, total := p.Removals(), p.Kernel.Servers
	if n == 0 || g.MaxDelete >= 100 || n*100 <= g.MaxDelete*total {
		return nil
	}
	return UsageError{Err: fmt.Errorf("the plan takes out %d of the kernel's %d real servers (%d%%), more than --max-delete %d%%; "+
		"nothing was changed. Check FILE; --max-delete 100 applies it", n, total, n*100/total, g.MaxDelete)}
}

// KernelError says what an error reaching or reading the kernel's IPVS
// means for the user.
func KernelError(err error) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("you must be root (CAP_NET_ADMIN) to use the kernel's IPVS: %w", err)
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("the kernel has no IPVS (load it with modprobe ip_vs): %w", err)
	}
	return fmt.Errorf("cannot reach the kernel's IPVS: %w", err)
}

// ReadError is an error reading the kernel's table, explained when it is
// a matter of privilege.
func ReadError(err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return KernelError(err)
	}
	return err
}

// Summary counts a plan's changes in one line.
func Summary(p *rules.Plan) string {
	n := p.Count()
	var parts []string
	for _, a := range []rules.Action{rules.AddService, rules.AddDest, rules.ReAddDest, rules.EditService, rules.EditDest, rules.DeleteDest, rules.DeleteService} {
		if n[a] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[a], a))
		}
	}
	return fmt.Sprintf("%s: %s", Plural(len(p.Changes), "change", "changes"), strings.Join(parts, ", "))
}

// Plural is n and the noun in the number n asks for.
func Plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// PlanLine is a plan in one line: its Summary, or that it has nothing to
// change.
func PlanLine(p *rules.Plan) string {
	if p == nil || p.InSync() {
		return "in sync, no changes"
	}
	return Summary(p)
}

// EventLine is an event in one line.
func EventLine(e rules.Event) string {
	var b strings.Builder
	b.WriteString(e.Time.UTC().Format("15:04:05.000 "))
	switch e.Kind {
	case rules.EventChange:
		b.WriteString(rules.Describe(e.Change))
		for _, f := range e.Change.Fields {
			fmt.Fprintf(&b, " %s %s->%s", f.Name, f.Old, f.New)
		}
	case rules.EventRestoreFlags:
		fmt.Fprintf(&b, "restore-flags %s (drains ended)", e.Service)
	default:
		fmt.Fprintf(&b, "%s %s -r %s", e.Kind, e.Service, e.Dest)
		switch e.Kind {
		case rules.EventDrainStart:
			fmt.Fprintf(&b, " weight 0, deadline in %s", e.Left.Round(time.Second))
		case rules.EventDrainTimeout:
			fmt.Fprintf(&b, " deleted with active %d, inactive %d", e.Active, e.Inactive)
		case rules.EventDrainDone:
			b.WriteString(" deleted, no connection left")
		case rules.EventDrainWait:
			fmt.Fprintf(&b, " active %d, inactive %d, %s left", e.Active, e.Inactive, e.Left.Round(time.Second))
		}
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": FAILED: %v", e.Err)
	}
	return b.String()
}

// LongRunning gives a command that runs for hours (run, top) the
// collector's default pace, unless the environment sets GOGC: lvsctl's
// one-shot commands collect less often (GOGC=400, decision 0013), which
// would let a daemon's heap grow to five times what it holds.
func LongRunning() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(100)
	}
}
