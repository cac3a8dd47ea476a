package top

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/gdamore/tcell/v2"

	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/rules"
)

var t0 = time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)

func svc(addr string, port uint16, cps uint64, dests ...rules.Dest) rules.Service {
	return rules.Service{Service: ipvs.Service{Family: ipvs.AFInet, Protocol: ipvs.ProtoTCP, Addr: netip.MustParseAddr(addr), Port: port, Scheduler: "wrr"},
		Stats: &ipvs.Stats{CPS: cps}, Dests: dests}
}

func dest(addr string, weight uint32, active, inactive uint32, cps uint64) rules.Dest {
	return rules.Dest{Destination: ipvs.Destination{Family: ipvs.AFInet, Addr: netip.MustParseAddr(addr), Port: 80, Weight: weight, FwdMethod: ipvs.FwdMasq},
		Counters: &ipvs.DestCounters{ActiveConns: active, InactConns: inactive, Stats: ipvs.Stats{CPS: cps, InBPS: 1234567}}}
}

// fixture: three services; 10.0.0.1's .2 drains, .3 is held out by its
// check, .4 is at weight 0 for no known reason, .1 serves.
func fixture(now time.Time) Input {
	set := &rules.Set{Services: []rules.Service{
		svc("10.0.0.1", 80, 50, dest("192.168.1.1", 3, 10, 5, 40), dest("192.168.1.2", 0, 2, 1, 0),
			dest("192.168.1.3", 0, 0, 0, 0), dest("192.168.1.4", 0, 0, 0, 10)),
		svc("10.0.0.2", 443, 500, dest("192.168.2.1", 1, 100, 0, 300), dest("192.168.2.2", 1, 50, 0, 200)),
		svc("10.0.0.3", 22, 5, dest("192.168.3.1", 1, 1, 0, 5)),
	}}
	drain := rules.DrainEntry{Service: rules.KeyOf(&set.Services[0].Service), Dest: rules.DestKeyOf(&set.Services[0].Dests[1].Destination),
		Weight: 2, Started: now.Add(-time.Minute), Deadline: now.Add(90 * time.Second)}
	return Input{Set: set, Drains: []rules.DrainEntry{drain}, Now: now, RunActive: true, Run: map[string]Health{
		"-t 10.0.0.1:80 -r 192.168.1.3:80": {InService: false, Check: "down", Result: "connection refused", Weight: 2, HasWeight: true},
		"-t 10.0.0.1:80 -r 192.168.1.1:80": {InService: true, Check: "up", Result: "ok", Weight: 4, HasWeight: true},
	}}
}

func model(t *testing.T) *Model {
	t.Helper()
	m := NewModel(time.Second)
	m.Update(fixture(t0))
	return m
}

func cells(ls []line, c Column) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Cells[c])
	}
	return out
}

func TestStates(t *testing.T) {
	m := model(t)
	ls := m.Lines(0, m.Len(), false)
	got := map[string]string{}
	for _, l := range ls {
		got[l.Server] = l.Cells[colState]
	}
	want := map[string]string{
		"192.168.1.1:80": "in service",
		"192.168.1.2:80": "draining (3 conns, 90 s to deadline)",
		"192.168.1.3:80": "held out by check (connection refused)",
		"192.168.1.4:80": "unknown",
		"":               "1/1 in service", // the last service row seen: 10.0.0.3
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("state of %q: %q, want %q", k, got[k], v)
		}
	}
	if ls[0].Cells[colState] != "1/4 in service" {
		t.Errorf("service state %q", ls[0].Cells[colState])
	}
	// Configured weight beside the kernel's while run runs.
	if ls[1].Cells[colWeight] != "3/4" {
		t.Errorf("weight of .1: %q, want 3/4", ls[1].Cells[colWeight])
	}
	// The deadline counts down with the clock, and stops at 0.
	later := fixture(t0.Add(100 * time.Second))
	later.Drains = fixture(t0).Drains
	m.Update(later)
	if s := m.Lines(2, 1, false)[0].Cells[colState]; s != "draining (3 conns, 0 s to deadline)" {
		t.Errorf("past the deadline: %q", s)
	}
	// A run that is not running holds nothing out and shows no configured weight.
	in := fixture(t0)
	in.RunActive = false
	m.Update(in)
	ls = m.Lines(0, 5, false)
	if ls[3].Cells[colState] != "unknown" || ls[1].Cells[colWeight] != "3" {
		t.Errorf("without a live run: %q %q", ls[3].Cells[colState], ls[1].Cells[colWeight])
	}
}

