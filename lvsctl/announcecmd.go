package lvsctl

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/lvskit/lvskit/lvsctl/internal/cliutil"
	"github.com/lvskit/lvskit/lvsctl/record"
	"github.com/lvskit/lvskit/rules"
)

// withdrawCmd is lvsctl withdraw: planned maintenance of a director that
// announces its VIPs (lvsctl run with announce in its file).
type withdrawCmd struct {
	Prefixes []string      `arg:"" optional:"" name:"PREFIX" help:"VIPs or prefixes to withdraw (10.3.0.1, 203.0.113.0/28); none: every one."`
	Wait     time.Duration `name:"wait" placeholder:"DURATION" help:"Then wait, at most this long, until no new connection has reached their services for --quiet (the router moved the traffic); 0 does not wait."`
	Quiet    time.Duration `name:"quiet" default:"10s" placeholder:"DURATION" help:"How long without a new connection counts as moved, with --wait."`
	journalFlag
}

// announceCmd is lvsctl announce: the end of a withdrawal.
type announceCmd struct {
	Prefixes []string `arg:"" optional:"" name:"PREFIX" help:"VIPs or prefixes to announce again; none: every one."`
	journalFlag
}

// parsePrefixes reads VIPs (as host prefixes) and prefixes.
func parsePrefixes(args []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, a := range args {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			ad, aerr := netip.ParseAddr(a)
			if aerr != nil {
				return nil, cliutil.UsageError{Err: fmt.Errorf("%q is neither an address nor a prefix", a), Help: true}
			}
			p = netip.PrefixFrom(ad, ad.BitLen())
		}
		if p.Masked() != p {
			return nil, cliutil.UsageError{Err: fmt.Errorf("%s has host bits set; the prefix is %s", p, p.Masked()), Help: true}
		}
		out = append(out, p)
	}
	return out, nil
}

// withdrawalJournal opens the journal directory to write the withdrawal
// file beside a run that holds its lock, making it when no run ever did.
func (r *runner) withdrawalJournal() (*record.Journal, error) {
	j, err := r.journal(false)
	if errors.Is(err, record.ErrNoJournal) {
		j, err = r.journal(true)
	}
	return j, err
}

// openWithdrawal reads the command's prefixes, opens the journal and
// reads the withdrawal (nil: none); on error, the exit status.
func (r *runner) openWithdrawal(args []string) ([]netip.Prefix, *record.Journal, *record.Withdrawal, int, error) {
	ps, err := parsePrefixes(args)
	if err != nil {
		return nil, nil, nil, exitUsage, err
	}
	j, err := r.withdrawalJournal()
	if err != nil {
		return nil, nil, nil, exitFailed, err
	}
	w, err := j.LoadWithdrawal()
	if err != nil {
		j.Close()
		return nil, nil, nil, exitFailed, err
	}
	return ps, j, w, exitOK, nil
}

// withdraw records the withdrawal for run, waits until run withdrew, and
// with --wait until the traffic moved.
func (r *runner) withdraw(c *withdrawCmd) (int, error) {
	ps, j, w, status, err := r.openWithdrawal(c.Prefixes)
	if err != nil {
		return status, err
	}
	defer j.Close()
	if err := unknownPrefixes(j, ps, nil); err != nil {
		return exitUsage, err
	}
	if w == nil {
		w = &record.Withdrawal{Since: r.env.Now().UTC()}
	}
	if len(ps) == 0 {
		w.All, w.Prefixes = true, nil
	}
	for _, p := range ps {
		if !w.All && !slices.Contains(w.Prefixes, p) {
			w.Prefixes = append(w.Prefixes, p)
		}
	}
	if err := j.SaveWithdrawal(w); err != nil {
		return exitFailed, err
	}
	st, err := r.awaitRun(j, func(a record.Announcement) bool { return !a.Announced && w.Withdraws(a.Prefix) }, w.Withdraws)
	if err != nil || st == nil {
		return exitFailed, err
	}
	var svcs []string
	for _, a := range st.Announce {
		if w.Withdraws(a.Prefix) {
			fmt.Fprintf(r.out, "withdrawn %s: the router stops sending new connections here; the table keeps serving those that come\n", a.Prefix)
			svcs = append(svcs, a.Services...)
		}
	}
	if c.Wait <= 0 {
		return exitOK, nil
	}
	return r.waitMoved(svcs, c.Wait, c.Quiet)
}

