// Package top is the model and the screen of lvsctl top.
//
// lvsctl top is the live view of a director's IPVS table. From one read of
// the table (rules.Read: the counters and the kernel's rate estimates),
// lvsctl's drain journal and lvsctl run's health record, the model builds
// one row per service (its totals) and per real server. A row has the rates,
// connections, weights and a state: in service, draining, held out by its
// check, kept in service though every check of its service failed, sorry
// server, or unknown. Services whose checks all failed are marked ALL DOWN.
// The model sorts, filters and folds rows and formats only the rows a screen
// shows; Batch writes plain-text or JSON frames, and Run drives a
// full-screen view (tcell) by keys.
package top

import (
	"container/heap"
	"fmt"
	"hash/maphash"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/rules"
)

// Rates are the kernel's five rate estimates of a service or real server,
// in the order lvsctl list --rate prints them: connections, packets in
// and out, bytes in and out, each per second.
func Rates(s *ipvs.Stats) [5]uint64 {
	return [5]uint64{s.CPS, s.InPPS, s.OutPPS, s.InBPS, s.OutBPS}
}

// FormatRate writes a rate: the kernel's estimate as it is, or, with
// human, in at most 6 characters with SI units (1000 = K): 999, 1.2K,
// 34.5M. lvsctl list --rate and lvsctl top both write rates with it.
func FormatRate(v uint64, human bool) string {
	if !human || v < 1000 {
		return strconv.FormatUint(v, 10)
	}
	f := float64(v)
	for _, u := range []string{"K", "M", "G", "T", "P", "E"} {
		f /= 1000
		if f < 999.95 {
			if f < 99.95 {
				return strconv.FormatFloat(f, 'f', 1, 64) + u
			}
			return strconv.FormatFloat(f, 'f', 0, 64) + u
		}
	}
	return strconv.FormatUint(v, 10)
}

// Health is what lvsctl run's record says of one checked real server.
type Health struct {
	InService bool
	// Check is the check's state: up, down or unknown.
	Check string
	// Result is the last probe's result (an error, or "ok").
	Result string
	// Weight is the configured weight (the file's), when known.
	Weight    uint32
	HasWeight bool
	// Dynamic says that the weight in the table is the one its dynamic
	// exec check passed with, not the file's.
	Dynamic bool
}

// Input is one refresh: the table as read once, the journal's drains and
// lvsctl run's record.
type Input struct {
	Set    *rules.Set
	Drains []rules.DrainEntry
	// Run is lvsctl run's record by "SERVICE -r DEST" (as ipvsadm -Sn
	// names them); RunActive says that run still runs.
	Run       map[string]Health
	RunActive bool
	// AllDown are the services (keys as ipvsadm -Sn writes them) whose
	// real servers all failed their checks, by lvsctl run's record.
	AllDown []string
	// Announce is each prefix lvsctl run's file announces, as its record
	// has them; none when the file announces nothing.
	Announce []Announcement
	Now      time.Time
}

// Announcement is one prefix as lvsctl run's record has it: whether run
// announces it and, when not, why.
type Announcement struct {
	Prefix    netip.Prefix `json:"prefix"`
	Announced bool         `json:"announced"`
	Why       string       `json:"why,omitempty"`
	// Services are those that count for it, as ipvsadm names them.
	Services []string `json:"services"`
}

// notRunning is why nothing is announced once the run stopped: its
// device died with it.
const notRunning = "lvsctl run not running"

// Column is a column of the view.
type Column int

// The columns, in the order the screen shows them; those that do not fit
// are dropped from the right, the two address columns stay.
const (
	colService Column = iota
	colServer
	colState
	colCPS
	colInPPS
	colOutPPS
	colInBPS
	colOutBPS
	colActive
	colInactive
	colWeight
	colMethod
	numColumns
)

// columnNames are the headers, also the names --sort takes (lower case).
var columnNames = [numColumns]string{"SERVICE", "SERVER", "STATE", "CPS", "INPPS", "OUTPPS", "INBPS", "OUTBPS",
	"ACTIVE", "INACT", "WEIGHT", "FWD"}

