package top

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gdamore/tcell/v2"

	"github.com/lvskit/lvskit/rules"
)

// Want is what a refresh must read afresh: the whole table (Full), or
// the services with the real servers of those named in Services; the
// others' real servers may be those of an earlier read.
type Want struct {
	Full     bool
	Services map[rules.ServiceKey]bool
	// Only: the services not named may keep their figures too (the
	// order of the services on screen does not hang on them).
	Only bool
}

// Source reads one refresh: the table as want asks, the journal and the
// run's record.
type Source func(want Want) (Input, error)

// want is what the screen's next refresh needs: the real servers of the
// services on screen, or the whole table while the filter, the sort or the
// folds look at every real server.
func (s *view) want() Want {
	switch {
	case s.m.read == 0, s.m.Filter != "", s.m.Sort == colState, s.m.Sort == colActive, s.m.Sort == colInactive, s.m.Sort == colWeight:
		return Want{Full: true}
	}
	// Sorted by key or scheduler, the services on screen stay those
	// whatever the others' figures.
	w := Want{Services: map[rules.ServiceKey]bool{}, Only: s.m.Sort == colService || s.m.Sort == colServer || s.m.Sort == colMethod}
	for _, l := range s.m.Lines(s.offset, s.rows(), true) {
		w.Services[l.Key] = true
	}
	return w
}

// ColorWanted says whether the screen may use colour: not with NO_COLOR
// set (no-color.org), nor on TERM=dumb or no TERM.
func ColorWanted(getenv func(string) string) bool {
	if getenv("NO_COLOR") != "" {
		return false
	}
	t := getenv("TERM")
	return t != "" && t != "dumb"
}

// Screen modes.
const (
	modeTable = iota
	modeFilter
	modeDelay
	modeHelp
	modeDetail
)

// Fixed widths of the screen's columns (the addresses and state are
// measured on the rows shown).
var screenWidth = [numColumns]int{colWeight: 6, colActive: 6, colInactive: 6, colCPS: 6, colInPPS: 6, colOutPPS: 6,
	colInBPS: 6, colOutBPS: 6, colMethod: 6}

// minState is the narrowest state column kept; maxState the widest the
// state column takes before the columns right of it, which it may widen
// into the room they leave. A state cut to fit ends in cutMark; i shows
// the selected line whole.
const minState, maxState = 10, 24

// cutMark ends a cell cut to fit its column.
const cutMark = '…'

// headerLines are the lines above the rows: header, status, column names.
const headerLines = 3

// view is lvsctl top's full screen: the model drawn on a tcell screen and
// driven by keys.
type view struct {
	m      *Model
	scr    tcell.Screen
	color  bool
	cursor int // the selected line
	offset int // the first line shown
	paused bool
	mode   int
	input  string
	msg    string // an error or a note, on the status line
	quit   bool
	// periodChanged is set when d changed the period.
	periodChanged bool
	// detail is the line i shows whole: the selected line as the last
	// frame that had it under the selection.
	detail line
}

// newView returns the view of m on scr (initialised by the caller).
func newView(scr tcell.Screen, m *Model, color bool) *view {
	scr.RegisterRuneFallback(cutMark, "~")
	return &view{m: m, scr: scr, color: color}
}

// Quit reports whether q was pressed.
func (s *view) Quit() bool { return s.quit }

// Paused reports whether p paused the refresh.
func (s *view) Paused() bool { return s.paused }

// SetError shows a failed refresh on the status line ("" clears it).
func (s *view) SetError(err error) {
	s.msg = ""
	if err != nil {
		s.msg = "read failed: " + err.Error()
	}
}

const help = `lvsctl top: keys
  < >        move the sort column left / right
  r          reverse the sort order
  /          filter by a part of a service or real server address (Enter applies, Esc clears)
  Enter, space  fold or unfold the selected service's real servers
  + -        unfold / fold every service
  Up Down PgUp PgDn Home End  move the selection
  p          pause / resume the refresh
  d          change the refresh period (seconds)
  i          the selected line whole: its state (a check's error) in full
  ?          this help (any key returns)
  q          quit
States: in service; draining (connections left, seconds to the deadline);
held out by check (last error), by lvsctl run; kept, all failed (every
check of the service failed and when_all_down keep left it in; its last
error); sorry server (when_all_down sorry); unknown (weight 0 for no
reason lvsctl knows, or a check not answered yet). ALL DOWN: every check
of the service failed; the first line counts such services. A state cut
to fit ends in …; i shows it whole.
WEIGHT is current/configured while lvsctl run runs. Rates are the kernel's
estimates (updated every 2 s), K = 1000.`

