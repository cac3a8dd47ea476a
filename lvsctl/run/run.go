// Package run is lvsctl run, the health-checking daemon.
//
// It applies a desired state with health checks, then keeps the kernel's
// table as the file and the checks say.
package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/lvsctl/internal/cliutil"
	"github.com/lvskit/lvskit/lvsctl/record"
	"github.com/lvskit/lvskit/rules"
	"github.com/lvskit/lvskit/rules/desired"
)

// Config is what lvsctl gives a run: its flags, how to read its files,
// and the host. Read, Open, Now, Context and Log are required.
type Config struct {
	// File and Checks are FILE and --checks as given; the record and the
	// journal keep them absolute.
	File, Checks string
	// DrainTimeout bounds the drain of a real server that leaves File on a
	// reload.
	DrainTimeout time.Duration
	// MetricsListen is the address of the Prometheus metrics; "" serves
	// none.
	MetricsListen string
	// Guard refuses a start or a reload that takes out too much of the
	// table, as apply does.
	Guard cliutil.GuardFlags
	// Read reads and checks File and its checks, at the start and at each
	// reload; its errors are usage errors (cliutil.UsageError).
	Read func() (*rules.Set, *desired.Health, error)
	// JournalRoot and JournalDir locate the journal directory (see
	// record.Open); run holds it locked while it runs.
	JournalRoot, JournalDir string
	// Open connects to the kernel's IPVS; the metrics open a client of
	// their own with it at each scrape.
	Open func() (ipvs.Client, error)
	Now  func() time.Time
	// Context ends the run (the main ends it on SIGINT and SIGTERM).
	Context context.Context
	// Reload delivers SIGHUP: the run reads its files again.
	Reload <-chan os.Signal
	// Probe runs the health probes (nil: the checker's own).
	Probe func(ctx context.Context, t health.Target) error
	// Notify tells the service manager the run's state (nil: sd_notify
	// when $NOTIFY_SOCKET is set); Watchdog overrides $WATCHDOG_USEC.
	Notify   func(state string)
	Watchdog time.Duration
	// Log receives the run's log lines.
	Log io.Writer
	// Announce opens the device the run announces its prefixes on (nil:
	// package announce's, which dies with the process).
	Announce func(device string) (Announcer, error)
}

// Timing of lvsctl run.
const (
	// settle gathers the health changes that come together into one
	// change of the table.
	settle = 50 * time.Millisecond
	// healthDuty bounds the time health changes of the table take: after
	// one that took d, the next waits at least (healthDuty-1)×d, so many
	// servers flapping at once (a director short of CPU) cannot keep run
	// rereading a large table back to back.
	healthDuty = 5
	// resyncEvery is how often run puts back what someone else changed,
	// and writes its record for status; resyncDuty keeps resyncs to at
	// most a twentieth of the time where reading a large table takes
	// seconds (figures: decision 0014).
	resyncEvery = 30 * time.Second
	resyncDuty  = 20
	// drainPoll is how often leaving real servers' connections are read.
	drainPoll = time.Second
	// lateEvery is how often run looks whether probes keep to their
	// schedule, to log when they fall behind and when they catch up.
	lateEvery = 5 * time.Second
)

// runner state of one lvsctl run.
type runLoop struct {
	cfg     *Config
	client  ipvs.Client
	j       *record.Journal
	checker *health.Checker
	metrics *metrics // nil without --metrics-listen
	log     io.Writer

	want   *rules.Set
	health *desired.Health
	probes []checked
	// byKey finds the probes of a key: the first's index, and sameKey
	// the next's after each (-1: none); nil until a health change needs it.
	byKey   map[health.TargetKey]int32
	sameKey []int32
	marks   map[string]uint32
	drains  map[desired.DestRef]*draining
	inSvc   map[desired.DestRef]bool
	allDown map[rules.ServiceKey]bool
	// applied is the effective table as the kernel held it after the
	// last reconcile that converged; nil when the kernel's table is not
	// known to be it.
	applied *rules.Set
	// carried holds, during a reload, the states that real servers whose
	// check changed bring to their new check's key, until the checker
	// has them (see carry).
	carried map[health.TargetKey]health.State
	// guard, when set, sees the plan of a reconcile before its first
	// change (the first start's --max-delete).
	guard func(*rules.Plan) error
	// refused is why the last reload was refused, and when; empty after
	// one that took effect.
	refused   string
	refusedAt time.Time
	late      bool // probes were last seen falling behind
	started   time.Time
	ann       *announcer
	// unplaced are the services the last reconcile left unlike the
	// effective table: their prefixes are not announced.
	unplaced map[rules.ServiceKey]bool
}