// ParseColumn returns the column named name (case does not matter).
func ParseColumn(name string) (Column, error) {
	for i, n := range columnNames {
		if strings.EqualFold(n, name) {
			return Column(i), nil
		}
	}
	return 0, fmt.Errorf("no column %q (one of %s)", name, strings.ToLower(strings.Join(columnNames[:], ", ")))
}

// State labels.
const (
	labelInService = "in service"
	labelUnknown   = "unknown"
	labelSorry     = "sorry server"
	// allDownMark starts the state of a service whose real servers all
	// failed their checks: "ALL DOWN: 1/2 in service".
	allDownMark = "ALL DOWN"
)

// row is one service's totals or one real server, as numbers; its text is
// written only when it is shown.
type row struct {
	dest      *rules.Dest // nil for a service row
	service   *rules.Service
	name      string // the service key, or the real server's address
	active    uint64
	inactive  uint64
	rates     [5]uint64
	state     int    // stateIn and the others; a service row's is stateService
	left      uint64 // draining: connections left
	deadline  int64  // draining: seconds to the deadline
	reason    string // held out or kept: the check's last result
	weight    int64
	conf      int64 // configured weight, -1 when unknown
	dynamic   bool  // the weight is the dynamic check's (Health.Dynamic)
	servers   int   // a service row's real servers
	inService int   // ... of them in service (kept and sorry too)
	allDown   bool  // a service row's: every check failed
}

// group is a service and its real servers.
type group struct {
	svc    row
	dests  []row // made by fill
	filled bool
}

// Model is the view's state: the rows of the last refresh and how they
// are sorted, filtered and folded.
type Model struct {
	// Period is the refresh period.
	Period time.Duration
	// Sort is the sort column; Reverse turns its order around. Numbers
	// sort largest first, names smallest first.
	Sort    Column
	Reverse bool
	// Filter keeps services whose key, or one of whose real servers'
	// address, holds it (the servers that match, unless the service does).
	Filter string

	collapsed    map[string]bool
	groups       []group
	now          time.Time
	services     int
	servers      int
	read         int
	seed         maphash.Seed
	lastRates    uint64
	ratesChanged time.Time
	runActive    bool
	in           Input
	drains       map[string]rules.DrainEntry
	allDown      map[string]bool // in.AllDown while the run runs
	announce     []Announcement  // in.Announce, none announced once the run stopped
}

// NewModel returns an empty model refreshed every period.
func NewModel(period time.Duration) *Model {
	return &Model{Period: period, Sort: colService, collapsed: map[string]bool{}, seed: maphash.MakeSeed()}
}

// Update replaces the rows with those of in. It reads only the
// services' figures: a service's real servers are made rows when a frame,
// the filter or the sort first needs them (fill), so that a refresh of a
// large table costs what the screen shows.
func (m *Model) Update(in Input) {
	m.now, m.runActive, m.in = in.Now, in.RunActive, in
	m.drains = make(map[string]rules.DrainEntry, len(in.Drains))
	for _, d := range in.Drains {
		m.drains[d.Service.String()+" -r "+d.Dest.String()] = d
	}
	m.allDown = nil
	if in.RunActive && len(in.AllDown) > 0 {
		m.allDown = make(map[string]bool, len(in.AllDown))
		for _, k := range in.AllDown {
			m.allDown[k] = true
		}
	}
	m.announce = in.Announce
	if !in.RunActive && len(in.Announce) > 0 {
		m.announce = make([]Announcement, len(in.Announce))
		for i, a := range in.Announce {
			a.Announced, a.Why = false, notRunning
			m.announce[i] = a
		}
	}
	var h maphash.Hash
	h.SetSeed(m.seed)
	m.groups = m.groups[:0]
	m.services, m.servers = len(in.Set.Services), 0
	for i := range in.Set.Services {
		s := &in.Set.Services[i]
		st := s.KernelStats()
		g := group{svc: row{service: s, rates: Rates(&st), conf: -1, servers: len(s.Dests)}}
		// A service's estimates move with its real servers'.
		for _, r := range g.svc.rates {
			writeUint(&h, r)
		}
		m.servers += len(s.Dests)
		m.groups = append(m.groups, g)
	}
	if sum := h.Sum64(); m.read == 0 || sum != m.lastRates {
		if m.read > 0 {
			m.ratesChanged = in.Now
		}
		m.lastRates = sum
	}
	m.read++
}

