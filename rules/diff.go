package rules

// This file compares a desired rule set with the kernel's and produces the
// plan: the fewest changes that turn one into the other, in the order
// lvsctl applies them.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/lvskit/lvskit/ipvs"
)

// Action is what a change does.
type Action string

// The actions of a plan. Apply performs adds and re-adds first (a service's
// new and re-added destinations together, from the last in canonical order
// to the first), then edits, then deletes.
const (
	AddService    Action = "add-service"
	AddDest       Action = "add-dest"
	ReAddDest     Action = "re-add-dest" // mh order: deleted and added again at once
	EditService   Action = "edit-service"
	EditDest      Action = "edit-dest"
	DeleteDest    Action = "delete-dest" // drained first
	DeleteService Action = "delete-service"
)

// Field is one setting an edit changes, as text.
type Field struct {
	Name     string `json:"field"`
	Old, New string `json:"-"`
}

// Change is one step of a plan. Service is the desired service (for adds
// and edits) or the kernel's (for deletes); Dest likewise. An edit lists the
// fields it changes.
type Change struct {
	Action  Action
	Service ipvs.Service
	Dest    *ipvs.Destination // destination changes only
	Fields  []Field
	// Dests are the destinations a deleted service drains, and Active and
	// Inactive the kernel's connection counts when the plan was made
	// (summed over Dests for a service).
	Dests            []ipvs.Destination
	Active, Inactive uint32
}

// Plan is the change set from one rule set to another.
type Plan struct {
	Changes  []Change
	Warnings []string
	// Kernel is the size of the table the plan was made from.
	Kernel TableSize
}

// TableSize counts a table's services, and its real servers with each
// service without any counted as one (the unit Removals counts in).
type TableSize struct{ Services, Servers int }

// Removals counts what a plan takes out of the table: each leaving real
// server, and each leaving service without real servers.
func (p *Plan) Removals() int {
	n := 0
	for i := range p.Changes {
		switch c := &p.Changes[i]; c.Action {
		case DeleteDest:
			n++
		case DeleteService:
			n += max(len(c.Dests), 1)
		}
	}
	return n
}

// InSync reports whether the plan changes nothing.
func (p *Plan) InSync() bool { return len(p.Changes) == 0 }

// Count returns how many changes of each action the plan holds.
func (p *Plan) Count() map[Action]int {
	m := map[Action]int{}
	for _, c := range p.Changes {
		m[c.Action]++
	}
	return m
}

// DiffOptions tune what Diff plans and warns about.
type DiffOptions struct {
	// KeepMHOrder leaves mh services' destination lists in the kernel's
	// order; by default destinations are re-added so that every director
	// holds them in canonical order (see docs/lvsctl.md).
	KeepMHOrder bool
	// ExpireQuiescentTemplate is net.ipv4.vs.expire_quiescent_template, or
	// nil when unknown; with it off, persistence templates keep sending
	// their clients to a draining server.
	ExpireQuiescentTemplate *bool
	// Draining is true when leaving destinations are drained (a drain
	// timeout above zero); it only selects the warnings.
	Draining bool
	// OwnProbes plans the kernel's probe services (IsProbeService) like
	// any other: lvsctl run, which makes them, does. Otherwise they are
	// left alone, neither deleted nor counted.
	OwnProbes bool
	// Only, when set, limits the plan to the services it accepts: the
	// others, desired or in the kernel, are neither read nor changed. A
	// caller that knows which services it changed since the table last
	// matched its own plans (lvsctl run) reads those alone.
	Only func(ServiceKey) bool
}

// Diff plans the changes that turn current (the kernel's set, with
// destinations in the kernel's list order) into desired. Changes come in
// apply order: new services with their destinations, new and re-added (mh)
// destinations of kept services, each service's from the last in canonical
// order to the first (see DestKey.Compare), service edits, destination
// edits, leaving destinations, leaving services.
// Within each group, services are in key order.
func Diff(current, desired *Set, o DiffOptions) *Plan {
	svcs := make([]ipvs.Service, len(current.Services))
	for i := range current.Services {
		svcs[i] = current.Services[i].Service
	}
	var buf []ipvs.DestinationEntry
	p, _ := diff(svcs, pair(svcs, desired, o), func(i int) ([]ipvs.DestinationEntry, error) {
		buf = buf[:0]
		for _, d := range current.Services[i].Dests {
			buf = append(buf, ipvs.DestinationEntry{Destination: d.Destination, DestCounters: d.KernelCounters()})
		}
		return buf, nil
	}, o)
	return p
}