// Run applies cfg.File with health, then keeps the table as it says until
// cfg.Context ends, reloading the files on cfg.Reload (see
// docs/health.md). A mistake in the files or the flags, or a start the
// guard refuses, is a cliutil.UsageError: nothing was changed.
func Run(cfg Config) error {
	cliutil.LongRunning()
	checkerProcs()
	fitMemoryLimit()
	want, h, err := cfg.Read()
	if err != nil {
		return usage(err)
	}
	client, err := cfg.Open()
	if err != nil {
		return cliutil.KernelError(err)
	}
	defer client.Close()
	j, err := record.Open(cfg.JournalRoot, cfg.JournalDir, true)
	if err != nil {
		return err
	}
	defer j.Close()
	l := &runLoop{cfg: &cfg, client: client, j: j, log: cfg.Log, want: want, health: h,
		marks: map[string]uint32{}, drains: map[desired.DestRef]*draining{}, inSvc: map[desired.DestRef]bool{},
		allDown: map[rules.ServiceKey]bool{}, started: cfg.Now(),
		ann: &announcer{open: cfg.Announce, started: time.Now()}}
	if l.ann.open == nil {
		l.ann.open = openDevice
	}
	defer l.stopAnnouncing()
	l.readWithdrawal()
	prior, err := j.LoadRun()
	if err != nil {
		return fmt.Errorf("%w (remove it to start afresh; the kernel's weights are kept)", err)
	}
	if err := l.resumeDrains(); err != nil {
		return err
	}
	// Probe is nil but in tests: the checker's own probe reuses each
	// target's compiled spec.
	opts := health.Options{Probe: cfg.Probe}
	if cfg.MetricsListen != "" {
		l.metrics = newMetrics(cfg.Open)
		opts.Observe = l.metrics.observe
	}
	l.checker = health.New(opts)
	ctx := cfg.Context
	if l.metrics != nil {
		// Listening comes before the first change: an address run cannot
		// take leaves the table as it was.
		l.metrics.checker = l.checker
		addr, err := l.metrics.serve(ctx, cfg.MetricsListen)
		if err != nil {
			return cliutil.UsageError{Err: err}
		}
		fmt.Fprintf(l.log, "lvsctl run: metrics at http://%s/metrics\n", addr)
	}
	if prior != nil {
		for k, m := range prior.Marks {
			l.marks[k] = m // a target keeps its mark, so its key and state
		}
	}
	l.probes = probeTargets(want, h, l.marks)
	if err := l.seed(prior); err != nil {
		return err
	}
	if err := l.setTargets(l.probes); err != nil {
		return usage(err)
	}
	// The first start is an apply: the same guard before its first change.
	l.guard = cfg.Guard.RemovalGuard
	err = l.reconcile("start", false)
	l.guard = nil
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	checkCtx, stopChecks := context.WithCancel(context.Background())
	go func() { done <- l.checker.Run(checkCtx) }()
	defer func() { stopChecks(); <-done }()
	cfg.notify("READY=1\nSTATUS=" + l.status())
	fmt.Fprintf(l.log, "lvsctl run: %s: %d real servers checked, %d probes\n", cfg.File, countServers(l.probes), countKeys(l.probes))

	resync := time.NewTicker(resyncEvery)
	defer resync.Stop()
	drain := time.NewTicker(drainPoll)
	defer drain.Stop()
	lateTick := time.NewTicker(lateEvery)
	defer lateTick.Stop()
	watchdog := cfg.watchdog()
	var settleC <-chan time.Time
	var nextHealth time.Time // the earliest next health change (healthDuty)
	changes := l.checker.Changes()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(l.log, "lvsctl run: stopping; the table stays as it is\n")
			l.save()
			return nil
		case c := <-changes:
			l.logChange(c)
			if settleC == nil {
				settleC = time.After(max(settle, time.Until(nextHealth)))
			}
		case <-settleC:
			settleC = nil
			start := time.Now()
			if err := l.reconcile("health", true); err != nil {
				fmt.Fprintf(l.log, "lvsctl run: %v\n", err)
			}
			nextHealth = time.Now().Add((healthDuty - 1) * time.Since(start))
		case <-cfg.Reload:
			cfg.notify("RELOADING=1")
			if err := l.reload(); err != nil {
				// Saved before it is logged: whoever reads the log line
				// finds status already saying so.
				l.refused, l.refusedAt = err.Error(), cfg.Now()
				l.save()
				fmt.Fprintf(l.log, "lvsctl run: reload refused, the table and checks stay as they were: %v\n", err)
			}
			cfg.notify("READY=1\nSTATUS=" + l.status())
		case <-resync.C:
			start := time.Now()
			if err := l.reconcile("", false); err != nil {
				fmt.Fprintf(l.log, "lvsctl run: %v\n", err)
			}
			resync.Reset(max(resyncEvery, resyncDuty*time.Since(start)))
		case <-drain.C:
			if len(l.drains) > 0 {
				l.pollDrains()
			}
			if l.readWithdrawal() || (!l.ann.checked || l.ann.openErr != "" || len(l.ann.back) > 0) && l.announcing() {
				l.announceNow(l.unplaced)
				l.save()
			}
		case <-lateTick.C:
			l.noteLate()
		case <-watchdog:
			if l.checker.Healthy() {
				cfg.notify("WATCHDOG=1")
			} else {
				lt := l.checker.Lateness()
				fmt.Fprintf(l.log, "lvsctl run: probes fall behind (p99 lateness %s): the watchdog is not fed\n", lt.P99)
			}
		}
	}
}