func TestSortAndReverse(t *testing.T) {
	m := model(t)
	if got := cells(m.Lines(0, 3, false), colService); strings.Join(got, ",") != "-t 10.0.0.1:80,," {
		t.Errorf("by service: %q", got)
	}
	m.Sort = colCPS
	ls := m.Lines(0, m.Len(), false)
	if ls[0].Service != "-t 10.0.0.2:443" || ls[1].Server != "192.168.2.1:80" || ls[2].Server != "192.168.2.2:80" || ls[3].Service != "-t 10.0.0.1:80" || ls[4].Server != "192.168.1.1:80" {
		t.Errorf("by cps, largest first: %v", ls[:5])
	}
	m.Reverse = true
	ls = m.Lines(0, 2, false)
	if ls[0].Service != "-t 10.0.0.3:22" {
		t.Errorf("reversed: %v", ls)
	}
	// A window in the middle is the same as that part of the whole.
	m.Reverse = false
	all := m.Lines(0, m.Len(), false)
	for off := range all {
		if w := m.Lines(off, 2, false); w[0].Server != all[off].Server || w[0].Service != all[off].Service {
			t.Fatalf("window at %d: %v, whole: %v", off, w[0], all[off])
		}
	}
	for _, name := range []string{"cps", "SERVER", "inact"} {
		if _, err := ParseColumn(name); err != nil {
			t.Error(err)
		}
	}
	if _, err := ParseColumn("nope"); err == nil {
		t.Error("ParseColumn accepted nope")
	}
}

func TestFilterAndFold(t *testing.T) {
	m := model(t)
	if m.Len() != 10 {
		t.Fatalf("Len %d, want 10", m.Len())
	}
	m.Filter = "10.0.0.2"
	if ls := m.Lines(0, 10, false); len(ls) != 3 || ls[0].Service != "-t 10.0.0.2:443" {
		t.Errorf("filter by service: %v", ls)
	}
	m.Filter = "192.168.1.3"
	if ls := m.Lines(0, 10, false); len(ls) != 2 || ls[1].Server != "192.168.1.3:80" {
		t.Errorf("filter by real server: %v", ls)
	}
	m.Filter = "nothing"
	if m.Len() != 0 || len(m.Lines(0, 10, false)) != 0 {
		t.Error("filter matching nothing shows lines")
	}
	m.Filter = ""
	m.Toggle("-t 10.0.0.1:80")
	if m.Len() != 6 || m.Lines(0, 1, false)[0].Cells[colServer] != "+ 4 servers" {
		t.Errorf("folded: Len %d, %v", m.Len(), m.Lines(0, 1, false))
	}
	m.SetAllCollapsed(true)
	if m.Len() != 3 {
		t.Errorf("all folded: Len %d", m.Len())
	}
}

// The first line says when the rates last changed once it saw them
// change, and nothing of them before: with no traffic they never do.
func TestRatesChangedAndHeader(t *testing.T) {
	m := NewModel(2 * time.Second)
	in := fixture(t0)
	m.Update(in)
	if h := m.Header(); !m.RatesChanged().IsZero() || h != "lvsctl top - 10:00:00  3 services, 7 real servers  every 2s" {
		t.Errorf("first read: %q", h)
	}
	for i := 1; i <= 5; i++ {
		in.Now = t0.Add(time.Duration(i) * 400 * time.Millisecond)
		m.Update(in)
		if h := m.Header(); !m.RatesChanged().IsZero() || strings.Contains(h, "rate") {
			t.Errorf("read %d with the same rates: %q", i+1, h)
		}
	}
	var b bytes.Buffer
	if err := m.WriteJSON(&b); err != nil || strings.Contains(b.String(), "rates_changed") {
		t.Errorf("JSON frame before a change (%v): %s", err, b.String())
	}
	in = fixture(t0.Add(2 * time.Second))
	in.Set.Services[2].Stats.CPS = 6
	m.Update(in)
	if !m.RatesChanged().Equal(t0.Add(2 * time.Second)) {
		t.Errorf("rates changed at %v", m.RatesChanged())
	}
	in.Now = t0.Add(2500 * time.Millisecond)
	m.Update(in)
	if !strings.HasSuffix(m.Header(), "rates changed 500ms ago") {
		t.Errorf("header %q", m.Header())
	}
}