// DiffKernel is Diff against the kernel's table as c reads it. It holds
// one service's destinations at a time, not the whole table: at 10,000
// services × 10 the kernel's side of a plan is a list of services and one
// reused buffer.
//
// The kernel resumes a dump by position, so a service or real server
// added or deleted during the read can make it skip or repeat another; a
// skipped one that the desired set lacks would never be deleted.
// A read answered in one datagram is a snapshot. Otherwise DiffKernel
// reads the services again after the plan and keeps the plan only when
// both reads list the same services, and reads a service's destinations
// again until two reads agree; at most readRounds times each, then
// ErrTableChanging.
func DiffKernel(c ipvs.Reader, desired *Set, o DiffOptions) (*Plan, error) {
	defer ipvs.SkipStats(c, true)() // a plan reads no traffic counters
	svcs, err := readServices(c)
	if err != nil {
		return nil, err
	}
	snapshot := !severalDatagrams(c)
	var check []ipvs.DestinationEntry
	for range readRounds {
		pairs := pair(svcs, desired, o)
		p, err := diffRead(c, svcs, pairs, func(i int, dests []ipvs.DestinationEntry) ([]ipvs.DestinationEntry, error) {
			// A service whose destinations came in several datagrams is
			// read again until two reads agree, for the same reason as the
			// services (see ipvs.Conn.ReplyDatagrams).
			var err error
			for round := 1; severalDatagrams(c); round++ {
				if check, err = ipvs.AppendDestinations(c, check[:0], &svcs[i]); err != nil {
					return nil, err
				}
				if slices.EqualFunc(dests, check, sameDest) {
					break
				}
				if round == readRounds {
					return nil, ErrTableChanging
				}
				dests = append(dests[:0], check...)
			}
			return dests, nil
		}, o)
		if err != nil {
			return nil, err
		}
		if snapshot {
			return p, nil
		}
		sameKeys := func(a, b ipvs.Service) bool { return KeyOf(&a) == KeyOf(&b) }
		// A snapshot of the services' identities after the plan, when c
		// can take one (ipvs.Conn: of the IPv4 services), costs a fraction
		// of a second dump. A dump skips a service only when one it had
		// already listed is deleted during it; that one is then missing
		// from the snapshot, or back in it at another place or with a
		// service repeated, so a first read equal to the snapshot, in
		// order, missed nothing. (With IPv6 services the two differ, and
		// the services are read again.)
		if s, ok := c.(interface {
			SnapshotServiceKeys([]ipvs.Service) ([]ipvs.Service, bool)
		}); ok {
			if keys, ok := s.SnapshotServiceKeys(nil); ok && slices.EqualFunc(svcs, keys, sameKeys) {
				return p, nil
			}
		}
		again, err := readServices(c)
		if err != nil {
			return nil, err
		}
		if slices.EqualFunc(svcs, again, sameKeys) {
			return p, nil
		}
		svcs, snapshot = again, !severalDatagrams(c)
	}
	return nil, ErrTableChanging
}

// diffRead is diff with the kernel's destinations read through c in the
// order diff asks for them, with ipvs.EachDestinations (which reads
// IPv4 services in batches, chain by chain); settle may read a
// service again and returns the destinations to use.
func diffRead(c ipvs.Reader, svcs []ipvs.Service, pairs *pairing, settle func(i int, dests []ipvs.DestinationEntry) ([]ipvs.DestinationEntry, error), o DiffOptions) (*Plan, error) {
	reads := pairs.reads()
	var readErr error
	next, stop := iter.Pull2(func(yield func(int, []ipvs.DestinationEntry) bool) {
		readErr = ipvs.EachDestinations(c, len(reads), func(k int) *ipvs.Service { return &svcs[reads[k]] },
			func(k int, dests []ipvs.DestinationEntry) error {
				if !yield(reads[k], dests) {
					return errStopped
				}
				return nil
			})
	})
	defer stop()
	return diff(svcs, pairs, func(i int) ([]ipvs.DestinationEntry, error) {
		j, dests, ok := next()
		switch {
		case !ok && readErr != nil:
			return nil, readErr
		case !ok || j != i:
			return nil, fmt.Errorf("rules: destinations of service %d read where diff asked for %d", j, i)
		}
		return settle(i, dests)
	}, o)
}