// usage is err as a usage error: a bad file or flag, nothing changed.
func usage(err error) error {
	var ue cliutil.UsageError
	if errors.As(err, &ue) {
		return err
	}
	return cliutil.UsageError{Err: err}
}

// setTargets gives the checker the probes' targets, built one at a time.
func (l *runLoop) setTargets(cs []checked) error {
	return l.checker.SetEach(len(cs), func(i int) health.Target { return cs[i].target() })
}

// countServers is how many real servers cs checks: their checks are next
// to each other.
func countServers(cs []checked) int {
	n := 0
	for i := range cs {
		if i == 0 || cs[i].ref != cs[i-1].ref {
			n++
		}
	}
	return n
}

func countKeys(cs []checked) int {
	keys := map[health.TargetKey]bool{}
	for i := range cs {
		keys[cs[i].key] = true
	}
	return len(keys)
}

// seed gives the checker each target's state: the record's when the run
// restarts (a server that was out stays out until it passes rise checks),
// by the target's key or, when the file changed its check, by the real
// server; else Up for a real server the kernel has in service (a restart
// of the director's checker never takes a healthy server out), else
// Unknown: a server new to the table serves only after its first passing
// check.
func (l *runLoop) seed(prior *record.Run) error {
	var states []health.TargetState
	known := map[health.TargetKey]bool{}
	// byCheck is each check's state by its real server and position.
	type position struct {
		ref string
		n   int
	}
	byCheck := map[position]health.State{}
	if prior != nil {
		for i := range prior.Servers {
			s := &prior.Servers[i]
			for n, c := range s.AllChecks() {
				known[c.Health.Key] = true
				states = append(states, c.Health)
				byCheck[position{s.Service + " -r " + s.Destination, n}] = c.Health.State
			}
		}
	}
	for _, c := range l.probes {
		if known[c.key] {
			continue
		}
		if st := byCheck[position{refName(c.ref), c.n}]; st == health.Up || st == health.Down {
			known[c.key] = true
			states = append(states, health.TargetState{Key: c.key, State: st})
		}
	}
	current, err := rules.Read(l.client)
	if err != nil {
		return cliutil.ReadError(err)
	}
	weights := map[desired.DestRef]uint32{}
	for i := range current.Services {
		s := &current.Services[i]
		for _, d := range s.Dests {
			weights[desired.DestRef{Service: rules.KeyOf(&s.Service), Dest: rules.DestKeyOf(&d.Destination)}] = d.Weight
		}
	}
	// A check new to a real server in service (one added while run was
	// stopped) starts up with it.
	for _, c := range l.probes {
		if known[c.key] {
			continue
		}
		if w, ok := weights[c.ref]; ok && w > 0 {
			known[c.key] = true
			states = append(states, health.TargetState{Key: c.key, State: health.Up})
		}
	}
	l.checker.Restore(states)
	return nil
}

