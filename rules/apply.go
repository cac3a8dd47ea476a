package rules

// This file applies a plan to the kernel: adds and edits through one
// pipeline, then the drain of leaving destinations, recorded in a journal
// before each weight goes to 0.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lvskit/lvskit/ipvs"
	"golang.org/x/sys/unix"
)

// DefaultDrainTimeout is how long a leaving destination may keep
// connections before it is deleted anyway.
const DefaultDrainTimeout = 5 * time.Minute

// defaultPollInterval is how often a drain reads the connection counts.
const defaultPollInterval = 200 * time.Millisecond

// Journal is the record of drains in progress, kept so that an interrupted
// apply (a signal, a crash, a reboot of the program) is finished or
// cancelled by the next one and never leaves a weight at 0 without a note
// of what it was.
type Journal struct {
	Version int          `json:"version"`
	Updated time.Time    `json:"updated"`
	Source  string       `json:"source,omitempty"` // the desired file being applied
	Drains  []DrainEntry `json:"drains"`
}

// JournalVersion is the journal format's version.
const JournalVersion = 1

// DrainEntry is one destination being drained.
type DrainEntry struct {
	Service ServiceKey `json:"service"`
	Dest    DestKey    `json:"dest"`
	// Weight is the destination's weight before the drain set it to 0.
	Weight uint32 `json:"weight"`
	// Flags, when set, are the service's flags before the drain added
	// mh-fallback; they are put back when the service's drains end.
	Flags *ipvs.ServiceFlags `json:"flags,omitempty"`
	// DeleteService is set when the whole service leaves after its drains.
	DeleteService bool      `json:"delete_service,omitempty"`
	Started       time.Time `json:"started"`
	Deadline      time.Time `json:"deadline"`
}

// JournalStore keeps the journal durably. Save(nil) removes it.
type JournalStore interface {
	Save(*Journal) error
}

// EventKind says what an Event reports.
type EventKind string

// The events of an apply.
const (
	EventChange       EventKind = "change"        // a change was made (or failed: Err)
	EventDrainStart   EventKind = "drain-start"   // weight 0 set, drain begins
	EventDrainWait    EventKind = "drain-wait"    // a drain poll: connections left
	EventDrainDone    EventKind = "drain-done"    // no connection left: deleted
	EventDrainTimeout EventKind = "drain-timeout" // deadline reached: deleted with connections
	EventDrainGone    EventKind = "drain-gone"    // deleted by someone else meanwhile
	EventRestoreFlags EventKind = "restore-flags" // mh-fallback taken away again
)

// Event is one step of an apply, for progress displays and logs.
type Event struct {
	Kind             EventKind
	Time             time.Time
	Change           *Change
	Service          ServiceKey
	Dest             DestKey
	Active, Inactive uint32
	Left             time.Duration // until the drain's deadline
	Err              error
}

// Applier applies plans to one kernel.
type Applier struct {
	Client ipvs.Client
	// DrainTimeout bounds each drain; 0 deletes leaving destinations at
	// once without a drain.
	DrainTimeout time.Duration
	PollInterval time.Duration // 0 means 200 ms (defaultPollInterval)
	Window       int           // pipeline window; 0 means 256 (defaultWindow)
	// Journal records drains in progress; nil keeps no record.
	Journal JournalStore
	Source  string // recorded in the journal
	// LiveConns, when set, counts per real server (address and port, over
	// all services) the connection entries that can still carry data:
	// everything but TIME_WAIT and CLOSE. A destination whose InActConn
	// is made only of finished entries is done without waiting minutes for
	// them to expire.
	LiveConns func() (map[DestKey]int, error)
	// Events receives progress; nil discards it.
	Events func(Event)
	// Check, when set, sees each plan before any of its changes is made;
	// an error stops the apply there.
	Check func(*Plan) error
	// Now and Sleep are the clock (tests replace them).
	Now   func() time.Time
	Sleep func(context.Context, time.Duration) error
}

