package run

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/announce"
	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/lvsctl/record"
	"github.com/lvskit/lvskit/rules"
	"github.com/lvskit/lvskit/rules/desired"
)

// Announcer holds the prefixes a director announces; announce.Device is
// the real one.
type Announcer interface {
	Set(prefixes []netip.Prefix) error
	Close() error
}

// Why a prefix is not announced, as the record and the log say it.
const (
	whyWithdrawn = record.WhyWithdrawn
	whyNoServer  = "no real server in service"
	whyNotPlaced = "table not in place"
	whyWaiting   = "waiting for the first checks"
	whyReturning = "back from no real server: waiting for the others' rise checks"
)

// announcer decides, at each reconcile, the prefixes this director
// announces: a prefix while run runs, its services' table is in place,
// the checks have all run once since the start, and one of its services
// has a real server in service (or, with when_all_down keep, all of them
// failed). Nothing is announced before the first decision, and the
// device dies with the process.
type announcer struct {
	open    func(device string) (Announcer, error)
	dev     Announcer
	name    string // the device's
	started time.Time
	checked bool // every target was probed since the start
	state   []record.Announcement
	// withdrawal is lvsctl withdraw's file as last read; stat tells when
	// to read it again.
	withdrawal *record.Withdrawal
	stat       unix.Stat_t
	// openErr is why the device could not be made, while it could not:
	// run tries again every drainPoll, since the name may be held only
	// a moment longer (a killed run's device goes with its network
	// namespace, which the kernel frees after the process).
	openErr string
	// back holds the prefixes that serve again after a time with no real
	// server in service, and since when: their other real servers may be
	// passing their rise checks too, and a director announced before they
	// do hashes flows unlike the other directors, so the prefix waits
	// until every real server is in service or a rise period has passed.
	back map[netip.Prefix]time.Time
}

func openDevice(name string) (Announcer, error) { return announce.Open(name) }

// decide works out the announcement from the run's state and puts it on
// the device. unplaced are the services the last reconcile left unlike
// the effective table.
func (l *runLoop) announceNow(unplaced map[rules.ServiceKey]bool) {
	a := l.ann
	var cfg *desired.Announce
	if l.health != nil {
		cfg = l.health.Announce
	}
	if cfg == nil {
		if a.dev != nil {
			l.setAnnounced(nil, nil)
		}
		return
	}
	if !a.checked {
		a.checked = l.probedSinceStart()
	}
	byPrefix := map[netip.Prefix]*record.Announcement{}
	var order []netip.Prefix
	serving := map[netip.Prefix]bool{}
	allServing := map[netip.Prefix]bool{}
	allFailed := map[netip.Prefix]bool{}
	hold := map[netip.Prefix]time.Duration{}
	for i := range l.want.Services {
		s := &l.want.Services[i]
		sk := rules.KeyOf(&s.Service)
		p, ok := cfg.Prefixes[sk]
		if !ok {
			continue
		}
		an := byPrefix[p]
		if an == nil {
			an = &record.Announcement{Prefix: p}
			byPrefix[p] = an
			order = append(order, p)
		}
		if len(an.Services) == 0 {
			allServing[p] = true
		}
		an.Services = append(an.Services, sk.String())
		if unplaced[sk] {
			an.Why = whyNotPlaced
		}
		if l.allDown[sk] {
			allFailed[p], allServing[p] = true, false
			continue
		}
		for j := range s.Dests {
			ref := desired.DestRef{Service: sk, Dest: rules.DestKeyOf(&s.Dests[j].Destination)}
			in, checkedRef := l.inSvc[ref]
			if checkedRef && in || !checkedRef && s.Dests[j].Weight > 0 {
				serving[p] = true
			} else if checkedRef {
				allServing[p] = false
			}
		}
	}
	if len(a.back) > 0 || slices.ContainsFunc(a.state, func(o record.Announcement) bool { return o.Why == whyNoServer }) {
		hold = l.riseHolds(cfg)
	}
	now := time.Now()
	var up []netip.Prefix
	for _, p := range order {
		an := byPrefix[p]
		switch {
		case an.Why != "":
		case a.withdrawal.Withdraws(p):
			an.Why = whyWithdrawn
		case !a.checked:
			an.Why = whyWaiting
		case serving[p] && !allServing[p] && a.returning(p, now) && now.Before(a.back[p].Add(hold[p])):
			an.Why = whyReturning
		case serving[p], allFailed[p] && cfg.WhenAllDown == desired.KeepAnnouncing:
			an.Announced = true
			up = append(up, p)
			delete(a.back, p)
		default:
			an.Why = whyNoServer
			delete(a.back, p)
		}
	}
	state := make([]record.Announcement, 0, len(order))
	for _, p := range order {
		state = append(state, *byPrefix[p])
	}
	l.setAnnounced(up, state)
}

// returning reports whether p serves again after a time with no real
// server in service, noting since when at the first call.
func (a *announcer) returning(p netip.Prefix, now time.Time) bool {
	if _, ok := a.back[p]; ok {
		return true
	}
	i := slices.IndexFunc(a.state, func(o record.Announcement) bool { return o.Prefix == p })
	if i < 0 || a.state[i].Why != whyNoServer {
		return false
	}
	if a.back == nil {
		a.back = map[netip.Prefix]time.Time{}
	}
	a.back[p] = now
	return true
}

