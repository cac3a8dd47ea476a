package lvsctl

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/lvsctl/internal/cliutil"
	"github.com/lvskit/lvskit/lvsctl/record"
	"github.com/lvskit/lvskit/rules"
)

// apply makes the kernel equal FILE and reports what it did.
func (r *runner) apply(f *planFlags) (int, error) {
	want, client, status, err := r.desiredAndKernel(f)
	if err != nil {
		return status, err
	}
	defer client.Close()
	j, err := r.journal(true)
	if errors.Is(err, record.ErrLocked) {
		return r.handToRun(f, err)
	}
	if err != nil {
		return exitFailed, err
	}
	defer j.Close()
	prior, err := j.Load()
	if err != nil {
		return exitFailed, fmt.Errorf("%w (remove it to go on, after checking the weights it records)", err)
	}
	// With --json, stdout holds the one document; the event lines go to
	// stderr.
	out := r.out
	if f.JSON {
		out = r.errOut
	}
	var priorDrains []rules.DrainEntry
	if prior != nil {
		priorDrains = prior.Drains
		for _, e := range prior.Drains {
			fmt.Fprintf(out, "journal: resuming %s -r %s (weight %d before the drain, deadline %s)\n",
				e.Service, e.Dest, e.Weight, e.Deadline.UTC().Format(time.RFC3339))
		}
	}
	var rep reporter
	if r.env.Terminal && !f.JSON {
		rep = &liveReporter{w: out, now: r.env.Now, drains: map[string]string{}}
	} else {
		rep = &lineReporter{w: bufio.NewWriter(out)}
	}
	var applied []rules.Change
	planned := false
	a := &rules.Applier{
		Client:       client,
		DrainTimeout: f.DrainTimeout,
		Journal:      j,
		Source:       f.File,
		LiveConns:    func() (map[rules.DestKey]int, error) { return liveConns(r.connFile()) },
		Events: func(e rules.Event) {
			if e.Kind == rules.EventChange && e.Err == nil {
				applied = append(applied, *e.Change)
			}
			rep.event(e)
		},
		Now: r.env.Now,
		// Each plan is checked before its first change; the first one's
		// warnings come before the changes they warn of.
		Check: func(p *rules.Plan) error {
			if err := f.RemovalGuard(p); err != nil {
				return err
			}
			if !planned {
				planned = true
				for _, w := range p.Warnings {
					fmt.Fprintf(out, "warning: %s\n", w)
				}
			}
			return nil
		},
	}
	res, err := a.Converge(r.env.Context, want, r.diffOptions(f), priorDrains)
	rep.finish()
	var ue cliutil.UsageError
	if errors.As(err, &ue) {
		return exitUsage, err
	}
	if err != nil {
		return exitFailed, fmt.Errorf("apply stopped: %w; run it again to converge (lvsctl status shows drains left)", cliutil.ReadError(err))
	}
	if f.JSON {
		return r.reportJSON(res, applied)
	}
	return r.report(res, len(applied)), nil
}

// report prints the apply's end and returns its status.
func (r *runner) report(res *rules.ConvergeResult, applied int) int {
	fmt.Fprintf(r.out, "plan: %s\n", cliutil.PlanLine(res.Plan))
	if res.Stopped {
		fmt.Fprintf(r.out, "stopped: the kernel refused %s; %s made\n",
			cliutil.Plural(len(res.Failed), "change", "changes"), cliutil.Plural(applied, "other change was", "other changes were"))
		for _, f := range res.Failed {
			fmt.Fprintf(r.out, "  refused: %v\n", &f)
		}
		if len(res.Held) > 0 {
			fmt.Fprintf(r.out, "nothing was drained or deleted: %s held back:\n", cliutil.Plural(len(res.Held), "removal", "removals"))
			for i := range res.Held {
				fmt.Fprintf(r.out, "  held: %s\n", rules.Describe(&res.Held[i]))
			}
		} else {
			fmt.Fprintln(r.out, "nothing was drained or deleted")
		}
		fmt.Fprintln(r.out, "fix what the kernel refused and apply again; it plans from the kernel's table as it is then")
		return exitFailed
	}
	if res.Rounds > 1 {
		fmt.Fprintf(r.out, "another program changed the kernel's table during the apply: read and planned again %s\n",
			cliutil.Plural(res.Rounds-1, "time", "times"))
	}
	if d := res.Drain; d != nil {
		for _, f := range d.Failed {
			fmt.Fprintf(r.out, "not applied: %v\n", &f)
		}
		if d.Done+d.TimedOut+d.Gone > 0 {
			fmt.Fprintf(r.out, "drains: %d ended without connections, %d at the deadline, %d deleted by someone else\n", d.Done, d.TimedOut, d.Gone)
		}
		if len(d.Pending) > 0 {
			fmt.Fprintf(r.out, "interrupted: %s still draining at weight 0, recorded in the journal; "+
				"'lvsctl apply FILE' finishes them (or cancels them when FILE keeps the server), 'lvsctl status' lists them\n",
				cliutil.Plural(len(d.Pending), "real server", "real servers"))
			return exitInterrupted
		}
	}
	if !res.Converged() {
		fmt.Fprintf(r.out, "not converged: %s still differ:\n", cliutil.PlanLine(res.Remaining))
		for i := range res.Remaining.Changes {
			fmt.Fprintf(r.out, "  %s\n", rules.Describe(&res.Remaining.Changes[i]))
		}
		fmt.Fprintln(r.out, "run the apply again; it plans from the kernel's table as it is then")
		return exitFailed
	}
	fmt.Fprintln(r.out, "converged: the kernel's table equals the file")
	return exitOK
}