// Key handles one key.
func (s *view) Key(ev *tcell.EventKey) {
	switch s.mode {
	case modeHelp, modeDetail:
		s.mode = modeTable
		return
	case modeFilter, modeDelay:
		s.editKey(ev)
		return
	}
	rows := s.rows()
	switch ev.Key() {
	case tcell.KeyCtrlC:
		s.quit = true
	case tcell.KeyUp:
		s.cursor--
	case tcell.KeyDown:
		s.cursor++
	case tcell.KeyPgUp:
		s.cursor -= rows
	case tcell.KeyPgDn:
		s.cursor += rows
	case tcell.KeyHome:
		s.cursor = 0
	case tcell.KeyEnd:
		s.cursor = s.m.Len() - 1
	case tcell.KeyEnter:
		s.toggle()
	case tcell.KeyRune:
		switch ev.Rune() {
		case 'q':
			s.quit = true
		case '<':
			s.m.Sort = (s.m.Sort + numColumns - 1) % numColumns
		case '>':
			s.m.Sort = (s.m.Sort + 1) % numColumns
		case 'r':
			s.m.Reverse = !s.m.Reverse
		case '/':
			s.mode, s.input = modeFilter, s.m.Filter
		case 'd':
			s.mode, s.input = modeDelay, ""
		case 'p':
			s.paused = !s.paused
		case '?', 'h':
			s.mode = modeHelp
		case 'i':
			if ls := s.m.Lines(s.cursor, 1, false); len(ls) == 1 {
				s.mode, s.detail = modeDetail, ls[0]
			}
		case ' ':
			s.toggle()
		case '+':
			s.m.SetAllCollapsed(false)
		case '-':
			s.m.SetAllCollapsed(true)
		case 'k':
			s.cursor--
		case 'j':
			s.cursor++
		}
	}
	s.clamp()
}

// editKey edits the filter or the period.
func (s *view) editKey(ev *tcell.EventKey) {
	switch ev.Key() {
	case tcell.KeyEscape:
		if s.mode == modeFilter {
			s.m.Filter = ""
		}
		s.mode = modeTable
	case tcell.KeyEnter:
		if s.mode == modeFilter {
			s.m.Filter = s.input
			s.cursor, s.offset = 0, 0
		} else if v, err := strconv.ParseFloat(s.input, 64); err == nil && v >= 0.1 && v <= 3600 {
			s.m.Period = time.Duration(v * float64(time.Second)).Round(time.Millisecond)
			s.periodChanged = true
			s.msg = ""
		} else {
			s.msg = fmt.Sprintf("period %q: give seconds from 0.1 to 3600", s.input)
		}
		s.mode = modeTable
	case tcell.KeyBackspace, tcell.KeyBackspace2:
		if s.input != "" {
			s.input = s.input[:len(s.input)-1]
		}
	case tcell.KeyRune:
		s.input += string(ev.Rune())
	}
	if s.mode == modeFilter {
		s.m.Filter = s.input
	}
	s.clamp()
}

// toggle folds or unfolds the selected line's service.
func (s *view) toggle() {
	ls := s.m.Lines(s.cursor, 1, true)
	if len(ls) == 0 {
		return
	}
	s.m.Toggle(ls[0].Service)
	if !ls[0].IsService() {
		// The selection was inside the folded service: move it to the
		// service's line.
		for s.cursor > 0 {
			s.cursor--
			if l := s.m.Lines(s.cursor, 1, true); len(l) == 1 && l[0].IsService() && l[0].Service == ls[0].Service {
				break
			}
		}
	}
}

// rows is the number of table lines the screen has room for.
func (s *view) rows() int {
	_, h := s.scr.Size()
	return max(0, h-headerLines)
}

func (s *view) clamp() {
	n := s.m.Len()
	s.cursor = max(0, min(s.cursor, n-1))
	rows := s.rows()
	if s.cursor < s.offset {
		s.offset = s.cursor
	}
	if rows > 0 && s.cursor >= s.offset+rows {
		s.offset = s.cursor - rows + 1
	}
	s.offset = max(0, min(s.offset, n-rows))
}