// errStopped ends a read that diff no longer needs.
var errStopped = errors.New("stopped")

// severalDatagrams reports whether c's last answer took more than one
// datagram; readers that cannot tell (the fake) answer at once.
func severalDatagrams(c ipvs.Reader) bool {
	r, ok := c.(interface{ ReplyDatagrams() int })
	return ok && r.ReplyDatagrams() > 1
}

// sameDest compares destinations by identity: what a skipped or repeated
// entry changes.
func sameDest(a, b ipvs.DestinationEntry) bool {
	return a.Family == b.Family && a.Addr == b.Addr && a.Port == b.Port
}

// readRounds bounds DiffKernel's reads of a table that keeps changing.
const readRounds = 3

// ErrTableChanging is DiffKernel's answer when no two consecutive reads
// of the kernel's services, or of one service's destinations, agreed:
// another program kept adding or deleting them.
var ErrTableChanging = fmt.Errorf("the kernel's table changed during each of %d reads; nothing was planned (another program keeps adding or deleting services or real servers)", readRounds)

// readServices lists the kernel's services.
func readServices(c ipvs.Reader) ([]ipvs.Service, error) {
	var svcs []ipvs.Service
	err := ipvs.DumpServices(c, func(s *ipvs.ServiceEntry) error {
		svcs = append(svcs, s.Service)
		return nil
	})
	return svcs, err
}

// pairing matches the desired services with the kernel's.
type pairing struct {
	want    []*Service // the desired services in key order
	at      []int      // the kernel's position of want[i], -1 for none
	leaving []int      // the kernel's services none desired matches, in key order
}

func pair(services []ipvs.Service, desired *Set, o DiffOptions) *pairing {
	cur := newServiceIndex(services)
	p := &pairing{want: make([]*Service, 0, len(desired.Services))}
	for i := range desired.Services {
		if w := &desired.Services[i]; o.Only == nil || o.Only(KeyOf(&w.Service)) {
			p.want = append(p.want, w)
		}
	}
	p.at = make([]int, len(p.want))
	slices.SortFunc(p.want, func(a, b *Service) int { return KeyOf(&a.Service).Compare(KeyOf(&b.Service)) })
	wanted := make([]bool, len(services))
	for i, w := range p.want {
		p.at[i] = -1
		if ci, ok := cur.find(&w.Service); ok {
			p.at[i], wanted[ci] = ci, true
		}
	}
	for i := range services {
		if !wanted[i] && (o.OwnProbes || !IsProbeService(&services[i])) && (o.Only == nil || o.Only(KeyOf(&services[i]))) {
			p.leaving = append(p.leaving, i)
		}
	}
	slices.SortFunc(p.leaving, func(a, b int) int { return KeyOf(&services[a]).Compare(KeyOf(&services[b])) })
	return p
}

// reads lists the kernel's services whose destinations diff reads, in
// the order it reads them.
func (p *pairing) reads() []int {
	r := make([]int, 0, len(p.at)+len(p.leaving))
	for _, ci := range p.at {
		if ci >= 0 {
			r = append(r, ci)
		}
	}
	return append(r, p.leaving...)
}