func TestFormatRate(t *testing.T) {
	for v, want := range map[uint64]string{0: "0", 999: "999", 1000: "1.0K", 1234567: "1.2M", 99_949: "99.9K", 999_000: "999K", 999_999: "1.0M", 1 << 62: "4.6E"} {
		if got := FormatRate(v, true); got != want || len(got) > 6 {
			t.Errorf("FormatRate(%d) = %q, want %q", v, got, want)
		}
		if got := FormatRate(v, false); got != fmt.Sprint(v) {
			t.Errorf("exact FormatRate(%d) = %q", v, got)
		}
	}
}

func TestTextAndJSONFrames(t *testing.T) {
	m := model(t)
	var b bytes.Buffer
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n\n"), "\n")
	if len(lines) != 2+10 || !strings.HasPrefix(lines[0], "lvsctl top - ") {
		t.Fatalf("frame:\n%s", b.String())
	}
	if strings.Join(strings.Fields(lines[1]), " ") != strings.Join(columnNames[:], " ") {
		t.Errorf("column line %q", lines[1])
	}
	if !strings.Contains(b.String(), "1234567") || strings.ContainsRune(b.String(), 0x1b) {
		t.Errorf("text frame has human units or escapes:\n%s", b.String())
	}
	b.Reset()
	m.Filter = "192.168.1"
	if err := m.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var f struct {
		Version  int `json:"version"`
		Services []struct {
			Address string `json:"address"`
			State   string `json:"state"`
			Stats   *struct {
				Rate *struct {
					CPS uint64 `json:"conns_per_second"`
				} `json:"rate"`
			} `json:"stats"`
			Destinations []struct {
				Address    string  `json:"address"`
				State      string  `json:"state"`
				Weight     int64   `json:"weight"`
				Configured *int64  `json:"configured_weight"`
				Active     *uint32 `json:"active_conns"`
			} `json:"destinations"`
		} `json:"services"`
	}
	if err := json.Unmarshal(b.Bytes(), &f); err != nil || bytes.Count(b.Bytes(), []byte("\n")) != 1 {
		t.Fatalf("json frame: %v\n%s", err, b.String())
	}
	if len(f.Services) != 1 || len(f.Services[0].Destinations) != 4 || f.Services[0].Stats.Rate.CPS != 50 {
		t.Fatalf("json frame: %+v", f)
	}
	d := f.Services[0].Destinations
	if d[1].State != "draining (3 conns, 90 s to deadline)" || d[2].State != "held out by check (connection refused)" ||
		d[0].Configured == nil || *d[0].Configured != 4 || *d[0].Active != 10 {
		t.Errorf("json destinations: %+v", d)
	}
}

// screen returns a view on an 80x24 simulated terminal.
func screen(t *testing.T, w, h int) (*view, tcell.SimulationScreen) {
	t.Helper()
	sim := tcell.NewSimulationScreen("UTF-8")
	if err := sim.Init(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Fini)
	sim.SetSize(w, h)
	s := newView(sim, model(t), false)
	s.Draw()
	return s, sim
}

func text(sim tcell.SimulationScreen) []string {
	cs, w, h := sim.GetContents()
	out := make([]string, h)
	for y := range h {
		var b strings.Builder
		for x := range w {
			r := cs[y*w+x].Runes
			if len(r) == 0 {
				b.WriteByte(' ')
			} else {
				b.WriteRune(r[0])
			}
		}
		out[y] = strings.TrimRight(b.String(), " ")
	}
	return out
}

func key(s *view, r rune) { s.Key(tcell.NewEventKey(tcell.KeyRune, r, tcell.ModNone)); s.Draw() }
func special(s *view, k tcell.Key) {
	s.Key(tcell.NewEventKey(k, 0, tcell.ModNone))
	s.Draw()
}