// reconcile makes the kernel's table the effective one and records the
// state; why names the cause in the log ("" for a quiet resync). A
// scoped reconcile reads and changes only the services whose effective
// configuration changed since the last one that converged: a health
// change or reload of a large table reads one service, not all of it.
// What others change in the rest is put back by the resyncs, which read
// everything.
func (l *runLoop) reconcile(why string, scoped bool) error {
	eff, allDown := effective(l.want, l.health, l.probes, l.state, l.drains, l.inSvc)
	now := map[rules.ServiceKey]bool{}
	for _, k := range allDown {
		now[k] = true
		if !l.allDown[k] {
			mode := desired.KeepLast
			if l.health != nil && l.health.Services[k].WhenAllDown != "" {
				mode = l.health.Services[k].WhenAllDown
			}
			fmt.Fprintf(l.log, "lvsctl run: ALL REAL SERVERS OF %s FAILED THEIR CHECKS: when_all_down %s\n", k, mode)
		}
	}
	for k := range l.allDown {
		if !now[k] {
			fmt.Fprintf(l.log, "lvsctl run: %s has a real server up again\n", k)
		}
	}
	l.allDown = now
	a := l.applier()
	a.Check = l.guard
	o := rules.DiffOptions{OwnProbes: true}
	var changed map[rules.ServiceKey]bool
	if scoped && l.applied != nil {
		changed = rules.ChangedServices(l.applied, eff)
		o.Only = func(k rules.ServiceKey) bool { return changed[k] }
	}
	l.applied = nil
	// A health change that leaves the table as it was (a server waiting
	// for its first check found failing) needs no read of the kernel.
	res, err := &rules.ConvergeResult{}, error(nil)
	if changed == nil || len(changed) > 0 {
		res, err = a.Converge(context.Background(), eff, o, nil)
	}
	if err == nil && !res.Stopped && res.Converged() {
		l.applied = eff
	}
	if err == nil {
		l.unplaced = unplacedBy(res)
	}
	if l.announcing() {
		l.announceNow(l.unplaced)
	}
	l.save()
	fitMemoryLimit()
	if l.metrics != nil {
		l.metrics.publish(l)
	}
	var ue cliutil.UsageError
	if errors.As(err, &ue) {
		return ue // the guard's: nothing was changed
	}
	if err != nil {
		return fmt.Errorf("changing the table: %w", cliutil.ReadError(err))
	}
	if why != "" && res.Plan != nil && !res.Plan.InSync() {
		fmt.Fprintf(l.log, "lvsctl run: %s: %s\n", why, cliutil.PlanLine(res.Plan))
	}
	if res.Stopped || !res.Converged() {
		return &refusedError{failed: res.Failed}
	}
	return nil
}

// unplacedBy lists the services a reconcile left unlike the effective
// table: refused, held back or still different.
func unplacedBy(res *rules.ConvergeResult) map[rules.ServiceKey]bool {
	out := map[rules.ServiceKey]bool{}
	for i := range res.Failed {
		out[rules.KeyOf(&res.Failed[i].Change.Service)] = true
	}
	for i := range res.Held {
		out[rules.KeyOf(&res.Held[i].Service)] = true
	}
	if res.Remaining != nil {
		for i := range res.Remaining.Changes {
			out[rules.KeyOf(&res.Remaining.Changes[i].Service)] = true
		}
	}
	return out
}

// announcing reports whether the file announces, or the device still
// holds prefixes of a file that did.
func (l *runLoop) announcing() bool {
	return l.health != nil && l.health.Announce != nil || l.ann.dev != nil
}

// refusedError is a reconcile the kernel did not let converge.
type refusedError struct{ failed []rules.ChangeError }

func (e *refusedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the kernel refused %s", cliutil.Plural(len(e.failed), "change", "changes"))
	for i := range e.failed {
		fmt.Fprintf(&b, "; %v", &e.failed[i])
	}
	return b.String()
}