// diff is Diff over the kernel's services, paired with the desired ones,
// and a function returning the destinations of services[i] in list order
// (valid until its next call), called in the order of pairs.reads.
func diff(services []ipvs.Service, pairs *pairing, destsOf func(i int) ([]ipvs.DestinationEntry, error), o DiffOptions) (*Plan, error) {
	var adds, svcEdits, destEdits, destDels, svcDels []Change
	var warnings []string
	var size TableSize
	var curOrder []int32 // scratch: positions of the kernel's destinations in canonical order
	var match []int32    // scratch: the kernel's position of each desired destination, or -1
	for wi, w := range pairs.want {
		dests := w.Dests
		if !w.Ordered {
			dests = canonicalCopy(w.Dests)
		}
		ci := pairs.at[wi]
		if ci < 0 {
			adds = append(adds, Change{Action: AddService, Service: w.Service})
			for i := len(dests) - 1; i >= 0; i-- {
				adds = append(adds, Change{Action: AddDest, Service: w.Service, Dest: &dests[i].Destination})
			}
			continue
		}
		c := &services[ci]
		if f := serviceFields(c, &w.Service); len(f) > 0 {
			svcEdits = append(svcEdits, Change{Action: EditService, Service: w.Service, Fields: f})
		}
		kernel, err := destsOf(ci)
		if err != nil {
			return nil, err
		}
		size.add(len(kernel))
		// Both lists in canonical order: lookups by binary search, no map
		// per service.
		curOrder = canonicalOrder(curOrder[:0], kernel)
		wantSorted := dests
		if w.Ordered {
			wantSorted = canonicalCopy(w.Dests)
		}
		// One merge of the two canonical lists pairs each desired
		// destination with the kernel's (match, by position in
		// wantSorted: -1 for none) and finds the leaving ones, in
		// canonical order.
		match = match[:0]
		j := 0
		for i := range wantSorted {
			wk := &wantSorted[i].Destination
			c := -1
			for ; j < len(curOrder); j++ {
				k := &kernel[curOrder[j]]
				c = CompareDests(&k.Destination, wk)
				if c >= 0 {
					break
				}
				destDels = append(destDels, deleteDest(&w.Service, k))
			}
			if c == 0 && j < len(curOrder) {
				match = append(match, curOrder[j])
				j++
			} else {
				match = append(match, -1)
			}
		}
		for ; j < len(curOrder); j++ {
			destDels = append(destDels, deleteDest(&w.Service, &kernel[curOrder[j]]))
		}
		var readd map[DestKey]bool
		if w.Scheduler == "mh" && !o.KeepMHOrder {
			readd = mhReAdds(kernel, dests)
		}
		for i := len(dests) - 1; i >= 0; i-- {
			d := &dests[i].Destination
			at := i // dests is wantSorted, unless the service is Ordered
			if w.Ordered {
				at, _ = searchDests(len(wantSorted), func(i int) *ipvs.Destination { return &wantSorted[i].Destination }, DestKeyOf(d))
			}
			switch {
			case match[at] < 0:
				adds = append(adds, Change{Action: AddDest, Service: w.Service, Dest: d})
			case readd != nil && readd[DestKeyOf(d)]:
				old := &kernel[match[at]]
				adds = append(adds, Change{Action: ReAddDest, Service: w.Service, Dest: d,
					Fields: append([]Field{{Name: "order", Old: "kernel", New: "canonical"}}, destFields(&old.Destination, d)...),
					Active: old.ActiveConns, Inactive: old.InactConns})
			default:
				if f := destFields(&kernel[match[at]].Destination, d); len(f) > 0 {
					destEdits = append(destEdits, Change{Action: EditDest, Service: w.Service, Dest: d, Fields: f})
				}
			}
		}
	}
	for _, i := range pairs.leaving {
		kernel, err := destsOf(i)
		if err != nil {
			return nil, err
		}
		size.add(len(kernel))
		ch := Change{Action: DeleteService, Service: services[i]}
		curOrder = canonicalOrder(curOrder[:0], kernel)
		for _, j := range curOrder {
			d := &kernel[j]
			ch.Dests = append(ch.Dests, d.Destination)
			ch.Active += d.ActiveConns
			ch.Inactive += d.InactConns
		}
		svcDels = append(svcDels, ch)
	}
	p := &Plan{Changes: make([]Change, 0, len(adds)+len(svcEdits)+len(destEdits)+len(destDels)+len(svcDels)), Kernel: size}
	for _, g := range [][]Change{adds, svcEdits, destEdits, destDels, svcDels} {
		p.Changes = append(p.Changes, g...)
	}
	p.Warnings = append(warnings, planWarnings(p, o)...)
	return p, nil
}

// add counts a service with n real servers; a service without any counts
// as one, as Removals counts it.
func (t *TableSize) add(n int) {
	t.Services++
	t.Servers += max(n, 1)
}

// serviceIndex finds services by key. IPv4 address services, nearly
// every service of a large table, are keyed by one machine word, which
// the runtime's map of 64-bit keys finds faster than a map hashing and
// comparing whole ServiceKeys (BenchmarkPlanInSync; figures: decision
// 0013).
type serviceIndex struct {
	v4    map[uint64]int
	other map[ServiceKey]int
}

