package lvsctl

import (
	"fmt"

	"github.com/lvskit/lvskit/lvsctl/internal/cliutil"
	"github.com/lvskit/lvskit/rules/keepalived"
)

type importCmd struct {
	Keepalived importKeepalivedCmd `cmd:"" help:"Convert keepalived.conf's virtual servers (following its includes) into the YAML lvsctl run reads; notices go to stderr."`
}

type importKeepalivedCmd struct {
	File  string `arg:"" name:"FILE" type:"path" help:"keepalived's configuration (/etc/keepalived/keepalived.conf)."`
	Lossy bool   `name:"lossy" help:"Convert what the desired state cannot say exactly (a comment in the output and a warning on stderr each) instead of refusing it."`
}

// importKeepalived prints FILE's virtual servers as a commented desired
// state. It reads files only: nothing touches the kernel. A statement
// that cannot be converted exactly is an error naming its line (exit 2)
// unless --lossy; every notice is printed on stderr as FILE:LINE: text.
func (r *runner) importKeepalived(c *importKeepalivedCmd) (int, error) {
	res, err := keepalived.Import(c.File, keepalived.Options{Lossy: c.Lossy})
	if err != nil {
		return ExitUsage, cliutil.UsageError{Err: err}
	}
	for _, n := range res.Notices {
		kind := "notice"
		if n.Lossy {
			kind = "warning: changed"
		}
		fmt.Fprintf(r.errOut, "lvsctl: %s: %s\n", kind, n)
	}
	if err := keepalived.WriteYAML(r.out, res); err != nil {
		return ExitFailed, err
	}
	return ExitOK, nil
}