// state is the checker's state of a target and the weight its check
// gives (nil: the file's), looked up one at a time: a snapshot of every
// state and its index is much of a reconcile's garbage on a large table
// (figures: decision 0014).
func (l *runLoop) state(k health.TargetKey) (health.State, *uint32) {
	s, ok := l.checker.State(k)
	if !ok && l.carried != nil {
		return l.carried[k], nil
	}
	return s.State, s.Weight
}

// applier changes the kernel's table, logging each change.
func (l *runLoop) applier() *rules.Applier {
	return &rules.Applier{Client: l.client, Now: l.cfg.Now, Events: func(e rules.Event) {
		if e.Kind == rules.EventChange {
			fmt.Fprintf(l.log, "lvsctl run: %s\n", cliutil.EventLine(e))
		}
	}}
}

// reconcileFirst puts the services a reload changed into the kernel
// before the whole effective table is worked out again, so that the
// change takes effect about as soon as the file is read. It changes
// nothing of run's own state, and leaves errors to the reconcile that
// follows, which compares everything as always. A reload that changes
// more than half the services goes to that reconcile alone.
func (l *runLoop) reconcileFirst(changed map[rules.ServiceKey]bool) {
	if len(changed) == 0 || 2*len(changed) > len(l.want.Services) {
		return
	}
	sub := &rules.Set{}
	inSvc := map[desired.DestRef]bool{} // a copy: effective updates it
	for i := range l.want.Services {
		s := &l.want.Services[i]
		sk := rules.KeyOf(&s.Service)
		if !changed[sk] {
			continue
		}
		sub.Services = append(sub.Services, *s)
		for j := range s.Dests {
			ref := desired.DestRef{Service: sk, Dest: rules.DestKeyOf(&s.Dests[j].Destination)}
			if in, ok := l.inSvc[ref]; ok {
				inSvc[ref] = in
			}
		}
	}
	var probes []checked
	for i := range l.probes {
		if changed[l.probes[i].ref.Service] {
			probes = append(probes, l.probes[i])
		}
	}
	drains := map[desired.DestRef]*draining{}
	for ref, d := range l.drains {
		if changed[ref.Service] {
			drains[ref] = d
		}
	}
	eff, _ := effective(sub, l.health, probes, l.state, drains, inSvc)
	only := make(map[rules.ServiceKey]bool, len(eff.Services))
	for i := range eff.Services {
		only[rules.KeyOf(&eff.Services[i].Service)] = true
	}
	o := rules.DiffOptions{OwnProbes: true, Only: func(k rules.ServiceKey) bool { return only[k] }}
	res, err := l.applier().Converge(context.Background(), eff, o, nil)
	if err == nil && res.Plan != nil && !res.Plan.InSync() {
		fmt.Fprintf(l.log, "lvsctl run: reload: %s\n", cliutil.PlanLine(res.Plan))
	}
}

// save writes the record; a failure is logged, not fatal: the table is
// right, and the next save may succeed. The servers are written one at a
// time as the checker has them.
func (l *runLoop) save() {
	st := &record.Run{PID: os.Getpid(), File: record.Abs(l.cfg.File), Checks: record.Abs(l.cfg.Checks), Started: l.started.UTC(),
		Updated: l.cfg.Now().UTC(), Marks: l.marks, Lateness: l.checker.Lateness(), Late: !l.checker.Healthy(),
		Refused: l.refused, Announce: l.ann.state}
	if !l.refusedAt.IsZero() {
		st.RefusedAt = l.refusedAt.UTC()
	}
	st.Each = func(yield func(*record.Server) bool) {
		var svc string      // the name of the service of the server before
		var s record.Server // one for all: yield's pointer would move each to the heap
		var checks []record.ServerCheck
		for i := 0; i < len(l.probes); {
			c := &l.probes[i]
			if i == 0 || c.ref.Service != l.probes[i-1].ref.Service {
				svc = c.ref.Service.String()
			}
			// The record keeps each check's type, not its whole target:
			// the file has the rest, and the targets were most of the
			// record's cost (figures: decision 0014).
			checks = checks[:0]
			for ; i < len(l.probes) && l.probes[i].ref == c.ref; i++ {
				ts, _ := l.checker.State(l.probes[i].key)
				ts.Key = l.probes[i].key
				checks = append(checks, record.ServerCheck{Check: l.probes[i].spec.Type, Health: ts})
			}
			s = record.Server{Service: svc, Destination: c.ref.Dest.String(), InService: l.inSvc[c.ref], Weight: c.weight}
			s.SetChecks(checks)
			if !yield(&s) {
				return
			}
		}
	}
	for k := range l.allDown {
		st.AllDown = append(st.AllDown, k.String())
	}
	slices.Sort(st.AllDown)
	if err := l.j.SaveRun(st); err != nil {
		fmt.Fprintf(l.log, "lvsctl run: %v\n", err)
	}
}