func (a *Applier) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Applier) sleep(ctx context.Context, d time.Duration) error {
	if a.Sleep != nil {
		return a.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (a *Applier) emit(e Event) {
	if a.Events != nil {
		if e.Time.IsZero() {
			e.Time = a.now()
		}
		a.Events(e)
	}
}

// ChangeError is a change the kernel refused.
type ChangeError struct {
	Change Change
	Err    error
}

func (e *ChangeError) Error() string { return fmt.Sprintf("%s: %v", Describe(&e.Change), e.Err) }

// Describe names a change in one line: action, service, destination.
func Describe(c *Change) string {
	s := string(c.Action) + " " + KeyOf(&c.Service).String()
	if c.Dest != nil {
		s += " -r " + DestKeyOf(c.Dest).String()
	}
	return s
}

// defaultWindow is how many changes Changes keeps in flight: as many as
// ipvsadm -R does (ipvsadm.DefaultWindow), whose reasons hold here too.
const defaultWindow = 256

// Changes makes the plan's adds, re-adds and edits through one pipeline
// and returns the changes the kernel refused; the others are made. Deletes
// are left to Deletes or Drain, so that nothing leaves the table while an
// add or edit might still be refused.
func (a *Applier) Changes(p *Plan) ([]ChangeError, error) {
	return a.pipeline(p, func(c *Change) bool { return c.Action != DeleteDest && c.Action != DeleteService })
}

// Deletes deletes the plan's leaving destinations and services at once,
// without a drain, through one pipeline; it returns the deletes the
// kernel refused.
func (a *Applier) Deletes(p *Plan) ([]ChangeError, error) {
	return a.pipeline(p, func(c *Change) bool { return c.Action == DeleteDest || c.Action == DeleteService })
}

// pipeline makes the plan's changes that take says to make.
func (a *Applier) pipeline(p *Plan, take func(*Change) bool) ([]ChangeError, error) {
	window := a.Window
	if window < 1 {
		window = defaultWindow
	}
	pipe := a.Client.Pipeline(window)
	var failed []ChangeError
	for i := range p.Changes {
		c := &p.Changes[i]
		if !take(c) {
			continue
		}
		reqs := requests(c)
		for j, req := range reqs {
			last := j == len(reqs)-1
			done := func(err error) {
				if err != nil {
					failed = append(failed, ChangeError{Change: *c, Err: err})
				}
				if last || err != nil {
					a.emit(Event{Kind: EventChange, Change: c, Err: err})
				}
			}
			if err := pipe.Submit(req, done); err != nil {
				return failed, err
			}
		}
	}
	return failed, pipe.Flush()
}

// requests are the kernel requests of a change.
func requests(c *Change) []ipvs.Request {
	svc := c.Service
	switch c.Action {
	case AddService:
		return []ipvs.Request{{Cmd: ipvs.CmdNewService, Service: &svc}}
	case EditService:
		return []ipvs.Request{{Cmd: ipvs.CmdSetService, Service: &svc}}
	case DeleteService:
		return []ipvs.Request{{Cmd: ipvs.CmdDelService, Service: &svc}}
	case AddDest:
		return []ipvs.Request{{Cmd: ipvs.CmdNewDest, Service: &svc, Dest: c.Dest}}
	case EditDest:
		return []ipvs.Request{{Cmd: ipvs.CmdSetDest, Service: &svc, Dest: c.Dest}}
	case DeleteDest:
		return []ipvs.Request{{Cmd: ipvs.CmdDelDest, Service: &svc, Dest: c.Dest}}
	case ReAddDest:
		d := c.Dest
		return []ipvs.Request{{Cmd: ipvs.CmdDelDest, Service: &svc, Dest: d}, {Cmd: ipvs.CmdNewDest, Service: &svc, Dest: d}}
	}
	return nil
}

// DrainResult is how a drain ended.
type DrainResult struct {
	Done, TimedOut, Gone int // destinations deleted when empty, at the deadline, by others
	Failed               []ChangeError
	// Pending are the drains still in progress when the context ended;
	// they are in the journal.
	Pending []DrainEntry
}

// drainService is one service whose destinations drain.
type drainService struct {
	svc     ipvs.Service // the service as it is now (flags as the drain set them)
	entries []*DrainEntry
	del     bool // delete the service when its drains end
	restore *ipvs.ServiceFlags
}

// Drain drains and deletes the plan's leaving destinations and services
// (when DrainTimeout is above 0): for each, the journal first records the
// destination's weight (and, on an mh service without mh-fallback, the
// service's flags); then mh-fallback is set, the weight set to 0, and the
// destination deleted once its ActiveConn and InActConn are both 0 (or only
// finished entries remain, see LiveConns) or at its deadline. A service
// that leaves is deleted after its destinations. Earlier drains found in
// the journal (prior) continue with their first deadline and weight.
//
// When ctx ends, Drain stops and returns the drains still pending, which
// stay in the journal at weight 0.
func (a *Applier) Drain(ctx context.Context, p *Plan, prior []DrainEntry) (*DrainResult, error) {
	res := &DrainResult{}
	if a.DrainTimeout <= 0 {
		return res, a.saveJournal(nil)
	}
	start := a.now()
	deadline := start.Add(a.DrainTimeout)
	priorOf := map[[2]string]DrainEntry{}
	for _, e := range prior {
		priorOf[[2]string{e.Service.String(), e.Dest.String()}] = e
	}
	var order []*drainService
	byKey := map[ServiceKey]*drainService{}
	add := func(svc ipvs.Service, d ipvs.Destination, del bool) {
		k := KeyOf(&svc)
		ds := byKey[k]
		if ds == nil {
			ds = &drainService{svc: svc, del: del}
			byKey[k] = ds
			order = append(order, ds)
		}
		e := &DrainEntry{Service: k, Dest: DestKeyOf(&d), Weight: d.Weight, DeleteService: del, Started: start, Deadline: deadline}
		if pe, ok := priorOf[[2]string{k.String(), e.Dest.String()}]; ok {
			e.Weight, e.Started, e.Deadline = pe.Weight, pe.Started, pe.Deadline
			if pe.Flags != nil && ds.restore == nil {
				f := *pe.Flags
				ds.restore = &f
			}
		}
		ds.entries = append(ds.entries, e)
	}
	var emptyServices []Change
	for i := range p.Changes {
		c := &p.Changes[i]
		switch c.Action {
		case DeleteDest:
			add(c.Service, *c.Dest, false)
		case DeleteService:
			if len(c.Dests) == 0 {
				emptyServices = append(emptyServices, *c)
			}
			for _, d := range c.Dests {
				add(c.Service, d, true)
			}
		}
	}
	for i := range emptyServices {
		a.exec(res, &emptyServices[i], ipvs.Request{Cmd: ipvs.CmdDelService, Service: keyService(&emptyServices[i].Service)})
	}
	if len(order) == 0 {
		return res, a.saveJournal(nil)
	}
	// mh services: the flags to restore are known before the journal is
	// written, so the record precedes every change.
	for _, ds := range order {
		if ds.svc.Scheduler == "mh" && ds.svc.Flags&ipvs.FlagSched1 == 0 {
			f := ds.svc.Flags
			if ds.restore == nil {
				ds.restore = &f
			}
			ds.svc.Flags |= ipvs.FlagSched1
		}
		for _, e := range ds.entries {
			e.Flags = ds.restore
		}
	}
	if err := a.saveJournal(order); err != nil {
		return res, err
	}
	for _, ds := range order {
		if ds.restore != nil {
			svc := ds.svc
			c := Change{Action: EditService, Service: svc, Fields: []Field{{Name: "flags", Old: "-", New: "mh-fallback (for the drain)"}}}
			a.exec(res, &c, ipvs.Request{Cmd: ipvs.CmdSetService, Service: &svc})
		}
		for _, e := range ds.entries {
			if err := a.zeroWeight(ds, e); err != nil {
				if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
					continue // gone already: the poll notices
				}
				res.Failed = append(res.Failed, ChangeError{Change: Change{Action: DeleteDest, Service: ds.svc}, Err: err})
			}
			a.emit(Event{Kind: EventDrainStart, Service: ds.entries[0].Service, Dest: e.Dest, Left: e.Deadline.Sub(a.now())})
		}
	}
	poll := a.PollInterval
	if poll <= 0 {
		poll = defaultPollInterval
	}
	for {
		if err := a.drainRound(res, &order); err != nil {
			return res, err
		}
		if len(order) == 0 {
			return res, a.saveJournal(nil)
		}
		if err := a.sleep(ctx, poll); err != nil {
			for _, ds := range order {
				for _, e := range ds.entries {
					res.Pending = append(res.Pending, *e)
				}
			}
			return res, nil
		}
	}
}

// keyService is the identity of svc as a request carries it.
func keyService(svc *ipvs.Service) *ipvs.Service {
	s := KeyOf(svc).Service()
	return &s
}

// zeroWeight sets a draining destination's weight to 0, keeping its other
// settings as the kernel has them.
func (a *Applier) zeroWeight(ds *drainService, e *DrainEntry) error {
	dests, err := a.Client.Destinations(ds.svc)
	if err != nil {
		return err
	}
	for i := range dests {
		if DestKeyOf(&dests[i].Destination) == e.Dest {
			d := dests[i].Destination
			d.Weight = 0
			return a.Client.Exec(ipvs.Request{Cmd: ipvs.CmdSetDest, Service: keyService(&ds.svc), Dest: &d})
		}
	}
	return unix.ENOENT
}

// drainRound reads the counts of every draining service once and deletes
// what is done or overdue; it drops finished services from *order.
func (a *Applier) drainRound(res *DrainResult, order *[]*drainService) error {
	var live map[DestKey]int
	if a.LiveConns != nil {
		var err error
		if live, err = a.LiveConns(); err != nil {
			live = nil // counters alone decide this round
		}
	}
	now := a.now()
	changed := false
	kept := (*order)[:0]
	for _, ds := range *order {
		dests, err := a.Client.Destinations(ds.svc)
		if err != nil {
			return err
		}
		byKey := make(map[DestKey]*ipvs.DestinationEntry, len(dests))
		for i := range dests {
			byKey[DestKeyOf(&dests[i].Destination)] = &dests[i]
		}
		left := ds.entries[:0]
		for _, e := range ds.entries {
			d := byKey[e.Dest]
			ev := Event{Service: e.Service, Dest: e.Dest, Time: now, Left: e.Deadline.Sub(now)}
			switch {
			case d == nil:
				ev.Kind = EventDrainGone
				res.Gone++
			case d.ActiveConns == 0 && (d.InactConns == 0 || (live != nil && live[e.Dest] == 0)):
				ev.Kind = EventDrainDone
			case !now.Before(e.Deadline):
				ev.Kind = EventDrainTimeout
				ev.Active, ev.Inactive = d.ActiveConns, d.InactConns
			default:
				ev.Kind = EventDrainWait
				ev.Active, ev.Inactive = d.ActiveConns, d.InactConns
				a.emit(ev)
				left = append(left, e)
				continue
			}
			if d != nil {
				cfg := d.Destination
				req := ipvs.Request{Cmd: ipvs.CmdDelDest, Service: keyService(&ds.svc), Dest: &cfg}
				if err := a.Client.Exec(req); err != nil && !errors.Is(err, unix.ENOENT) {
					ev.Err = err
					res.Failed = append(res.Failed, ChangeError{Change: Change{Action: DeleteDest, Service: ds.svc, Dest: &cfg}, Err: err})
				} else if ev.Kind == EventDrainDone {
					res.Done++
				} else {
					res.TimedOut++
				}
			}
			changed = true
			a.emit(ev)
		}
		ds.entries = left
		if len(left) > 0 {
			kept = append(kept, ds)
			continue
		}
		switch {
		case ds.del:
			c := Change{Action: DeleteService, Service: ds.svc}
			a.exec(res, &c, ipvs.Request{Cmd: ipvs.CmdDelService, Service: keyService(&ds.svc)})
		case ds.restore != nil:
			svc := ds.svc
			svc.Flags = *ds.restore
			err := a.Client.Exec(ipvs.Request{Cmd: ipvs.CmdSetService, Service: &svc})
			if err != nil && !errors.Is(err, unix.ESRCH) {
				res.Failed = append(res.Failed, ChangeError{Change: Change{Action: EditService, Service: svc}, Err: err})
			}
			a.emit(Event{Kind: EventRestoreFlags, Service: KeyOf(&svc), Err: err})
		}
	}
	*order = kept
	if changed {
		return a.saveJournal(kept)
	}
	return nil
}

// exec makes one change and reports it.
func (a *Applier) exec(res *DrainResult, c *Change, req ipvs.Request) {
	err := a.Client.Exec(req)
	if err != nil && (errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT)) {
		err = nil // already gone
	}
	if err != nil {
		res.Failed = append(res.Failed, ChangeError{Change: *c, Err: err})
	}
	a.emit(Event{Kind: EventChange, Change: c, Err: err})
}

// saveJournal records the drains in progress (none removes the journal).
func (a *Applier) saveJournal(order []*drainService) error {
	if a.Journal == nil {
		return nil
	}
	var entries []DrainEntry
	for _, ds := range order {
		for _, e := range ds.entries {
			entries = append(entries, *e)
		}
	}
	if len(entries) == 0 {
		return a.Journal.Save(nil)
	}
	return a.Journal.Save(&Journal{Version: JournalVersion, Updated: a.now().UTC(), Source: a.Source, Drains: entries})
}