// fill makes a group's real servers rows, and their totals, once per
// update.
func (m *Model) fill(g *group) {
	if g.filled {
		return
	}
	g.filled = true
	s := g.svc.service
	key := m.nameOf(&g.svc)
	g.svc.allDown = m.allDown[key]
	g.dests = make([]row, len(s.Dests))
	for j := range s.Dests {
		d := &s.Dests[j]
		c := d.KernelCounters()
		name := rules.DestKeyOf(&d.Destination).String()
		r := row{service: s, dest: d, name: name, active: uint64(c.ActiveConns), inactive: uint64(c.InactConns),
			rates: Rates(&c.Stats), weight: int64(int32(d.Weight)), conf: -1}
		var hl Health
		checked := false
		ref := ""
		if len(m.drains) > 0 || len(m.in.Run) > 0 {
			ref = key + " -r " + name
			hl, checked = m.in.Run[ref]
		}
		if checked && hl.HasWeight {
			r.conf = int64(hl.Weight)
		}
		r.dynamic = checked && m.in.RunActive && hl.Dynamic
		m.setState(&r, m.drains, ref, hl, checked && m.in.RunActive, g.svc.allDown)
		if r.state == stateIn || r.state == stateKept || r.state == stateSorry {
			g.svc.inService++
		}
		g.svc.active += r.active
		g.svc.inactive += r.inactive
		g.svc.weight += r.weight
		g.dests[j] = r
	}
}

// nameOf is a row's name: the service key, or the real server's address,
// written when first asked for.
func (m *Model) nameOf(r *row) string {
	if r.name == "" {
		r.name = rules.KeyOf(&r.service.Service).String()
	}
	return r.name
}

// isCollapsed reports whether a group's real servers are folded.
func (m *Model) isCollapsed(g *group) bool {
	return len(m.collapsed) > 0 && m.collapsed[m.nameOf(&g.svc)]
}

func writeUint(h *maphash.Hash, v uint64) {
	var b [8]byte
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	h.Write(b[:])
}

// A row's state.
const (
	stateService = iota // a service's totals
	stateIn
	stateDraining
	stateHeld
	stateKept
	stateSorry
	stateUnknown
)

// setState labels a real server: draining (the journal holds it), held
// out by its check (lvsctl run's record), kept in service though its check
// failed (its service's checks all failed, and when_all_down keep left it
// in), the sorry server (a server lvsctl run does not check, in a service
// whose checks all failed), in service (weight above 0), or unknown
// (weight 0 for no reason lvsctl knows, or a check that has not answered
// yet).
func (m *Model) setState(r *row, drains map[string]rules.DrainEntry, ref string, hl Health, checked, allDown bool) {
	if d, ok := drains[ref]; ok {
		left := d.Deadline.Sub(m.now)
		r.state, r.left, r.deadline = stateDraining, r.active+r.inactive, max(0, int64((left+time.Second-1)/time.Second))
		return
	}
	if checked && !hl.InService {
		if hl.Check == "unknown" {
			r.state = stateUnknown
			return
		}
		r.state, r.reason = stateHeld, hl.Result
		if r.reason == "" {
			r.reason = hl.Check
		}
		return
	}
	if checked && (hl.Check == "down" || allDown && hl.Check != "up") {
		r.state, r.reason = stateKept, hl.Result
		if r.reason == "" {
			r.reason = hl.Check
		}
		return
	}
	if r.weight > 0 {
		r.state = stateIn
		if allDown && !checked {
			r.state = stateSorry
		}
		return
	}
	r.state = stateUnknown
}