// logChange writes one line for a health transition.
func (l *runLoop) logChange(c health.Change) {
	if l.byKey == nil {
		// Built once per set of probes: 10,000 servers coming up at
		// start would otherwise each scan all of them.
		l.byKey = make(map[health.TargetKey]int32, len(l.probes))
		l.sameKey = make([]int32, len(l.probes))
		for i := len(l.probes) - 1; i >= 0; i-- {
			l.sameKey[i] = -1
			if j, ok := l.byKey[l.probes[i].key]; ok {
				l.sameKey[i] = j
			}
			l.byKey[l.probes[i].key] = int32(i)
		}
	}
	var names []string
	if i, ok := l.byKey[c.Key]; ok {
		for ; i >= 0; i = l.sameKey[i] {
			names = append(names, refName(l.probes[i].ref))
		}
	}
	// A weight from the check is said; a change from up to up is one of
	// weight only.
	result := c.Result
	switch {
	case c.New == health.Up && c.Weight != nil:
		result += fmt.Sprintf(", weight %d", *c.Weight)
	case c.Old == health.Up && c.New == health.Up:
		result += ", the file's weight"
	}
	fmt.Fprintf(l.log, "lvsctl run: %s %s -> %s (%s check: %s)\n", strings.Join(names, ", "), c.Old, c.New, c.Target.Spec.Type, result)
}

// noteLate logs when probes fall behind their schedule and when they
// catch up, whatever supervises run, and records it for status.
func (l *runLoop) noteLate() {
	late := !l.checker.Healthy()
	if late == l.late {
		return
	}
	l.late = late
	lt := l.checker.Lateness()
	if late {
		fmt.Fprintf(l.log, "lvsctl run: probes fall behind their schedule (p99 lateness %s, max %s): "+
			"failures are noticed late; the director is short of CPU or has too many checks for it\n", lt.RecentP99, lt.RecentMax)
	} else {
		fmt.Fprintf(l.log, "lvsctl run: probes on time again (p99 lateness %s)\n", lt.RecentP99)
	}
	l.save()
}

// status is one line for systemd's status.
func (l *runLoop) status() string {
	up, n := 0, 0
	for _, in := range l.inSvc {
		n++
		if in {
			up++
		}
	}
	return fmt.Sprintf("%d of %d checked real servers in service", up, n)
}

