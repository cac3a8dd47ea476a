//go:build unix

package health

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// probeExec runs the check's command in its own process group, as the
// check's user when running as root; when ctx ends the whole group is
// killed. A dynamic check's exit status 2 to 255 is a pass with a weight
// (a *WeightResult); 1 fails, as does a signal.
func probeExec(ctx context.Context, t Target, c *config) error {
	s := c.spec
	cmd := exec.CommandContext(ctx, s.Command[0], s.Command[1:]...)
	cmd.Env = t.execEnv()
	cmd.Dir = "/"
	attr := &syscall.SysProcAttr{Setpgid: true}
	if os.Geteuid() == 0 {
		uid, gid, err := lookupUser(s.User)
		if err != nil {
			return fmt.Errorf("exec: user %q: %v", s.User, err)
		}
		attr.Credential = &syscall.Credential{Uid: uid, Gid: gid}
	}
	cmd.SysProcAttr = attr
	cmd.Cancel = func() error {
		// The group's id is the leader's pid, which Wait has not reaped yet.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("exec: start %s: %s", s.Command[0], errText(err))
	}
	err := cmd.Wait()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if code := ee.ExitCode(); s.Dynamic && code >= 2 {
			return &WeightResult{Weight: uint32(code - 2)}
		}
		return fmt.Errorf("exec: %s", ee.ProcessState)
	}
	return fmt.Errorf("exec: %v", err)
}