func TestScreenKeys(t *testing.T) {
	s, sim := screen(t, 80, 24)
	lines := text(sim)
	if !strings.HasPrefix(lines[0], "lvsctl top - 10:00:00  3 services, 7 real servers") {
		t.Errorf("first line %q", lines[0])
	}
	if !strings.HasPrefix(lines[2], "SERVICE") || !strings.Contains(lines[3], "-t 10.0.0.1:80") {
		t.Errorf("screen:\n%s", strings.Join(lines, "\n"))
	}
	// > moves the sort to the next column, r reverses.
	for range int(colCPS) {
		key(s, '>')
	}
	key(s, '>')
	key(s, '<')
	if s.m.Sort != colCPS || !strings.Contains(text(sim)[3], "-t 10.0.0.2:443") {
		t.Errorf("sort by cps: %v\n%s", s.m.Sort, strings.Join(text(sim), "\n"))
	}
	key(s, 'r')
	if !strings.Contains(text(sim)[3], "-t 10.0.0.3:22") {
		t.Errorf("reversed:\n%s", strings.Join(text(sim), "\n"))
	}
	key(s, '<')
	if s.m.Sort != colState {
		t.Errorf("< moved to %v", s.m.Sort)
	}
	// Filter: / types, Enter applies, Esc clears.
	key(s, '/')
	for _, r := range "192.168.3" {
		key(s, r)
	}
	if !strings.HasPrefix(text(sim)[1], "filter: 192.168.3_") {
		t.Errorf("prompt %q", text(sim)[1])
	}
	special(s, tcell.KeyEnter)
	if got := text(sim); !strings.Contains(got[3], "10.0.0.3:22") || !strings.Contains(got[4], "192.168.3.1:80") || got[5] != "" {
		t.Errorf("filtered:\n%s", strings.Join(got, "\n"))
	}
	key(s, '/')
	special(s, tcell.KeyEscape)
	if s.m.Filter != "" || s.m.Len() != 10 {
		t.Errorf("Esc left filter %q", s.m.Filter)
	}
	// Enter on a real server folds its service; space unfolds it.
	s.m.Sort, s.m.Reverse = colService, false
	special(s, tcell.KeyHome)
	special(s, tcell.KeyDown)
	special(s, tcell.KeyEnter)
	if s.m.Len() != 6 || s.cursor != 0 || !strings.Contains(text(sim)[3], "+ 4 servers") {
		t.Errorf("fold: Len %d cursor %d\n%s", s.m.Len(), s.cursor, strings.Join(text(sim), "\n"))
	}
	key(s, ' ')
	if s.m.Len() != 10 {
		t.Errorf("unfold: Len %d", s.m.Len())
	}
	// p pauses; d sets the period.
	key(s, 'p')
	if !s.Paused() || !strings.HasPrefix(text(sim)[1], "PAUSED") {
		t.Errorf("pause: %q", text(sim)[1])
	}
	key(s, 'd')
	for _, r := range "2.5" {
		key(s, r)
	}
	special(s, tcell.KeyEnter)
	if s.m.Period != 2500*time.Millisecond || !strings.Contains(text(sim)[0], "every 2.5s") {
		t.Errorf("period %v, %q", s.m.Period, text(sim)[0])
	}
	key(s, 'd')
	key(s, 'x')
	special(s, tcell.KeyEnter)
	if s.m.Period != 2500*time.Millisecond || !strings.Contains(text(sim)[1], "give seconds") {
		t.Errorf("bad period accepted: %v %q", s.m.Period, text(sim)[1])
	}
	key(s, '?')
	if !strings.Contains(strings.Join(text(sim), "\n"), "fold or unfold") {
		t.Error("no help")
	}
	key(s, 'x')
	key(s, 'q')
	if !s.Quit() {
		t.Error("q did not quit")
	}
}