// layout picks the columns that fit width w and their widths: the two
// address columns always, then the others from the left while they fit.
func layout(lines []line, w int) ([]Column, []int) {
	var cols []Column
	var widths []int
	used, stateNeed := 0, 0
	for c := range numColumns {
		cw := screenWidth[c]
		switch c {
		case colService, colServer, colState:
			cw = len(columnNames[c])
			for i := range lines {
				n := utf8.RuneCountInString(lines[i].Cells[c])
				if c == colServer && !lines[i].IsService() {
					n++ // indented under its service
				}
				cw = max(cw, n)
			}
			if c == colState {
				stateNeed, cw = cw, min(cw, maxState)
			}
		}
		gap := 0
		if len(cols) > 0 {
			gap = 1
		}
		if c > colServer && used+gap+cw > w {
			if c != colState || w-used-gap < minState {
				break
			}
			cw = w - used - gap
		}
		cols = append(cols, c)
		widths = append(widths, cw)
		used += gap + cw
	}
	// The room the columns leave goes to the state, up to its longest:
	// a check's error shows whole where the screen is wide enough.
	if len(cols) > 2 && cols[2] == colState && used < w {
		widths[2] += min(stateNeed-widths[2], w-used)
	}
	return cols, widths
}

// Draw draws the whole screen: only the lines it shows are sorted into
// place and written.
func (s *view) Draw() {
	s.clamp()
	s.scr.Clear()
	w, h := s.scr.Size()
	plain := tcell.StyleDefault
	inverse := plain.Reverse(true)
	s.put(0, 0, w, s.m.Header(), plain.Bold(true))
	if s.mode == modeDetail {
		for i, l := range s.detailLines(w) {
			if 1+i < h {
				s.put(0, 1+i, w, l, plain)
			}
		}
		s.scr.Show()
		return
	}
	if s.mode == modeHelp {
		for i, l := range strings.Split(help, "\n") {
			if 1+i < h {
				s.put(0, 1+i, w, l, plain)
			}
		}
		s.scr.Show()
		return
	}
	status := fmt.Sprintf("sort %s", strings.ToLower(columnNames[s.m.Sort]))
	if s.m.Reverse {
		status += " reversed"
	}
	if s.m.Filter != "" {
		status += "  filter " + strconv.Quote(s.m.Filter)
	}
	status += "  i whole line  ? help  q quit"
	if s.paused {
		status = "PAUSED (p resumes)  " + status
	}
	switch {
	case s.mode == modeFilter:
		status = "filter: " + s.input + "_"
	case s.mode == modeDelay:
		status = "refresh every (seconds): " + s.input + "_"
	case s.msg != "":
		status = s.msg
	}
	s.put(0, 1, w, status, plain)
	lines := s.m.Lines(s.offset, s.rows(), true)
	cols, widths := layout(lines, w)
	x := 0
	for i, c := range cols {
		name := columnNames[c]
		st := inverse
		if c == s.m.Sort {
			st = st.Bold(true).Underline(true)
		}
		s.put(x, 2, widths[i], pad(name, widths[i], numeric(c)), st)
		if i+1 < len(cols) {
			s.put(x+widths[i], 2, 1, " ", inverse)
		}
		x += widths[i] + 1
	}
	for x -= 1; x < w; x++ {
		s.scr.SetContent(x, 2, ' ', nil, inverse)
	}
	for li := range lines {
		y := headerLines + li
		l := &lines[li]
		st := plain
		if l.IsService() {
			st = st.Bold(true)
		}
		if s.offset+li == s.cursor {
			st = st.Reverse(true)
		}
		x := 0
		for i, c := range cols {
			text := l.Cells[c]
			if c == colServer && !l.IsService() {
				text = " " + text
			}
			cs := st
			if s.color && c == colState {
				switch {
				case strings.HasPrefix(text, "held out"), strings.HasPrefix(text, "kept"),
					strings.HasPrefix(text, allDownMark), text == labelSorry:
					cs = cs.Foreground(tcell.ColorRed)
				case strings.HasPrefix(text, "draining"):
					cs = cs.Foreground(tcell.ColorYellow)
				}
			}
			s.put(x, y, widths[i], pad(text, widths[i], numeric(c)), cs)
			x += widths[i] + 1
		}
	}
	s.scr.Show()
}

