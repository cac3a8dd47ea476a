package lvsctl

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/lvskit/lvskit/lvsctl/internal/cliutil"
	"github.com/lvskit/lvskit/rules/keepalived"
)

type importCmd struct {
	Keepalived importKeepalivedCmd `cmd:"" help:"Convert keepalived.conf's virtual servers (following its includes) into the YAML lvsctl run reads; notices go to stderr."`
}

type importKeepalivedCmd struct {
	File  string `arg:"" name:"FILE" type:"path" help:"keepalived's configuration (/etc/keepalived/keepalived.conf)."`
	Lossy bool   `name:"lossy" help:"Convert what the desired state cannot say exactly (a comment in the output and a warning on stderr each) instead of refusing it."`
	// ConfigID is keepalived's -i.
	ConfigID string `name:"config-id" placeholder:"ID" help:"Read the configuration as keepalived -i ID does: its @ID lines, not its @^ID ones, and $${_INSTANCE} (default: this host's name up to its first '.', keepalived's default)."`
}

// shortHostname is keepalived's configuration id without -i: the node
// name up to its first '.' (keepalived/core/main.c).
func shortHostname() string {
	h, _ := os.Hostname()
	name, _, _ := strings.Cut(h, ".")
	return name
}

// importKeepalived prints FILE's virtual servers as a commented desired
// state. It reads files only: nothing touches the kernel. Every notice,
// change and refusal is printed on stderr as FILE:LINE: text, in the
// order keepalived reads the lines; any refusal is exit 2 with nothing on
// stdout.
func (r *runner) importKeepalived(c *importKeepalivedCmd) (int, error) {
	id := c.ConfigID
	if id == "" {
		id = shortHostname()
	}
	res, err := keepalived.Import(c.File, keepalived.Options{Lossy: c.Lossy, ConfigID: id})
	var refused keepalived.Errors
	if err != nil && !errors.As(err, &refused) {
		return exitUsage, cliutil.UsageError{Err: err}
	}
	for _, n := range res.Notices {
		kind := "notice"
		switch {
		case n.Refused:
			kind = "error"
		case n.Lossy:
			kind = "warning: changed"
		}
		fmt.Fprintf(r.errOut, "lvsctl: %s: %s\n", kind, n)
	}
	if len(refused) > 0 {
		what := "refusal"
		if len(refused) > 1 {
			what = "refusals"
		}
		return exitUsage, cliutil.UsageError{Err: fmt.Errorf("%s: %d %s; nothing written", c.File, len(refused), what)}
	}
	if err := keepalived.WriteYAML(r.out, res); err != nil {
		return exitFailed, err
	}
	return exitOK, nil
}