// riseHolds is, for each prefix, the longest time a real server of its
// services takes to come back: rise passes an interval apart, and one
// interval more for the probes' phases.
func (l *runLoop) riseHolds(cfg *desired.Announce) map[netip.Prefix]time.Duration {
	out := map[netip.Prefix]time.Duration{}
	for i := range l.probes {
		c := &l.probes[i]
		p, ok := cfg.Prefixes[c.ref.Service]
		if !ok {
			continue
		}
		ivl, err := time.ParseDuration(c.spec.Interval)
		if err != nil {
			ivl = health.DefaultInterval
		}
		if d := time.Duration(max(c.spec.Rise, 1)+1) * ivl; d > out[p] {
			out[p] = d
		}
	}
	return out
}

// setAnnounced puts up on the device, opening it at the first prefix,
// and logs what changed once the device has it: a prefix the device could
// not take (no device) is not logged as announced.
func (l *runLoop) setAnnounced(up []netip.Prefix, state []record.Announcement) {
	a := l.ann
	prev, hadDev := a.state, a.dev != nil
	a.state = state
	defer func() { l.logAnnounced(prev, a.state, hadDev) }()
	if a.dev == nil && len(up) == 0 {
		a.openErr = "" // nothing to announce: no device to make
		return
	}
	name := desired.DefaultAnnounceDevice
	if l.health != nil && l.health.Announce != nil {
		name = l.health.Announce.Device
	}
	if a.dev != nil && a.name != name {
		a.dev.Close() // the file names another device: withdraw from this one
		a.dev = nil
	}
	if a.dev == nil {
		d, err := a.open(name)
		if err != nil {
			if err.Error() != a.openErr {
				fmt.Fprintf(l.log, "lvsctl run: cannot announce: %v; trying again every %s\n", err, drainPoll)
			}
			a.openErr = err.Error()
			for i := range a.state {
				a.state[i].Announced, a.state[i].Why = false, "no device: "+err.Error()
			}
			return
		}
		if a.openErr != "" {
			fmt.Fprintf(l.log, "lvsctl run: announce device %s made\n", name)
		}
		a.dev, a.name, a.openErr = d, name, ""
	}
	if err := a.dev.Set(up); err != nil {
		fmt.Fprintf(l.log, "lvsctl run: %v\n", err)
	}
}

// logAnnounced logs the changes from prev to now; a prefix new to the
// file and not announced is logged only when a device was open.
func (l *runLoop) logAnnounced(prev, now []record.Announcement, hadDev bool) {
	for _, n := range now {
		if i := slices.IndexFunc(prev, func(o record.Announcement) bool { return o.Prefix == n.Prefix }); i < 0 || prev[i].Announced != n.Announced {
			if n.Announced {
				fmt.Fprintf(l.log, "lvsctl run: announcing %s\n", n.Prefix)
			} else if i >= 0 || hadDev {
				fmt.Fprintf(l.log, "lvsctl run: not announcing %s: %s\n", n.Prefix, n.Why)
			}
		}
	}
	for _, o := range prev {
		if o.Announced && !slices.ContainsFunc(now, func(n record.Announcement) bool { return n.Prefix == o.Prefix }) {
			fmt.Fprintf(l.log, "lvsctl run: not announcing %s: no longer in the file\n", o.Prefix)
		}
	}
}

// probedSinceStart reports whether every checked target has had a probe
// since the run started: until then, a restarted run's states are the
// record's, not its own.
func (l *runLoop) probedSinceStart() bool {
	for i := range l.probes {
		s, ok := l.checker.State(l.probes[i].key)
		if !ok || s.LastProbe.Before(l.ann.started) {
			return false
		}
	}
	return true
}

// readWithdrawal reads lvsctl withdraw's file again when it changed, and
// reports whether it did.
func (l *runLoop) readWithdrawal() bool {
	a := l.ann
	var st unix.Stat_t
	err := l.j.StatWithdrawal(&st)
	if errors.Is(err, unix.ENOENT) {
		if a.withdrawal == nil {
			return false
		}
		a.withdrawal, a.stat = nil, unix.Stat_t{}
		fmt.Fprintf(l.log, "lvsctl run: the withdrawal ended\n")
		return true
	}
	if err != nil || st.Ino == a.stat.Ino && st.Mtim == a.stat.Mtim && st.Size == a.stat.Size {
		return false
	}
	w, err := l.j.LoadWithdrawal()
	if err != nil {
		fmt.Fprintf(l.log, "lvsctl run: %v\n", err)
		return false
	}
	a.withdrawal, a.stat = w, st
	if w != nil {
		what := "every prefix"
		if !w.All {
			var ps []string
			for _, p := range w.Prefixes {
				ps = append(ps, p.String())
			}
			what = strings.Join(ps, ", ")
		}
		fmt.Fprintf(l.log, "lvsctl run: withdrawn by lvsctl withdraw: %s\n", what)
	}
	return true
}

// stopAnnouncing withdraws everything at once (run stops).
func (l *runLoop) stopAnnouncing() {
	if l.ann.dev != nil {
		l.ann.dev.Close()
		l.ann.dev = nil
	}
}