// reload reads FILE again and applies the difference as apply would:
// the same checks of the file, the same --max-delete, and a kernel that
// refuses a change puts the running table and checks back. Real servers
// that stay keep their health, through an edit of their check too; those
// that leave drain at weight 0.
func (l *runLoop) reload() error {
	start := time.Now()
	// The reload takes the processor first: probes sharing it slow the
	// read of a large table (figures: decision 0014).
	l.checker.Hold()
	defer l.checker.Release()
	want, h, err := l.cfg.Read()
	if err != nil {
		return err
	}
	read := time.Since(start)
	probes := probeTargets(want, h, l.marks)
	targets, err := health.Prepare(len(probes), func(i int) health.Target { return probes[i].target() })
	if err != nil {
		return err
	}
	// What leaves the file counts as apply counts it: drained or not, a
	// real server taken out. mh order is not the file's to judge here.
	if err := l.cfg.Guard.RemovalGuard(rules.Diff(l.want, want, rules.DiffOptions{KeepMHOrder: true})); err != nil {
		return err
	}
	stay := map[desired.DestRef]bool{}
	for i := range want.Services {
		s := &want.Services[i]
		for _, d := range s.Dests {
			stay[desired.DestRef{Service: rules.KeyOf(&s.Service), Dest: rules.DestKeyOf(&d.Destination)}] = true
		}
	}
	old := runFile{want: l.want, health: l.health, probes: l.probes, drains: maps.Clone(l.drains), marks: maps.Clone(l.marks)}
	now := l.cfg.Now()
	for i := range l.want.Services {
		s := &l.want.Services[i]
		sk := rules.KeyOf(&s.Service)
		for _, d := range s.Dests {
			ref := desired.DestRef{Service: sk, Dest: rules.DestKeyOf(&d.Destination)}
			if stay[ref] || l.drains[ref] != nil {
				continue
			}
			dd := d.Destination
			dd.Weight = 0
			l.drains[ref] = &draining{svc: s.Service, dest: dd, entry: rules.DrainEntry{Service: sk, Dest: ref.Dest,
				Weight: d.Weight, Started: now, Deadline: now.Add(l.cfg.DrainTimeout)}}
		}
	}
	for ref := range l.drains {
		if stay[ref] {
			delete(l.drains, ref) // back in the file: its weight comes back with it
		}
	}
	if len(l.marks) > 0 {
		kept := make(map[string]bool, len(probes))
		for _, p := range probes {
			kept[refName(p.ref)] = true
		}
		for k := range l.marks {
			if !kept[k] {
				delete(l.marks, k)
			}
		}
	}
	changed := rules.ChangedServices(l.want, want)
	l.carried = l.carry(probes)
	defer func() { l.carried = nil }()
	l.want, l.health, l.probes, l.byKey = want, h, probes, nil
	if err := l.saveDrains(); err != nil {
		l.restore(old)
		return err
	}
	// The table first, then the checker's targets: until then, a real
	// server that stays has its state under its key, or carried to its
	// new check's key; a new one has none.
	l.reconcileFirst(changed)
	prevRefused, prevAt := l.refused, l.refusedAt
	l.refused, l.refusedAt = "", time.Time{}
	err = l.reconcile("reload", true)
	var refused *refusedError
	if errors.As(err, &refused) {
		// Nothing of the new file stays: the old one's table and drains
		// come back, its checks never left the checker.
		l.restore(old)
		l.refused, l.refusedAt = prevRefused, prevAt
		if err := l.saveDrains(); err != nil {
			fmt.Fprintf(l.log, "lvsctl run: %v\n", err)
		}
		if err := l.reconcile("reload refused, back to the running file", false); err != nil {
			fmt.Fprintf(l.log, "lvsctl run: %v\n", err)
		}
		return refused
	}
	seeds := make([]health.TargetState, 0, len(l.carried))
	for k, st := range l.carried {
		seeds = append(seeds, health.TargetState{Key: k, State: st})
	}
	l.checker.Restore(seeds)
	l.checker.Apply(targets)
	fmt.Fprintf(l.log, "lvsctl run: reloaded %s in %s (read in %s): %d real servers checked, %d draining\n",
		l.cfg.File, time.Since(start).Round(time.Millisecond), read.Round(time.Millisecond), countServers(probes), len(l.drains))
	if err != nil {
		// The file took effect; the kernel's table did not follow (a
		// read failed): the next change or resync puts it right.
		fmt.Fprintf(l.log, "lvsctl run: reloaded, but %v; the next change or resync tries again\n", err)
	}
	return nil
}

// runFile is what a reload replaces, kept to put back when the kernel
// refuses the new file.
type runFile struct {
	want   *rules.Set
	health *desired.Health
	probes []checked
	drains map[desired.DestRef]*draining
	marks  map[string]uint32
}

func (l *runLoop) restore(f runFile) {
	l.want, l.health, l.probes, l.drains, l.byKey = f.want, f.health, f.probes, f.drains, nil
	clear(l.marks)
	maps.Copy(l.marks, f.marks)
}

