package lvsctl

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/lvskit/lvskit/lvsctl/internal/cliutil"
	lvsrun "github.com/lvskit/lvskit/lvsctl/run"
	"github.com/lvskit/lvskit/rules"
	"github.com/lvskit/lvskit/rules/desired"
)

type runCmd struct {
	File          string        `arg:"" name:"FILE" help:"Desired state with checks: YAML or JSON (version 2), or ipvsadm-save text with --checks."`
	Checks        string        `name:"checks" placeholder:"FILE" help:"Checks for a rules-text FILE: YAML or JSON naming services as ipvsadm -Sn writes them."`
	DrainTimeout  time.Duration `name:"drain-timeout" default:"${drain_timeout}" help:"Longest drain of a real server that leaves FILE on a reload; 0 deletes at once."`
	MetricsListen string        `name:"metrics-listen" placeholder:"ADDR" help:"Serve Prometheus metrics on ADDR (host:port); nothing listens without it."`
	cliutil.GuardFlags
	journalFlag
}

// readRunDesired reads FILE and its checks: from FILE itself (version 2),
// or from --checks for rules text.
func (r *runner) readRunDesired(f *runCmd) (*rules.Set, *desired.Health, error) {
	pf := &planFlags{File: f.File, GuardFlags: f.GuardFlags}
	want, h, err := r.readDesiredHealth(pf)
	if err != nil {
		return nil, nil, err
	}
	if f.Checks != "" {
		if h != nil {
			return nil, nil, cliutil.UsageError{Err: fmt.Errorf("%s has checks of its own; --checks is for rules text", f.File)}
		}
		data, err := os.ReadFile(f.Checks)
		if err != nil {
			return nil, nil, cliutil.UsageError{Err: fmt.Errorf("reading %s: %w", f.Checks, err)}
		}
		if h, err = desired.ReadChecks(f.Checks, data, want); err != nil {
			return nil, nil, cliutil.UsageError{Err: err}
		}
	}
	return want, h, nil
}

// run is lvsctl run (package run): its files are read as plan and apply
// read theirs, with a cache of the YAML file's entries between reloads.
func (r *runner) run(f *runCmd) (int, error) {
	r.yamlCache = &desired.YAMLCache{}
	root, dir := r.journalPaths()
	err := lvsrun.Run(lvsrun.Config{
		File: f.File, Checks: f.Checks, DrainTimeout: f.DrainTimeout, MetricsListen: f.MetricsListen, Guard: f.GuardFlags,
		Read:        func() (*rules.Set, *desired.Health, error) { return r.readRunDesired(f) },
		JournalRoot: root, JournalDir: dir,
		Open: r.env.Open, Now: r.env.Now, Context: r.env.Context, Reload: r.env.Reload,
		Probe: r.env.Probe, Notify: r.env.Notify, Watchdog: r.env.Watchdog, Announce: r.env.Announce,
		Log: r.errOut,
	})
	var ue cliutil.UsageError
	switch {
	case err == nil:
		return exitOK, nil
	case errors.As(err, &ue):
		return exitUsage, err
	default:
		return exitFailed, err
	}
}
