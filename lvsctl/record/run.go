package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/internal/jsonstr"
	"github.com/lvskit/lvskit/internal/netnsid"
	"github.com/lvskit/lvskit/rules"
)

// RunName is lvsctl run's record in the journal directory: who runs,
// on which file, each checked real server's health and whether it is in
// service, and the probe services' marks. A restarted run starts from it;
// plan, apply and status read it.
const RunName = "health.json"

// runVersion is the record's format version.
const runVersion = 1

// Run is lvsctl run's record.
type Run struct {
	Version int       `json:"version"`
	PID     int       `json:"pid"`
	File    string    `json:"file"`
	Checks  string    `json:"checks,omitempty"`
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
	// Marks are the probe services' marks, by real server as ipvsadm
	// names it ("-t 10.0.0.1:80 -r 192.168.1.2:80").
	Marks map[string]uint32 `json:"marks,omitempty"`
	// Servers are the checked real servers, in the file's order. A
	// record being written may hand them out one at a time by Each
	// instead.
	Servers []Server                       `json:"servers"`
	Each    func(yield func(*Server) bool) `json:"-"`
	// AllDown are the services whose real servers all failed.
	AllDown  []string        `json:"all_down,omitempty"`
	Lateness health.Lateness `json:"lateness"`
	// Late is set while probes fall behind their schedule by more than
	// a tenth of the shortest interval.
	Late bool `json:"late,omitempty"`
	// Refused is why the last reload was refused (the running file
	// stayed), and RefusedAt when; empty once a reload took effect.
	Refused   string    `json:"reload_refused,omitempty"`
	RefusedAt time.Time `json:"reload_refused_at,omitzero"`
	// Announce is each prefix the file announces and whether run
	// announces it now (none when the file announces nothing).
	Announce []Announcement `json:"announce,omitempty"`
	// Where it belongs: a record of another boot or namespace is stale.
	netnsid.Identity
}

// Server is one checked real server as the record keeps it.
type Server struct {
	Service     string `json:"service"`
	Destination string `json:"destination"`
	InService   bool   `json:"in_service"`
	// Weight is the file's weight for the server, which it has when in
	// service (lvsctl top shows it beside the kernel's).
	Weight uint32 `json:"weight,omitempty"`
	// Check is the check's type (tcp, http, …) and Health its state. Of a
	// server with several checks, they are those of the check that
	// decides its state (see SetChecks), and Checks has them all.
	Check  string             `json:"check,omitempty"`
	Health health.TargetState `json:"health"`
	// Checks are the server's checks in the file's order when it has
	// more than one (a record written before them has one, in Check and
	// Health).
	Checks []ServerCheck `json:"checks,omitempty"`
}

// ServerCheck is one check of a real server as the record keeps it.
type ServerCheck struct {
	Check  string             `json:"check"`
	Health health.TargetState `json:"health"`
}

// SetChecks sets s's checks, in the file's order: Check and Health are
// those of the check that decides the server's state, the first down,
// else the first not up, else the first whose weight counts (a dynamic
// exec check's), else the first; Checks holds them all when there are
// several. s keeps checks, which the caller may reuse once s is written.
func (s *Server) SetChecks(checks []ServerCheck) {
	s.Checks = nil
	if len(checks) == 0 {
		return
	}
	if len(checks) > 1 {
		s.Checks = checks
	}
	d := 0
	for _, pick := range []func(c *ServerCheck) bool{
		func(c *ServerCheck) bool { return c.Health.State == health.Down },
		func(c *ServerCheck) bool { return c.Health.State != health.Up },
		func(c *ServerCheck) bool { return c.Health.Weight != nil },
	} {
		if i := slices.IndexFunc(checks, func(c ServerCheck) bool { return pick(&c) }); i >= 0 {
			d = i
			break
		}
	}
	s.Check, s.Health = checks[d].Check, checks[d].Health
}

// Result is the last result of the check that decides s's state; of a
// server with several checks, it names that check ("http: status 503").
func (s *Server) Result() string {
	if len(s.Checks) > 1 && s.Health.Result != "" {
		return s.Check + ": " + s.Health.Result
	}
	return s.Health.Result
}

// AllChecks are s's checks in the file's order: Checks, or for a server
// with one check (and a record written before Checks) that one.
func (s *Server) AllChecks() []ServerCheck {
	if len(s.Checks) > 0 {
		return s.Checks
	}
	return []ServerCheck{{Check: s.CheckType(), Health: s.Health}}
}