// reporter shows an apply's events.
type reporter interface {
	event(rules.Event)
	finish()
}

// lineReporter writes one line per event, for logs and scripts; drain
// polls are not events.
type lineReporter struct {
	w       *bufio.Writer
	flushed time.Time // when w was last flushed
}

// flushEvery bounds how late a change's line reaches a log. Changes come
// in bursts of thousands, and a write per line (a system call each) costs
// more than the changes themselves (figures: decision 0013); drain events
// come seldom and are written at once.
const flushEvery = 100 * time.Millisecond

func (l *lineReporter) event(e rules.Event) {
	if e.Kind == rules.EventDrainWait {
		return
	}
	fmt.Fprintln(l.w, cliutil.EventLine(e))
	if e.Kind != rules.EventChange || e.Time.Sub(l.flushed) >= flushEvery {
		l.w.Flush()
		l.flushed = e.Time
	}
}

func (l *lineReporter) finish() { l.w.Flush() }

// liveReporter is the terminal display: changes scroll, and a block at
// the bottom shows each drain's connections and time left, redrawn on
// every poll.
type liveReporter struct {
	w      io.Writer
	now    func() time.Time
	drains map[string]string // drain -> its status line
	drawn  int               // lines of the block on screen
}

func (l *liveReporter) event(e rules.Event) {
	key := e.Service.String() + " -r " + e.Dest.String()
	switch e.Kind {
	case rules.EventDrainWait, rules.EventDrainStart:
		l.drains[key] = fmt.Sprintf("draining %s: active %d, inactive %d, %s left", key, e.Active, e.Inactive, e.Left.Round(time.Second))
		l.redraw("")
	case rules.EventDrainDone, rules.EventDrainTimeout, rules.EventDrainGone:
		delete(l.drains, key)
		l.redraw(cliutil.EventLine(e))
	default:
		l.redraw(cliutil.EventLine(e))
	}
}

// redraw clears the block, prints line (when not empty) and draws the
// block again.
func (l *liveReporter) redraw(line string) {
	if l.drawn > 0 {
		fmt.Fprintf(l.w, "\x1b[%dA\x1b[J", l.drawn)
	}
	if line != "" {
		fmt.Fprintln(l.w, line)
	}
	keys := make([]string, 0, len(l.drains))
	for k := range l.drains {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintln(l.w, l.drains[k])
	}
	l.drawn = len(keys)
}

func (l *liveReporter) finish() {
	l.drawn = 0 // leave the last state on screen
}

// handToRun answers an apply while another apply or a run holds the
// journal: a run of the same file is asked to reload it (SIGHUP), keeping
// every health state; any other file is refused, since the run would put
// its own back.
func (r *runner) handToRun(f *planFlags, locked error) (int, error) {
	st := r.runState()
	if !st.Alive() {
		return exitFailed, locked
	}
	if record.Abs(f.File) == st.File && f.File != "-" {
		if err := unix.Kill(st.PID, unix.SIGHUP); err != nil {
			return exitFailed, fmt.Errorf("lvsctl run (pid %d) owns this table; asking it to reload %s: %w", st.PID, st.File, err)
		}
		fmt.Fprintf(r.out, "handed %s to lvsctl run (pid %d): it reloads the file, keeping each real server's health\n", st.File, st.PID)
		return exitOK, nil
	}
	return exitFailed, fmt.Errorf("lvsctl run (pid %d) keeps this table as %s says, with health checks; "+
		"change that file and reload the run (systemctl reload lvsctl, or lvsctl apply %s); "+
		"lvsctl plan FILE shows what FILE would change", st.PID, st.File, st.File)
}