func newServiceIndex(svcs []ipvs.Service) serviceIndex {
	x := serviceIndex{v4: make(map[uint64]int, len(svcs)), other: map[ServiceKey]int{}}
	for i := range svcs {
		if w, ok := v4Word(&svcs[i]); ok {
			x.v4[w] = i
		} else {
			x.other[KeyOf(&svcs[i])] = i
		}
	}
	return x
}

// find returns the position of the service with svc's key.
func (x serviceIndex) find(svc *ipvs.Service) (int, bool) {
	if w, ok := v4Word(svc); ok {
		i, ok := x.v4[w]
		return i, ok
	}
	i, ok := x.other[KeyOf(svc)]
	return i, ok
}

// v4Word packs the key of an IPv4 address service (address, port,
// protocol) into one word; two such services have equal keys exactly when
// their words are equal. Other services report false.
func v4Word(s *ipvs.Service) (uint64, bool) {
	if s.FWMark != 0 || s.Family != ipvs.AFInet || !s.Addr.Is4() {
		return 0, false
	}
	a := s.Addr.As4()
	return uint64(binary.BigEndian.Uint32(a[:]))<<32 | uint64(s.Port)<<16 | uint64(s.Protocol), true
}

// deleteDest is the change that removes the kernel's destination k of svc.
func deleteDest(svc *ipvs.Service, k *ipvs.DestinationEntry) Change {
	d := k.Destination
	return Change{Action: DeleteDest, Service: *svc, Dest: &d, Active: k.ActiveConns, Inactive: k.InactConns}
}

// searchDests finds key k among n destinations in canonical order, at(i)
// being the i-th; it returns k's position and whether it is there.
func searchDests(n int, at func(i int) *ipvs.Destination, k DestKey) (int, bool) {
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if DestKeyOf(at(m)).Compare(k) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < n && DestKeyOf(at(lo)) == k
}

// canonicalOrder appends to order the positions of ds in canonical order.
func canonicalOrder(order []int32, ds []ipvs.DestinationEntry) []int32 {
	for i := range ds {
		order = append(order, int32(i))
	}
	cmp := func(a, b int32) int { return CompareDests(&ds[a].Destination, &ds[b].Destination) }
	if slices.IsSortedFunc(order, cmp) {
		return order // added by lvsctl, which adds the last first
	}
	// The kernel lists the newest first: a table restored from a file in
	// canonical order lists in reverse.
	slices.Reverse(order)
	if !slices.IsSortedFunc(order, cmp) {
		slices.SortFunc(order, cmp)
	}
	return order
}

// canonicalCopy returns ds in canonical order: ds itself when it is (the
// callers only read it), else a sorted copy.
func canonicalCopy(ds []Dest) []Dest {
	for i := 1; i < len(ds); i++ {
		if CompareDests(&ds[i-1].Destination, &ds[i].Destination) > 0 {
			out := slices.Clone(ds)
			canonicalDests(out)
			return out
		}
	}
	return ds
}

// mhReAdds picks the kept destinations of an mh service that must be
// deleted and added again so that its list ends in the desired order
// (canonical, or as an Ordered service gives it).
// Adding puts a destination at the head of the kernel's list, so the list
// is canonical when the destinations that stay put form a tail of the
// canonical order, in the same order in the kernel's list, and all others
// are (re-)added from the last to the first. It returns the fewest
// re-adds: the longest such tail stays.
func mhReAdds(kernel []ipvs.DestinationEntry, desired []Dest) map[DestKey]bool {
	canonical := desired
	pos := make(map[DestKey]int, len(kernel))
	for i := range kernel {
		pos[DestKeyOf(&kernel[i].Destination)] = i
	}
	// kept in kernel order, leaving ones skipped: positions compare alike.
	n := len(canonical)
	tail := n // canonical[tail:] stays
	last := len(kernel)
	for i := n - 1; i >= 0; i-- {
		p, ok := pos[DestKeyOf(&canonical[i].Destination)]
		if !ok || p >= last {
			break
		}
		last, tail = p, i
	}
	out := map[DestKey]bool{}
	for i := 0; i < tail; i++ {
		dk := DestKeyOf(&canonical[i].Destination)
		if _, ok := pos[dk]; ok {
			out[dk] = true
		}
	}
	return out
}
