package lvsctl

import (
	"fmt"

	"github.com/lvskit/lvskit/rules"
)

// guardFlags are the guards apply and run share: a plan that takes out
// too much of the table, or a file without any service, is refused
// before the first change.
type guardFlags struct {
	AllowEmpty bool `name:"allow-empty" help:"Accept a FILE without any service, which deletes every service."`
	MaxDelete  int  `name:"max-delete" default:"50" help:"Refuse a plan that takes out more than this percentage of the kernel's real servers (a service without any counts as one); 100 allows any."`
}

// removalGuard refuses a plan that takes out more than --max-delete
// percent of the kernel's real servers: what a truncated file, or a file
// meant for another director, asks for.
func (g guardFlags) removalGuard(p *rules.Plan) error {
	n, total := p.Removals(), p.Kernel.Servers
	if n == 0 || g.MaxDelete >= 100 || n*100 <= g.MaxDelete*total {
		return nil
	}
	return usageError{err: fmt.Errorf("the plan takes out %d of the kernel's %d real servers (%d%%), more than --max-delete %d%%; "+
		"nothing was changed. Check FILE; --max-delete 100 applies it", n, total, n*100/total, g.MaxDelete)}
}