// stateText is a row's state as batch and JSON frames write it, or, with
// short, as the screen does: "draining 3 conns 90s" fits the column that
// 80 columns leave.
func stateText(r *row, short bool) string {
	switch r.state {
	case stateService:
		n := strconv.Itoa(r.inService) + "/" + strconv.Itoa(r.servers) + " in service"
		if r.allDown {
			return allDownMark + ": " + n
		}
		return n
	case stateIn:
		return labelInService
	case stateDraining:
		if short {
			return fmt.Sprintf("draining %d conns %ds", r.left, r.deadline)
		}
		return fmt.Sprintf("draining (%d conns, %d s to deadline)", r.left, r.deadline)
	case stateHeld:
		if short {
			return "held out: " + r.reason
		}
		return "held out by check (" + r.reason + ")"
	case stateKept:
		if short {
			return "kept, all failed: " + r.reason
		}
		return "kept in service, all failed (" + r.reason + ")"
	case stateSorry:
		return labelSorry
	}
	return labelUnknown
}

// Size is the table's size: services and real servers.
func (m *Model) Size() (services, servers int) { return m.services, m.servers }

// RatesChanged is when the kernel's rate estimates last changed between
// two reads (the kernel updates them every 2 seconds); zero before a
// change was seen.
func (m *Model) RatesChanged() time.Time { return m.ratesChanged }

// Header is the view's first line: the time, the table's size with how
// many services are ALL DOWN, how many prefixes are announced of those
// lvsctl run's file announces (and why each other one is not), the
// refresh period and, once a change was seen, when the rates last
// changed. It starts with "lvsctl top" on every frame.
func (m *Model) Header() string {
	services := plural(m.services, "service", "services")
	if len(m.allDown) > 0 {
		services += " (" + strconv.Itoa(len(m.allDown)) + " " + allDownMark + ")"
	}
	h := fmt.Sprintf("lvsctl top - %s  %s, %s  every %s", m.now.Format("15:04:05"),
		services, plural(m.servers, "real server", "real servers")+m.announced(), shortDuration(m.Period))
	if !m.ratesChanged.IsZero() {
		h += "  rates changed " + m.now.Sub(m.ratesChanged).Round(100*time.Millisecond).String() + " ago"
	}
	return h
}

// announced is the header's part on announcement, with its leading
// spaces: "  announced 1/2 (10.3.0.2/32 withdrawn by lvsctl withdraw)";
// empty when the file announces nothing.
func (m *Model) announced() string {
	if len(m.announce) == 0 {
		return ""
	}
	n := 0
	var not []string
	for _, a := range m.announce {
		if a.Announced {
			n++
		} else {
			not = append(not, a.Prefix.String()+" "+a.Why)
		}
	}
	s := fmt.Sprintf("  announced %d/%d", n, len(m.announce))
	if len(not) > 0 {
		s += " (" + strings.Join(not, "; ") + ")"
	}
	return s
}

// Announce is each prefix lvsctl run's file announces and whether it is
// announced: none is once the run stopped.
func (m *Model) Announce() []Announcement { return m.announce }

// AllDown lists the services whose real servers all failed their checks,
// as lvsctl run's record has them; none when the run is not running.
func (m *Model) AllDown() []string {
	if len(m.allDown) == 0 {
		return nil
	}
	return m.in.AllDown
}

// plural is n and the noun in the number n asks for.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func shortDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return d.String()
}

// Toggle folds or unfolds a service's real servers.
func (m *Model) Toggle(service string) { m.collapsed[service] = !m.collapsed[service] }

// SetAllCollapsed folds (true) or unfolds every service.
func (m *Model) SetAllCollapsed(c bool) {
	clear(m.collapsed)
	if c {
		for i := range m.groups {
			m.collapsed[m.nameOf(&m.groups[i].svc)] = true
		}
	}
}

// Collapsed reports whether a service's real servers are folded.
func (m *Model) Collapsed(service string) bool { return m.collapsed[service] }

// line is one shown row, as text by column.
type line struct {
	// Service is the service key; Server is empty on a service's row.
	Service, Server string
	// Key is the service's key.
	Key   rules.ServiceKey
	Cells [numColumns]string
	// DynamicWeight says that a real server's weight is the one its
	// dynamic exec check set (lvsctl run's record).
	DynamicWeight bool
}