// announce takes prefixes (or every one) out of the withdrawal and waits
// until run announces them again.
func (r *runner) announce(c *announceCmd) (int, error) {
	ps, j, w, status, err := r.openWithdrawal(c.Prefixes)
	if err != nil {
		return status, err
	}
	defer j.Close()
	var withdrawn []netip.Prefix
	if w != nil {
		withdrawn = w.Prefixes
	}
	if err := unknownPrefixes(j, ps, withdrawn); err != nil {
		return exitUsage, err
	}
	if w != nil && len(ps) > 0 && w.All {
		return exitUsage, cliutil.UsageError{Err: errors.New("every prefix is withdrawn: 'lvsctl announce' with no prefix ends the withdrawal")}
	}
	if w != nil && len(ps) > 0 {
		w.Prefixes = slices.DeleteFunc(w.Prefixes, func(p netip.Prefix) bool { return slices.Contains(ps, p) })
	} else {
		w = nil
	}
	if err := j.SaveWithdrawal(w); err != nil {
		return exitFailed, err
	}
	asked := func(p netip.Prefix) bool { return len(ps) == 0 || slices.Contains(ps, p) }
	st, err := r.awaitRun(j, func(a record.Announcement) bool { return a.Why != record.WhyWithdrawn }, asked)
	if err != nil || st == nil {
		return exitFailed, err
	}
	for _, a := range st.Announce {
		if !asked(a.Prefix) {
			continue
		}
		if a.Announced {
			fmt.Fprintf(r.out, "announced %s\n", a.Prefix)
		} else {
			fmt.Fprintf(r.out, "%s is no longer withdrawn, but not announced: %s\n", a.Prefix, a.Why)
		}
	}
	return exitOK, nil
}

// unknownPrefixes refuses a prefix that the running run's file does not
// announce, nor the withdrawal names (a prefix is matched exactly: a
// covering one would change nothing). Without a running run that
// announces, any prefix is taken, for the next one.
func unknownPrefixes(j *record.Journal, ps, withdrawn []netip.Prefix) error {
	st, err := j.LoadRun()
	if err != nil || !st.Alive() || len(st.Announce) == 0 {
		return nil
	}
	var known []string
	for _, a := range st.Announce {
		known = append(known, a.Prefix.String())
	}
	for _, p := range ps {
		if !slices.Contains(known, p.String()) && !slices.Contains(withdrawn, p) {
			return cliutil.UsageError{Err: fmt.Errorf("lvsctl run (pid %d) announces no %s: its prefixes are %s", st.PID, p, strings.Join(known, ", "))}
		}
	}
	return nil
}

// awaitRun waits until the running run's record shows done for every
// prefix of its file that which selects (run reads the withdrawal within
// a second); nil with a message when no run announces here.
func (r *runner) awaitRun(j *record.Journal, done func(record.Announcement) bool, which func(netip.Prefix) bool) (*record.Run, error) {
	deadline := r.env.Now().Add(10 * time.Second)
	for {
		st, err := j.LoadRun()
		if err != nil {
			return nil, err
		}
		if !st.Alive() {
			fmt.Fprintln(r.errOut, "lvsctl: no lvsctl run keeps this table: the withdrawal is recorded for the next one")
			return nil, nil
		}
		if len(st.Announce) == 0 {
			return nil, fmt.Errorf("lvsctl run (pid %d) announces nothing: its file %s has no announce", st.PID, st.File)
		}
		all := true
		for _, a := range st.Announce {
			if which(a.Prefix) && !done(a) {
				all = false
			}
		}
		if all {
			return st, nil
		}
		if r.env.Now().After(deadline) {
			return nil, fmt.Errorf("lvsctl run (pid %d) did not take the change within 10s", st.PID)
		}
		r.sleep(100 * time.Millisecond)
	}
}

// waitMoved waits until no new connection has reached services for
// quiet, at most wait: the kernel's connection counters stop growing
// once the router sends this director nothing new.
func (r *runner) waitMoved(services []string, wait, quiet time.Duration) (int, error) {
	client, err := r.open()
	if err != nil {
		return exitFailed, err
	}
	defer client.Close()
	count := func() (uint64, error) {
		svcs, err := client.Services()
		if err != nil {
			return 0, err
		}
		var n uint64
		for _, s := range svcs {
			if slices.Contains(services, rules.KeyOf(&s.Service).String()) {
				n += s.Stats.Conns
			}
		}
		return n, nil
	}
	start := r.env.Now()
	last, err := count()
	if err != nil {
		return exitFailed, err
	}
	since := start
	for {
		r.sleep(time.Second)
		n, err := count()
		if err != nil {
			return exitFailed, err
		}
		now := r.env.Now()
		if n != last {
			last, since = n, now
		}
		if now.Sub(since) >= quiet {
			fmt.Fprintf(r.out, "moved: no new connection for %s (waited %s); the connections still open keep their real servers\n",
				quiet, now.Sub(start).Round(time.Second))
			return exitOK, nil
		}
		if now.Sub(start) >= wait {
			return exitFailed, fmt.Errorf("new connections still arrive after %s (services %s): is the router still sending them here?",
				wait, strings.Join(services, ", "))
		}
	}
}

// sleep waits d (Env.Sleep in tests).
func (r *runner) sleep(d time.Duration) {
	if r.env.Sleep != nil {
		r.env.Sleep(d)
		return
	}
	time.Sleep(d)
}