// pad fits text into n cells, right-aligned for numbers; text cut to
// fit ends in cutMark.
func pad(text string, n int, right bool) string {
	l := utf8.RuneCountInString(text)
	if l > n {
		if n < 2 {
			return string([]rune(text)[:n])
		}
		return string([]rune(text)[:n-1]) + string(cutMark)
	}
	if right {
		return strings.Repeat(" ", n-l) + text
	}
	return text + strings.Repeat(" ", n-l)
}

// put writes text from x on line y, at most n cells (a rune a cell).
func (s *view) put(x, y, n int, text string, st tcell.Style) {
	i := 0
	for _, r := range text {
		if i >= n {
			break
		}
		s.scr.SetContent(x+i, y, r, nil, st)
		i++
	}
}

// detailLines is the view of i: the selected line whole, its state in
// full (the long form batch frames write), wrapped to width w. It follows
// the line's figures while the line stays selected, and keeps the last
// it had when a refresh moves another line under the selection.
func (s *view) detailLines(w int) []string {
	if ls := s.m.Lines(s.cursor, 1, false); len(ls) == 1 && ls[0].Service == s.detail.Service && ls[0].Server == s.detail.Server {
		s.detail = ls[0]
	}
	l := &s.detail
	c := &l.Cells
	var out []string
	if l.IsService() {
		_, servers, _ := strings.Cut(c[colServer], " ") // after the fold mark
		out = append(out, l.Service+"  "+servers+", scheduler "+c[colMethod])
	} else {
		out = append(out, l.Service+" -r "+l.Server+"  "+c[colMethod])
	}
	out = append(out, "state: "+c[colState])
	if strings.HasPrefix(c[colState], allDownMark) {
		out = append(out, "every real server of the service failed its check; lvsctl run's when_all_down chose which stay in service")
	}
	weight := "weight " + c[colWeight]
	if l.DynamicWeight {
		weight += " (set by its dynamic check)"
	}
	out = append(out, weight+"  active "+c[colActive]+"  inactive "+c[colInactive],
		"per second: conns "+c[colCPS]+"  packets in "+c[colInPPS]+" out "+c[colOutPPS]+"  bytes in "+c[colInBPS]+" out "+c[colOutBPS],
		"", "any key returns")
	var wrapped []string
	for _, t := range out {
		wrapped = append(wrapped, wrap(t, w)...)
	}
	return wrapped
}

// wrap breaks text into lines of at most w runes, at spaces where it can;
// the lines after the first are indented by two.
func wrap(text string, w int) []string {
	if w < 8 {
		return []string{text}
	}
	var out []string
	r := []rune(text)
	for len(r) > w {
		cut := w
		for i := w; i > w/2; i-- {
			if r[i] == ' ' {
				cut = i
				break
			}
		}
		out = append(out, string(r[:cut]))
		r = append([]rune("  "), []rune(strings.TrimLeft(string(r[cut:]), " "))...)
	}
	return append(out, string(r))
}

// Run shows the view on scr until q, Ctrl-C or ctx's end: it reads src at
// once and then every m.Period (unless paused), and redraws on each read,
// key and resize. scr must be initialised; Run does not finalise it.
func Run(ctx context.Context, scr tcell.Screen, m *Model, src Source, color bool) error {
	s := newView(scr, m, color)
	events := make(chan tcell.Event, 16)
	stop := make(chan struct{})
	defer close(stop)
	go scr.ChannelEvents(events, stop)
	refresh := func() {
		in, err := src(s.want())
		s.SetError(err)
		if err == nil {
			m.Update(in)
		}
	}
	refresh()
	s.Draw()
	timer := time.NewTimer(m.Period)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
			if !s.paused {
				refresh()
				s.Draw()
			}
			timer.Reset(m.Period)
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			switch ev := ev.(type) {
			case *tcell.EventResize:
				scr.Sync()
				s.Draw()
			case *tcell.EventKey:
				s.Key(ev)
				if s.quit {
					return nil
				}
				if s.periodChanged {
					s.periodChanged = false
					timer.Reset(m.Period)
				}
				s.Draw()
			}
		}
	}
}