// carry gives each check whose key is new (an edited check, or one added
// to a real server) a state until it decides by its own rise and fall, so
// that an edit never takes a healthy server out, nor brings a failed one
// back. An edited check takes the state of the check it replaces: of the
// real server's old checks whose keys are gone, the one of its type at
// its position, else the first of its type, else the one at its
// position. A check with none of them, added to the server, starts as the
// server is: up while in service, down when one of its checks is down. A
// key that several real servers share is up when one of them was.
func (l *runLoop) carry(probes []checked) map[health.TargetKey]health.State {
	type oldCheck struct {
		typ   string
		n     int
		state health.State
		used  bool
	}
	stay := make(map[health.TargetKey]bool, len(probes))
	for i := range probes {
		stay[probes[i].key] = true
	}
	gone := map[desired.DestRef][]*oldCheck{} // the old checks whose keys leave, by real server
	down := map[desired.DestRef]bool{}        // the real servers with a check down
	for i := range l.probes {
		c := &l.probes[i]
		st, _ := l.state(c.key)
		if st == health.Down {
			down[c.ref] = true
		}
		if !stay[c.key] {
			gone[c.ref] = append(gone[c.ref], &oldCheck{typ: c.spec.Type, n: c.n, state: st})
		}
	}
	out := map[health.TargetKey]health.State{}
	for i := range probes {
		c := &probes[i]
		if _, ok := l.checker.State(c.key); ok {
			continue // the same check: the checker keeps its state
		}
		var from *oldCheck
		for _, match := range []func(o *oldCheck) bool{
			func(o *oldCheck) bool { return o.typ == c.spec.Type && o.n == c.n },
			func(o *oldCheck) bool { return o.typ == c.spec.Type },
			func(o *oldCheck) bool { return o.n == c.n },
		} {
			for _, o := range gone[c.ref] {
				if !o.used && match(o) {
					from = o
					break
				}
			}
			if from != nil {
				break
			}
		}
		var st health.State
		switch {
		case from != nil:
			from.used, st = true, from.state
		case l.inSvc[c.ref]:
			st = health.Up
		case down[c.ref]:
			st = health.Down
		}
		if (st == health.Up || st == health.Down) && out[c.key] != health.Up {
			out[c.key] = st
		}
	}
	return out
}

// resumeDrains takes the drains the journal holds (of an interrupted
// apply or run) into this run.
func (l *runLoop) resumeDrains() error {
	jr, err := l.j.Load()
	if err != nil || jr == nil {
		return err
	}
	for _, e := range jr.Drains {
		ref := desired.DestRef{Service: e.Service, Dest: e.Dest}
		svc := e.Service.Service()
		dests, err := l.client.Destinations(svc)
		if err != nil {
			continue // gone with its service
		}
		for _, d := range dests {
			if rules.DestKeyOf(&d.Destination) == e.Dest {
				full, _ := l.client.Service(svc)
				l.drains[ref] = &draining{svc: full.Service, dest: d.Destination, entry: e}
			}
		}
	}
	return nil
}

// saveDrains records the drains in the journal (none removes it).
func (l *runLoop) saveDrains() error {
	if len(l.drains) == 0 {
		return l.j.Save(nil)
	}
	jr := &rules.Journal{Version: rules.JournalVersion, Updated: l.cfg.Now().UTC(), Source: record.Abs(l.cfg.File)}
	for _, d := range l.drains {
		jr.Drains = append(jr.Drains, d.entry)
	}
	slices.SortFunc(jr.Drains, func(a, b rules.DrainEntry) int {
		if c := a.Service.Compare(b.Service); c != 0 {
			return c
		}
		return a.Dest.Compare(b.Dest)
	})
	return l.j.Save(jr)
}

// pollDrains ends the drains whose real servers have no connection left,
// or whose deadline passed: they leave the table at the next reconcile.
func (l *runLoop) pollDrains() {
	now := l.cfg.Now()
	ended := 0
	for ref, d := range l.drains {
		dests, err := l.client.Destinations(d.svc)
		if err != nil {
			continue // read again at the next poll
		}
		i := slices.IndexFunc(dests, func(x ipvs.DestinationEntry) bool { return rules.DestKeyOf(&x.Destination) == ref.Dest })
		switch {
		case i < 0: // deleted by someone else
			delete(l.drains, ref)
			ended++
		case dests[i].ActiveConns == 0 && dests[i].InactConns == 0 || !now.Before(d.entry.Deadline):
			fmt.Fprintf(l.log, "lvsctl run: drained %s (active %d, inactive %d)\n", refName(ref), dests[i].ActiveConns, dests[i].InactConns)
			delete(l.drains, ref)
			ended++
		}
	}
	if ended > 0 {
		if err := l.saveDrains(); err != nil {
			fmt.Fprintf(l.log, "lvsctl run: %v\n", err)
		}
		if err := l.reconcile("drain", true); err != nil {
			fmt.Fprintf(l.log, "lvsctl run: %v\n", err)
		}
	}
}