func TestScreenWidths(t *testing.T) {
	s, sim := screen(t, 200, 24)
	if head := text(sim)[2]; !strings.Contains(head, "FWD") || !strings.Contains(head, "OUTBPS") {
		t.Errorf("wide header %q", head)
	}
	for _, w := range []int{80, 40, 20} {
		sim.SetSize(w, 24)
		sim.Sync()
		s.Draw()
		lines := text(sim)
		for i, l := range lines {
			if n := utf8.RuneCountInString(l); n > w {
				t.Errorf("width %d: line %d is %d wide: %q", w, i, n, l)
			}
		}
		// The address columns stay, other columns go from the right.
		if !strings.HasPrefix(lines[2], "SERVICE") || w >= 40 && (!strings.Contains(lines[2], "SERVER") || !strings.Contains(lines[4], "192.168.1.1:80")) {
			t.Errorf("width %d:\n%s", w, strings.Join(lines, "\n"))
		}
		if strings.Contains(lines[2], "FWD") {
			t.Errorf("width %d keeps FWD: %q", w, lines[2])
		}
	}
	sim.SetSize(80, 24)
	s.Draw()
	if head := text(sim)[2]; !strings.Contains(head, "STATE") || !strings.Contains(head, "CPS") {
		t.Errorf("80 columns: %q", head)
	}
}

func TestColorWanted(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if !ColorWanted(env(map[string]string{"TERM": "xterm"})) {
		t.Error("xterm without NO_COLOR gets no colour")
	}
	for _, e := range []map[string]string{{"TERM": "xterm", "NO_COLOR": "1"}, {"TERM": "dumb"}, {}} {
		if ColorWanted(env(e)) {
			t.Errorf("colour with %v", e)
		}
	}
}

// A large table: a frame formats only the lines it shows.
func TestLargeTableShowsAWindow(t *testing.T) {
	set := &rules.Set{}
	for i := range 2000 {
		var ds []rules.Dest
		for j := range 10 {
			ds = append(ds, dest(fmt.Sprintf("10.%d.%d.%d", i/256, i%256, j+1), 1, uint32(j), 0, uint64(i*10+j)))
		}
		set.Services = append(set.Services, svc(fmt.Sprintf("172.16.%d.%d", i/256, i%256), 80, uint64(i), ds...))
	}
	m := NewModel(time.Second)
	m.Update(Input{Set: set, Now: t0})
	m.Sort = colCPS
	ls := m.Lines(0, 21, true)
	if len(ls) != 21 || ls[0].Service != "-t 172.16.7.207:80" || ls[1].Cells[colCPS] != "20.0K" || ls[11].Service != "-t 172.16.7.206:80" {
		t.Errorf("top of 2000x10 by cps: %v", ls[:3])
	}
	if m.Len() != 22000 {
		t.Errorf("Len %d", m.Len())
	}
}

// Run, the full-screen loop, on a simulated terminal: it reads at once
// and every period, asks for the real servers of the services on screen
// only (the whole table while a filter is set), draws each read, and
// ends on q. It runs in a synctest bubble: the periods pass at once.
func TestRunLoop(t *testing.T) { synctest.Test(t, testRunLoop) }

func testRunLoop(t *testing.T) {
	sim := tcell.NewSimulationScreen("UTF-8")
	if err := sim.Init(); err != nil {
		t.Fatal(err)
	}
	defer sim.Fini()
	sim.SetSize(80, 5) // room for 2 rows: the first service and its first server
	const period = 100 * time.Millisecond
	m := NewModel(period)
	wants := make(chan Want, 100)
	reads := 0
	src := func(w Want) (Input, error) {
		wants <- w
		reads++
		in := fixture(t0.Add(time.Duration(reads) * time.Second))
		return in, nil
	}
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), sim, m, src, false) }()
	// read is the one read made by now.
	read := func(what string) Want {
		t.Helper()
		synctest.Wait()
		if len(wants) != 1 {
			t.Fatalf("%s: %d reads, want 1", what, len(wants))
		}
		return <-wants
	}
	if w := read("at the start"); !w.Full {
		t.Errorf("first read %+v, want the whole table", w)
	}
	time.Sleep(period)
	if w := read("a period on"); w.Full || len(w.Services) != 1 || !w.Services[rules.KeyOf(&fixture(t0).Set.Services[0].Service)] {
		t.Errorf("second read %+v, want the real servers of -t 10.0.0.1:80 only", w)
	}
	sim.InjectKey(tcell.KeyRune, '/', tcell.ModNone)
	sim.InjectKey(tcell.KeyRune, '2', tcell.ModNone)
	sim.InjectKey(tcell.KeyEnter, 0, tcell.ModNone)
	synctest.Wait()
	time.Sleep(period)
	if w := read("a period after the filter"); !w.Full {
		t.Errorf("read after a filter %+v, want the whole table", w)
	}
	sim.InjectKey(tcell.KeyRune, 'q', tcell.ModNone)
	synctest.Wait()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal("q did not end Run")
	}
	if lines := text(sim); !strings.HasPrefix(lines[0], "lvsctl top - ") || !strings.Contains(lines[1], `filter "2"`) {
		t.Errorf("last screen:\n%s", strings.Join(lines, "\n"))
	}
}

