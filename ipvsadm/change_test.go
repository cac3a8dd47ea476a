package ipvsadm

import (
	"fmt"
	"testing"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/ipvsadm/cmdline"
	"golang.org/x/sys/unix"
)

// A stop whose kernel acknowledgement never comes (ipvs.ErrNoAnswer) was
// carried out; any other silence or refusal is a kernel error.
func TestChangeOutcomeNoAnswer(t *testing.T) {
	noAnswer := &ipvs.OpError{Op: ipvs.CmdDelDaemon, Err: fmt.Errorf("%w: %w", ipvs.ErrNoAnswer, unix.EINTR)}
	cases := []struct {
		cmd  cmdline.Command
		err  error
		want cmdline.Kind
	}{
		{cmdline.CmdStopDaemon, nil, cmdline.Success},
		{cmdline.CmdStopDaemon, noAnswer, cmdline.Success},
		{cmdline.CmdStopDaemon, unix.ESRCH, cmdline.KernelError},
		{cmdline.CmdStartDaemon, noAnswer, cmdline.KernelError},
		{cmdline.CmdAddService, unix.EEXIST, cmdline.KernelError},
	}
	for _, c := range cases {
		got := changeOutcome(c.cmd, c.err)
		if got.Kind != c.want {
			t.Errorf("changeOutcome(%v, %v) = %v, want %v", c.cmd.Name(), c.err, got.Kind, c.want)
		}
		if c.want == cmdline.Success && (got.Stdout != "" || got.Stderr != "") {
			t.Errorf("changeOutcome(%v, %v) prints %q%q", c.cmd.Name(), c.err, got.Stdout, got.Stderr)
		}
	}
}