// LoadRun reads the record of this boot and namespace; nil when there is
// none.
func (j *Journal) LoadRun() (*Run, error) {
	var st Run
	if ok, err := j.readFile(RunName, &st); !ok || err != nil {
		return nil, err
	}
	if st.Version != runVersion {
		return nil, fmt.Errorf("%s: version %d, this lvsctl knows %d", filepath.Join(j.dir, RunName), st.Version, runVersion)
	}
	if !j.id.Same(st.Identity) {
		return nil, nil
	}
	return &st, nil
}

// writeJSON writes st as json.Encoder would, its servers one at a time:
// marshalled at once, a large table's servers leave a buffer of their
// size in the encoder's pool (figures: decision 0014).
func (st *Run) writeJSON(w io.Writer) error {
	head := *st
	head.Servers = nil
	b, err := json.Marshal(&head)
	if err != nil {
		return err
	}
	// A key's quotes are the only unescaped ones: this is the servers key.
	const servers = `"servers":null`
	i := bytes.Index(b, []byte(servers))
	if i < 0 {
		return errors.New("record: no servers key")
	}
	if _, err := io.WriteString(w, string(b[:i])+`"servers":[`); err != nil {
		return err
	}
	var buf []byte
	each := st.Each
	if each == nil {
		each = func(yield func(*Server) bool) {
			for k := range st.Servers {
				if !yield(&st.Servers[k]) {
					return
				}
			}
		}
	}
	first := true
	var spec specJSON
	each(func(s *Server) bool {
		if !first {
			_, err = io.WriteString(w, ",")
		}
		first = false
		if err == nil {
			buf = append(s.appendJSON(buf[:0], &spec), '\n')
			_, err = w.Write(buf)
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, "]"+string(b[i+len(servers):])+"\n")
	return err
}

// appendJSON appends s as json.Marshal writes it, without reflection,
// which is a large part of run's CPU on a large table (figures: decision
// 0014). A record whose servers keep their whole target (never written
// now) goes through Marshal.
//
// The servers of a service share their spec, whose JSON (escaped quotes
// and all) is much of the cost: c keeps the last one written.
func (s *Server) appendJSON(b []byte, c *specJSON) []byte {
	h := &s.Health
	if !h.Target.IsZero() || slices.ContainsFunc(s.Checks, func(c ServerCheck) bool { return !c.Health.Target.IsZero() }) {
		m, _ := json.Marshal(s)
		return append(b, m...)
	}
	b = append(b, `{"service":`...)
	b = jsonstr.Append(b, s.Service)
	b = append(b, `,"destination":`...)
	b = jsonstr.Append(b, s.Destination)
	b = append(b, `,"in_service":`...)
	b = strconv.AppendBool(b, s.InService)
	b = appendInt(b, `,"weight":`, int64(s.Weight))
	if s.Check != "" {
		b = append(b, `,"check":`...)
		b = jsonstr.Append(b, s.Check)
	}
	b = append(b, `,"health":`...)
	b = appendHealth(b, h, c)
	if len(s.Checks) > 0 {
		b = append(b, `,"checks":[`...)
		for i := range s.Checks {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"check":`...)
			b = jsonstr.Append(b, s.Checks[i].Check)
			b = append(b, `,"health":`...)
			b = appendHealth(b, &s.Checks[i].Health, c)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendHealth appends h as json.Marshal writes it, with its target left
// out (zero).
func appendHealth(b []byte, h *health.TargetState, c *specJSON) []byte {
	b = append(b, `{"key":{"addr":`...)
	if h.Key.Addr.IsValid() {
		b = append(b, '"')
		b = h.Key.Addr.AppendTo(b)
		b = append(b, '"')
	} else {
		b = append(b, `""`...)
	}
	b = appendInt(b, `,"mark":`, int64(h.Key.Mark))
	b = append(b, `,"spec":`...)
	if c.quoted == nil || h.Key.Spec != c.spec {
		c.spec, c.quoted = h.Key.Spec, jsonstr.Append(c.quoted[:0], h.Key.Spec)
	}
	b = append(b, c.quoted...)
	if h.Key.Env != "" {
		b = append(b, `,"env":`...)
		b = jsonstr.Append(b, h.Key.Env)
	}
	b = append(b, `},"state":`...)
	b = jsonstr.Append(b, h.State.String()) // MarshalText's, for the checker's states
	b = appendInt(b, `,"passes":`, int64(h.Passes))
	b = appendInt(b, `,"fails":`, int64(h.Fails))
	if h.Result != "" {
		b = append(b, `,"result":`...)
		b = jsonstr.Append(b, h.Result)
	}
	b = appendTime(b, `,"last_probe":`, h.LastProbe)
	b = appendInt(b, `,"last_duration":`, int64(h.LastDuration))
	b = appendInt(b, `,"last_late":`, int64(h.LastLate))
	b = appendTime(b, `,"last_change":`, h.LastChange)
	if h.Weight != nil {
		b = strconv.AppendUint(append(b, `,"weight":`...), uint64(*h.Weight), 10)
	}
	return append(b, '}')
}

// specJSON is the last spec appendJSON wrote, quoted.
type specJSON struct {
	spec   string
	quoted []byte
}

// appendInt appends key and v as Marshal writes an omitempty integer.
func appendInt(b []byte, key string, v int64) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(append(b, key...), v, 10)
}

// appendTime appends key and t as Marshal writes an omitzero time.
func appendTime(b []byte, key string, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	b = append(b, key...)
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// SaveRun replaces the record.
func (j *Journal) SaveRun(st *Run) error {
	st.Version, st.Identity = runVersion, j.id
	return j.writeFile(RunName, st)
}

// CheckType is the type of s's check; a record written before Check
// existed has it in the health state's target.
func (s *Server) CheckType() string {
	if s.Check != "" {
		return s.Check
	}
	return s.Health.Target.Spec.Type
}

// TableWeight is the weight run gives s in the kernel's table: 0 while
// held out, else the weight its dynamic exec check passed with (dynamic
// is then set), else the file's. Only an up check's weight counts: one
// kept in service after its service's checks all failed has the file's.
func (s *Server) TableWeight() (w uint32, dynamic bool) {
	if !s.InService {
		return 0, false
	}
	// Each dynamic check that is up moves the file's weight by its
	// difference to it, as run adds them (as keepalived adds its
	// MISC_CHECKs').
	sum := int64(s.Weight)
	for _, c := range s.AllChecks() {
		if h := &c.Health; h.State == health.Up && h.Weight != nil {
			sum += int64(*h.Weight) - int64(s.Weight)
			dynamic = true
		}
	}
	if !dynamic {
		return s.Weight, false
	}
	return uint32(min(max(sum, 0), math.MaxInt32)), true
}

// held lists the real servers a run keeps out of service, by their names
// as ipvsadm writes them ("-t 10.0.0.1:80 -r 192.168.1.2:80").
func (st *Run) held() map[string]Server {
	out := map[string]Server{}
	if st == nil {
		return out
	}
	for _, s := range st.Servers {
		if !s.InService {
			out[s.Service+" -r "+s.Destination] = s
		}
	}
	return out
}

// Alive reports whether the run that wrote the record still runs.
func (st *Run) Alive() bool {
	return st != nil && st.PID > 0 && unix.Kill(st.PID, 0) == nil
}

// HoldOut puts the real servers a live run keeps out of service at weight
// 0 in want, so that plan and apply never bring one back, and returns them.
func (st *Run) HoldOut(want *rules.Set) []Server {
	if !st.Alive() {
		return nil
	}
	held := st.held()
	var out []Server
	for i := range want.Services {
		s := &want.Services[i]
		name := rules.KeyOf(&s.Service).String() + " -r "
		for j := range s.Dests {
			d := &s.Dests[j].Destination
			if h, ok := held[name+rules.DestKeyOf(d).String()]; ok {
				d.Weight = 0
				out = append(out, h)
			}
		}
	}
	return out
}

// StatRun reads the record's inode, size and times without following a
// link: a reader that keeps the record reads it again only when they
// change.
func (j *Journal) StatRun(st *unix.Stat_t) error {
	return unix.Fstatat(j.fd, RunName, st, unix.AT_SYMLINK_NOFOLLOW)
}

// Abs is a file's name as the record and the journal keep it: absolute,
// with "" and "-" (stdin) as they are.
func Abs(p string) string {
	if p == "" || p == "-" {
		return p
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