// BenchmarkScreenRefresh is a refresh of a full screen (50 lines) of a
// 10,000 × 10 table sorted by connections/s: the update and the lines
// shown.
func BenchmarkScreenRefresh(b *testing.B) {
	set := &rules.Set{}
	for i := range 10000 {
		s := svc(fmt.Sprintf("172.%d.%d.%d", 16+i/65536, i/256%256, i%256), 80, uint64(i))
		for j := range 10 {
			s.Dests = append(s.Dests, dest(fmt.Sprintf("10.%d.%d.%d", i/256, i%256, j+1), 1, uint32(j), 0, uint64(i*10+j)))
		}
		set.Services = append(set.Services, s)
	}
	m := NewModel(time.Second)
	m.Sort = colCPS
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		m.Update(Input{Set: set, Now: t0})
		m.Len()
		m.Lines(0, 47, true)
	}
}

// allDownFixture is fixture with every check of -t 10.0.0.2:443 failed:
// lvsctl run keeps .1, in service before, and holds .2 out (when_all_down
// keep); and -t 10.0.0.3:22's one check failed with its sorry server in
// (when_all_down sorry).
func allDownFixture(now time.Time) Input {
	in := fixture(now)
	s3 := &in.Set.Services[2]
	s3.Dests[0].Weight = 0
	s3.Dests = append(s3.Dests, dest("192.168.9.9", 1, 0, 0, 0))
	in.Run["-t 10.0.0.2:443 -r 192.168.2.1:80"] = Health{InService: true, Check: "down", Result: "connect 192.168.2.1:80: connection refused", Weight: 1, HasWeight: true}
	in.Run["-t 10.0.0.2:443 -r 192.168.2.2:80"] = Health{InService: false, Check: "down", Result: "timeout after 1s", Weight: 1, HasWeight: true}
	in.Run["-t 10.0.0.3:22 -r 192.168.3.1:80"] = Health{InService: false, Check: "down", Result: "timeout after 1s", Weight: 1, HasWeight: true}
	in.AllDown = []string{"-t 10.0.0.2:443", "-t 10.0.0.3:22"}
	return in
}