// IsService reports whether the line is a service's totals.
func (l *line) IsService() bool { return l.Server == "" }

// matches reports whether a group is shown under the filter, and which of
// its real servers are.
func (m *Model) matches(g *group) (bool, func(*row) bool) {
	if m.Filter == "" || strings.Contains(m.nameOf(&g.svc), m.Filter) {
		return true, func(*row) bool { return true }
	}
	m.fill(g)
	any := false
	for i := range g.dests {
		if strings.Contains(g.dests[i].name, m.Filter) {
			any = true
			break
		}
	}
	return any, func(r *row) bool { return strings.Contains(r.name, m.Filter) }
}

// Len is the number of lines the whole view has under the filter and the
// folds.
func (m *Model) Len() int {
	n := 0
	for i := range m.groups {
		g := &m.groups[i]
		ok, keep := m.matches(g)
		if !ok {
			continue
		}
		n++
		if m.isCollapsed(g) {
			continue
		}
		if m.Filter == "" {
			n += len(g.svc.service.Dests)
			continue
		}
		m.fill(g)
		for j := range g.dests {
			if keep(&g.dests[j]) {
				n++
			}
		}
	}
	return n
}

// compare orders two rows by the sort column.
func (m *Model) compare(a, b *row) int {
	c := 0
	switch m.Sort {
	case colService, colServer:
		c = identity(a, b)
	case colState:
		c = strings.Compare(stateText(a, false), stateText(b, false))
	case colMethod:
		c = strings.Compare(method(a), method(b))
	default:
		x, y := m.number(a), m.number(b)
		switch {
		case x > y:
			c = -1
		case x < y:
			c = 1
		}
		if c == 0 {
			c = identity(a, b)
		}
	}
	if m.Reverse {
		return -c
	}
	return c
}

// identity orders two services by key, or two real servers by address,
// as list does.
func identity(a, b *row) int {
	if a.dest == nil && b.dest == nil {
		return rules.KeyOf(&a.service.Service).Compare(rules.KeyOf(&b.service.Service))
	}
	if a.dest != nil && b.dest != nil {
		return rules.CompareDests(&a.dest.Destination, &b.dest.Destination)
	}
	return strings.Compare(a.name, b.name)
}

// sortNeedsServers reports whether the sort column of a service's row
// comes from its real servers (totals, or how many are in service).
func (m *Model) sortNeedsServers() bool {
	switch m.Sort {
	case colState, colActive, colInactive, colWeight:
		return true
	}
	return false
}

func (m *Model) number(r *row) int64 {
	switch m.Sort {
	case colWeight:
		return r.weight
	case colActive:
		return int64(r.active)
	case colInactive:
		return int64(r.inactive)
	case colCPS, colInPPS, colOutPPS, colInBPS, colOutBPS:
		return int64(r.rates[m.Sort-colCPS])
	}
	return 0
}

func method(r *row) string {
	if r.dest == nil {
		return r.service.Scheduler
	}
	return rules.MethodName(r.dest.FwdMethod)
}

// groupHeap is a max-heap of groups by the sort order: it keeps the first
// k groups of n in O(n log k), so that a frame sorts no more than it shows.
type groupHeap struct {
	m  *Model
	gs []*group
}

func (h *groupHeap) Len() int           { return len(h.gs) }
func (h *groupHeap) Less(i, j int) bool { return h.m.compare(&h.gs[i].svc, &h.gs[j].svc) > 0 }
func (h *groupHeap) Swap(i, j int)      { h.gs[i], h.gs[j] = h.gs[j], h.gs[i] }
func (h *groupHeap) Push(x any)         { h.gs = append(h.gs, x.(*group)) }
func (h *groupHeap) Pop() any {
	x := h.gs[len(h.gs)-1]
	h.gs = h.gs[:len(h.gs)-1]
	return x
}

