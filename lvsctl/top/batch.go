package top

import (
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/lvskit/lvskit/rules/desired"
)

// numeric columns are right-aligned.
func numeric(c Column) bool { return c >= colCPS && c <= colWeight }

// WriteText writes one plain-text frame: the header line, then the table
// of every line under the filter and folds, every column, exact numbers,
// and a blank line. No escape codes.
func (m *Model) WriteText(w io.Writer) error {
	lines := m.Lines(0, m.Len(), false)
	var width [numColumns]int
	for c := range numColumns {
		width[c] = len(columnNames[c])
		for i := range lines {
			width[c] = max(width[c], len(lines[i].Cells[c]))
		}
	}
	var b strings.Builder
	b.WriteString(m.Header())
	b.WriteByte('\n')
	var head [numColumns]string
	copy(head[:], columnNames[:])
	writeRow(&b, &head, &width)
	for i := range lines {
		writeRow(&b, &lines[i].Cells, &width)
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

func writeRow(b *strings.Builder, cells *[numColumns]string, width *[numColumns]int) {
	var line strings.Builder
	for c := range numColumns {
		if c > 0 {
			line.WriteByte(' ')
		}
		pad := strings.Repeat(" ", width[c]-len(cells[c]))
		if numeric(c) {
			line.WriteString(pad + cells[c])
		} else {
			line.WriteString(cells[c] + pad)
		}
	}
	b.WriteString(strings.TrimRight(line.String(), " "))
	b.WriteByte('\n')
}

// jsonFrame is one frame of lvsctl top --json: the fields of lvsctl list
// --json --rate, with each real server's state.
type jsonFrame struct {
	Version int       `json:"version"`
	Time    time.Time `json:"time"`
	// PeriodSeconds is the refresh period.
	PeriodSeconds float64 `json:"period_seconds"`
	// RatesChanged is when the kernel's rate estimates last changed
	// between two reads (absent before a change was seen).
	RatesChanged *time.Time `json:"rates_changed,omitempty"`
	// AllDown are the services whose real servers all failed their
	// checks, by lvsctl run's record (as lvsctl status --json has them),
	// filtered or not; absent when none did or no run runs.
	AllDown []string `json:"all_down,omitempty"`
	// Announce is each prefix lvsctl run's file announces (as lvsctl
	// status --json has them, none announced once the run stopped);
	// absent when it announces nothing.
	Announce    []Announcement `json:"announce,omitempty"`
	Services    []jsonService  `json:"services"`
	RealServers int            `json:"real_servers"`
}

// jsonService is a service of list --json --rate with its real servers'
// states; AllDown marks one whose real servers all failed their checks.
type jsonService struct {
	desired.JSONService
	State        string     `json:"state"`
	AllDown      bool       `json:"all_down,omitempty"`
	Destinations []jsonDest `json:"destinations"`
}

// jsonDest is a real server of list --json --rate with its state, and
// while lvsctl run is active, its configured weight.
type jsonDest struct {
	desired.JSONDestination
	State            string `json:"state"`
	ConfiguredWeight *int64 `json:"configured_weight,omitempty"`
}

// Frame is the JSON frame of the last refresh, under the filter (folds do
// not apply: every matching real server is in it).
func (m *Model) Frame() jsonFrame {
	f := jsonFrame{Version: desired.SchemaVersion, Time: m.now.UTC(), PeriodSeconds: m.Period.Seconds(), AllDown: m.AllDown(),
		Announce: m.Announce(), Services: []jsonService{}}
	if !m.ratesChanged.IsZero() {
		t := m.ratesChanged.UTC()
		f.RatesChanged = &t
	}
	if m.in.Set == nil {
		return f
	}
	doc := desired.ToDocument(m.in.Set, desired.Counters{Conns: true, Stats: true, Rate: true})
	for i := range m.groups {
		g := &m.groups[i]
		ok, keep := m.matches(g)
		if !ok {
			continue
		}
		m.fill(g)
		js := jsonService{JSONService: doc.Services[i], State: stateText(&g.svc, false), AllDown: g.svc.allDown, Destinations: []jsonDest{}}
		for j := range g.dests {
			r := &g.dests[j]
			if !keep(r) {
				continue
			}
			jd := jsonDest{JSONDestination: doc.Services[i].Destinations[j], State: stateText(r, false)}
			if m.runActive && r.conf >= 0 {
				c := r.conf
				jd.ConfiguredWeight = &c
			}
			js.Destinations = append(js.Destinations, jd)
			f.RealServers++
		}
		js.JSONService.Destinations = nil
		f.Services = append(f.Services, js)
	}
	return f
}

// WriteJSON writes the frame as one JSON document on one line.
func (m *Model) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(m.Frame())
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