// A service whose checks all failed is marked ALL DOWN on its line, in
// the first line's count and in the JSON frame; the server kept in service
// only because all failed reads as kept with its check's error, and the
// sorry server as such.
func TestAllDown(t *testing.T) {
	m := NewModel(time.Second)
	m.Update(allDownFixture(t0))
	if h := m.Header(); !strings.HasPrefix(h, "lvsctl top - 10:00:00  3 services (2 ALL DOWN), 8 real servers  every 1s") {
		t.Errorf("header %q", h)
	}
	states := map[string]string{}
	for _, l := range m.Lines(0, m.Len(), false) {
		states[l.Service+" "+l.Server] = l.Cells[colState]
	}
	for k, want := range map[string]string{
		"-t 10.0.0.1:80 ":                "1/4 in service",
		"-t 10.0.0.2:443 ":               "ALL DOWN: 1/2 in service",
		"-t 10.0.0.2:443 192.168.2.1:80": "kept in service, all failed (connect 192.168.2.1:80: connection refused)",
		"-t 10.0.0.2:443 192.168.2.2:80": "held out by check (timeout after 1s)",
		"-t 10.0.0.3:22 ":                "ALL DOWN: 1/2 in service",
		"-t 10.0.0.3:22 192.168.9.9:80":  "sorry server",
	} {
		if states[k] != want {
			t.Errorf("state of %q: %q, want %q", k, states[k], want)
		}
	}
	// The screen's short form says kept too.
	if s := m.Lines(6, 1, true)[0]; s.Server != "192.168.2.1:80" || s.Cells[colState] != "kept, all failed: connect 192.168.2.1:80: connection refused" {
		t.Errorf("short state of %s: %q", s.Server, s.Cells[colState])
	}

	var b bytes.Buffer
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(2 ALL DOWN)", "-t 10.0.0.2:443 - 2 servers ALL DOWN: 1/2 in service",
		"192.168.2.1:80 kept in service, all failed (connect 192.168.2.1:80: connection refused)"} {
		if !strings.Contains(strings.Join(strings.Fields(b.String()), " "), want) {
			t.Errorf("text frame lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := m.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var f struct {
		AllDown  []string `json:"all_down"`
		Services []struct {
			Address      string `json:"address"`
			State        string `json:"state"`
			AllDown      bool   `json:"all_down"`
			Destinations []struct {
				State string `json:"state"`
			} `json:"destinations"`
		} `json:"services"`
	}
	if err := json.Unmarshal(b.Bytes(), &f); err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.AllDown, ",") != "-t 10.0.0.2:443,-t 10.0.0.3:22" || f.Services[0].AllDown || !f.Services[1].AllDown ||
		f.Services[1].State != "ALL DOWN: 1/2 in service" || !strings.HasPrefix(f.Services[1].Destinations[0].State, "kept in service, all failed (") {
		t.Errorf("JSON frame: %+v\n%s", f, b.String())
	}

	// A record left by a run that no longer runs marks nothing.
	in := allDownFixture(t0)
	in.RunActive = false
	m.Update(in)
	b.Reset()
	if err := m.WriteText(&b); err != nil || strings.Contains(b.String(), "ALL DOWN") || strings.Contains(b.String(), "kept") || strings.Contains(b.String(), "sorry") {
		t.Errorf("without a live run (%v):\n%s", err, b.String())
	}
}

// longReason is a check's error longer than any screen's state column.
const longReason = `Get "http://192.168.1.3:80/health/deep?probe=lvsctl": connect 192.168.1.3:80: connection refused`

// A held-out server's reason is never cut without a way to see it whole:
// batch frames write it whole; the screen widens the state column into
// the room the columns leave, marks a cut state with …, and i shows the
// selected line whole, wrapped to the screen.
func TestHeldOutReasonWhole(t *testing.T) {
	in := fixture(t0)
	in.Run["-t 10.0.0.1:80 -r 192.168.1.3:80"] = Health{InService: false, Check: "down", Result: longReason, Weight: 2, HasWeight: true}
	m := NewModel(time.Second)
	m.Update(in)
	var b bytes.Buffer
	if err := m.WriteText(&b); err != nil || !strings.Contains(b.String(), "held out by check ("+longReason+")") {
		t.Errorf("text frame (%v):\n%s", err, b.String())
	}

	sim := tcell.NewSimulationScreen("UTF-8")
	if err := sim.Init(); err != nil {
		t.Fatal(err)
	}
	defer sim.Fini()
	sim.SetSize(130, 24)
	s := newView(sim, m, false)
	s.Draw()
	row := func() string {
		t.Helper()
		lines := text(sim)
		i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "192.168.1.3:80") })
		if i < 0 {
			t.Fatalf("no row of 192.168.1.3:\n%s", strings.Join(lines, "\n"))
		}
		return lines[i]
	}
	// At 130 columns the state column takes the room left: wider than
	// maxState, every column kept, the cut marked.
	r := row()
	state, _, cut := strings.Cut(r[strings.Index(r, "held out: "):], "…")
	if !cut || !strings.HasPrefix(longReason, strings.TrimPrefix(state, "held out: ")) || len(state)+1 <= maxState || !strings.Contains(text(sim)[2], "FWD") {
		t.Errorf("130 columns:\n%s", strings.Join(text(sim), "\n"))
	}
	// Wide enough, the reason shows whole on its row.
	sim.SetSize(220, 24)
	s.Draw()
	if r := row(); !strings.Contains(r, "held out: "+longReason+" ") || strings.Contains(r, "…") {
		t.Errorf("220 columns: %q", r)
	}
	// i on the row shows it whole, wrapped at 60 columns; any key returns.
	sim.SetSize(60, 24)
	for range 3 {
		special(s, tcell.KeyDown)
	}
	key(s, 'i')
	lines := text(sim)
	unspaced := func(s string) string { return strings.Join(strings.Fields(s), "") }
	if !strings.Contains(lines[1], "-t 10.0.0.1:80 -r 192.168.1.3:80") || !strings.HasPrefix(lines[2], "state: held out by check (Get ") ||
		!strings.Contains(unspaced(strings.Join(lines[2:], "")), unspaced("state: held out by check ("+longReason+")")) {
		t.Errorf("i:\n%s", strings.Join(lines, "\n"))
	}
	for i, l := range lines {
		if n := utf8.RuneCountInString(l); n > 60 {
			t.Errorf("i: line %d is %d wide: %q", i, n, l)
		}
	}
	// A refresh keeps it, with the line's figures of the refresh.
	m.Update(in)
	s.Draw()
	if !strings.Contains(strings.Join(text(sim), "\n"), "state: held out") {
		t.Errorf("i after a refresh:\n%s", strings.Join(text(sim), "\n"))
	}
	key(s, 'x')
	if got := text(sim); !strings.HasPrefix(got[2], "SERVICE") || s.Quit() {
		t.Errorf("after a key:\n%s", strings.Join(got, "\n"))
	}
	key(s, '?')
	if !strings.Contains(strings.Join(text(sim), "\n"), "i          the selected line whole") {
		t.Errorf("help lacks i:\n%s", strings.Join(text(sim), "\n"))
	}
}