// Lines returns n lines of the view from line offset on: services in the
// sort order, each followed by its real servers (unless folded) in the
// same order. Only the services those lines need are sorted, and only the
// lines returned are written as text; human writes rates in short units.
func (m *Model) Lines(offset, n int, human bool) []line {
	if n <= 0 {
		return nil
	}
	// The first offset+n lines need at most offset+n services.
	k := offset + n
	h := &groupHeap{m: m}
	needs := m.sortNeedsServers()
	for i := range m.groups {
		g := &m.groups[i]
		if ok, _ := m.matches(g); !ok {
			continue
		}
		if needs {
			m.fill(g)
		}
		if h.Len() < k {
			heap.Push(h, g)
		} else if m.compare(&g.svc, &h.gs[0].svc) < 0 {
			h.gs[0] = g
			heap.Fix(h, 0)
		}
	}
	ordered := make([]*group, h.Len())
	for i := len(ordered) - 1; i >= 0; i-- {
		ordered[i] = heap.Pop(h).(*group)
	}
	var out []line
	pos := 0
	for _, g := range ordered {
		if pos >= k {
			break
		}
		m.fill(g)
		if pos >= offset {
			out = append(out, m.line(&g.svc, human))
		}
		pos++
		if m.isCollapsed(g) {
			continue
		}
		_, keep := m.matches(g)
		var ds []*row
		for j := range g.dests {
			if keep(&g.dests[j]) {
				ds = append(ds, &g.dests[j])
			}
		}
		if pos+len(ds) <= offset {
			pos += len(ds)
			continue
		}
		sortRows(m, ds)
		for _, d := range ds {
			if pos >= k {
				break
			}
			if pos >= offset {
				out = append(out, m.line(d, human))
			}
			pos++
		}
	}
	return out
}

// sortRows sorts a service's real servers (insertion sort for the few,
// heap sort beyond).
func sortRows(m *Model, rs []*row) {
	if len(rs) < 16 {
		for i := 1; i < len(rs); i++ {
			for j := i; j > 0 && m.compare(rs[j], rs[j-1]) < 0; j-- {
				rs[j], rs[j-1] = rs[j-1], rs[j]
			}
		}
		return
	}
	h := &rowHeap{m, rs}
	heap.Init(h)
	for end := len(rs) - 1; end > 0; end-- {
		rs[0], rs[end] = rs[end], rs[0]
		h.rs = rs[:end]
		heap.Fix(h, 0)
	}
}

type rowHeap struct {
	m  *Model
	rs []*row
}

func (h *rowHeap) Len() int           { return len(h.rs) }
func (h *rowHeap) Less(i, j int) bool { return h.m.compare(h.rs[i], h.rs[j]) > 0 }
func (h *rowHeap) Swap(i, j int)      { h.rs[i], h.rs[j] = h.rs[j], h.rs[i] }
func (h *rowHeap) Push(x any)         { h.rs = append(h.rs, x.(*row)) }
func (h *rowHeap) Pop() any           { x := h.rs[len(h.rs)-1]; h.rs = h.rs[:len(h.rs)-1]; return x }

// line writes a row's cells.
func (m *Model) line(r *row, human bool) line {
	var l line
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	if r.dest == nil {
		l.Service = m.nameOf(r)
		l.Key = rules.KeyOf(&r.service.Service)
		l.Cells[colService] = l.Service
		fold := "-"
		if m.collapsed[l.Service] {
			fold = "+"
		}
		l.Cells[colServer] = fold + " " + plural(r.servers, "server", "servers")
		l.Cells[colWeight] = strconv.FormatInt(r.weight, 10)
	} else {
		l.Key = rules.KeyOf(&r.service.Service)
		l.Service = l.Key.String()
		l.Server = r.name
		l.Cells[colServer] = r.name
		l.Cells[colWeight] = strconv.FormatInt(r.weight, 10)
		if m.runActive && r.conf >= 0 {
			l.Cells[colWeight] += "/" + strconv.FormatInt(r.conf, 10)
		}
		l.DynamicWeight = r.dynamic
	}
	l.Cells[colState] = stateText(r, human)
	l.Cells[colActive] = u(r.active)
	l.Cells[colInactive] = u(r.inactive)
	for i, v := range r.rates {
		l.Cells[colCPS+Column(i)] = FormatRate(v, human)
	}
	l.Cells[colMethod] = method(r)
	return l
}