// The first line says how many prefixes lvsctl run announces and why each
// other one is not, on the screen, in text frames and in JSON frames;
// nothing when the file announces nothing, and none announced once the
// run stopped (its device died with it).
func TestAnnounced(t *testing.T) {
	in := fixture(t0)
	in.Announce = []Announcement{
		{Prefix: netip.MustParsePrefix("10.0.0.1/32"), Announced: true, Services: []string{"-t 10.0.0.1:80"}},
		{Prefix: netip.MustParsePrefix("10.0.0.2/32"), Why: "withdrawn by lvsctl withdraw", Services: []string{"-t 10.0.0.2:443"}},
	}
	m := NewModel(time.Second)
	m.Update(in)
	const want = "lvsctl top - 10:00:00  3 services, 7 real servers  announced 1/2 (10.0.0.2/32 withdrawn by lvsctl withdraw)  every 1s"
	if h := m.Header(); h != want {
		t.Errorf("header %q", h)
	}
	var b bytes.Buffer
	if err := m.WriteText(&b); err != nil || !strings.HasPrefix(b.String(), want+"\n") {
		t.Errorf("text frame (%v):\n%s", err, b.String())
	}
	b.Reset()
	if err := m.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var f struct {
		Announce []Announcement `json:"announce"`
	}
	if err := json.Unmarshal(b.Bytes(), &f); err != nil || !slices.EqualFunc(f.Announce, in.Announce, func(a, b Announcement) bool {
		return a.Prefix == b.Prefix && a.Announced == b.Announced && a.Why == b.Why && slices.Equal(a.Services, b.Services)
	}) {
		t.Errorf("JSON frame (%v): %s", err, b.String())
	}

	sim := tcell.NewSimulationScreen("UTF-8")
	if err := sim.Init(); err != nil {
		t.Fatal(err)
	}
	defer sim.Fini()
	sim.SetSize(130, 24)
	newView(sim, m, false).Draw()
	if l := text(sim)[0]; l != want {
		t.Errorf("screen's first line %q", l)
	}

	in.RunActive = false
	m.Update(in)
	if h := m.Header(); !strings.Contains(h, "  announced 0/2 (10.0.0.1/32 lvsctl run not running; 10.0.0.2/32 lvsctl run not running)  ") {
		t.Errorf("header without a live run %q", h)
	}
	if a := m.Frame().Announce; len(a) != 2 || a[0].Announced || !in.Announce[0].Announced {
		t.Errorf("frame without a live run: %+v (input %+v)", a, in.Announce)
	}

	in = fixture(t0)
	m.Update(in)
	b.Reset()
	if err := m.WriteJSON(&b); err != nil || strings.Contains(m.Header(), "announced") || strings.Contains(b.String(), `"announce"`) {
		t.Errorf("without announcements: %q %s", m.Header(), b.String())
	}
}
