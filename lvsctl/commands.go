package lvsctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lvskit/lvskit/health"
	"github.com/lvskit/lvskit/internal/clitable"
	"github.com/lvskit/lvskit/ipvs"
	"github.com/lvskit/lvskit/lvsctl/internal/cliutil"
	"github.com/lvskit/lvskit/lvsctl/record"
	"github.com/lvskit/lvskit/lvsctl/top"
	"github.com/lvskit/lvskit/rules"
	"github.com/lvskit/lvskit/rules/desired"
)

// list prints the kernel's table.
func (r *runner) list(c *listCmd) (int, error) {
	client, err := r.open()
	if err != nil {
		return exitFailed, err
	}
	defer client.Close()
	set, err := rules.Read(client)
	if err != nil {
		return exitFailed, cliutil.ReadError(err)
	}
	set.Sort()
	if c.JSON {
		return exitOK, desired.WriteJSON(r.out, set, desired.Counters{Conns: true, Stats: c.Stats, Rate: c.Rate})
	}
	header := []string{"SERVICE", "SCHEDULER", "FLAGS", "PERSISTENCE", "REAL SERVER", "METHOD", "WEIGHT", "ACTIVE", "INACTIVE"}
	if c.Stats {
		header = append(header, "CONNS", "INPKTS", "OUTPKTS", "INBYTES", "OUTBYTES")
	}
	if c.Rate {
		header = append(header, "CPS", "INPPS", "OUTPPS", "INBPS", "OUTBPS")
	}
	var rows [][]string
	for i := range set.Services {
		s := &set.Services[i]
		persist := "-"
		if s.Flags&ipvs.FlagPersistent != 0 {
			persist = strconv.FormatUint(uint64(s.Timeout), 10) + "s"
		}
		svcCols := []string{rules.KeyOf(&s.Service).String(), s.Scheduler, rules.FlagsText(&s.Service), persist}
		counters := func(st *ipvs.Stats) []string {
			var out []string
			u := func(v uint64) string { return strconv.FormatUint(v, 10) }
			if c.Stats {
				out = append(out, u(st.Conns), u(st.InPkts), u(st.OutPkts), u(st.InBytes), u(st.OutBytes))
			}
			if c.Rate {
				// The kernel's estimates as they are, written as lvsctl top
				// writes them in batch mode.
				for _, v := range top.Rates(st) {
					out = append(out, top.FormatRate(v, false))
				}
			}
			return out
		}
		st := s.KernelStats()
		row := append(append(svcCols, "", "", "", "", ""), counters(&st)...)
		rows = append(rows, row)
		for j := range s.Dests {
			d := &s.Dests[j].Destination
			n := s.Dests[j].KernelCounters()
			u := func(v uint32) string { return strconv.FormatUint(uint64(v), 10) }
			row := []string{"", "", "", "", rules.DestKeyOf(d).String(), rules.MethodName(d.FwdMethod),
				strconv.Itoa(int(int32(d.Weight))), u(n.ActiveConns), u(n.InactConns)}
			rows = append(rows, append(row, counters(&n.Stats)...))
		}
	}
	return exitOK, clitable.Write(r.out, header, rows)
}

// readDesired reads and checks FILE completely: it must parse, hold at
// least one service (unless --allow-empty), and name nothing the kernel
// refuses whatever its table (see rules.Validate).
func (r *runner) readDesired(f *planFlags) (*rules.Set, error) {
	set, _, err := r.readDesiredHealth(f)
	return set, err
}

// readDesiredHealth is readDesired with the file's health checks, if any.
func (r *runner) readDesiredHealth(f *planFlags) (*rules.Set, *desired.Health, error) {
	name := f.File
	var in io.Reader
	if f.File == "-" {
		name = "<stdin>"
		if in = r.in; in == nil {
			in = strings.NewReader("")
		}
	} else {
		file, err := os.Open(f.File)
		if err != nil {
			return nil, nil, cliutil.UsageError{Err: fmt.Errorf("reading %s: %w", name, err)}
		}
		defer file.Close()
		in = file
	}
	// Read a line at a time: the file is never held whole.
	set, h, err := desired.ReadCached(name, in, r.env.Resolver, r.yamlCache)
	if err != nil {
		return nil, nil, cliutil.UsageError{Err: err}
	}
	if len(set.Services) == 0 && !f.AllowEmpty {
		return nil, nil, cliutil.UsageError{Err: fmt.Errorf("%s holds no service: applied, it would delete every service of the table. "+
			"An empty file is what a failed write leaves; --allow-empty accepts it", name)}
	}
	if err := rules.Validate(set, r.env.Modules); err != nil {
		return nil, nil, cliutil.UsageError{Err: fmt.Errorf("the kernel would refuse these rules of %s; nothing was changed:\n%w", name, err)}
	}
	return set, h, nil
}

// diffOptions are the plan's settings from the flags and the host.
func (r *runner) diffOptions(f *planFlags) rules.DiffOptions {
	o := rules.DiffOptions{KeepMHOrder: f.KeepMHOrder, Draining: f.DrainTimeout > 0}
	if v, err := r.sysctl("expire_quiescent_template"); err == nil {
		on := v != "0"
		o.ExpireQuiescentTemplate = &on
	}
	return o
}

// desiredAndKernel reads FILE (all of it, checked) and then connects to the
// kernel; on failure it returns the exit status.
func (r *runner) desiredAndKernel(f *planFlags) (*rules.Set, ipvs.Client, int, error) {
	want, err := r.readDesired(f)
	if err != nil {
		return nil, nil, exitUsage, err
	}
	client, err := r.open()
	if err != nil {
		return nil, nil, exitFailed, err
	}
	return want, client, exitOK, nil
}

// plan prints the plan; the status says whether the kernel is in sync. A
// plan apply would refuse (--max-delete) is printed, then refused.
func (r *runner) plan(f *planFlags) (int, error) {
	want, client, status, err := r.desiredAndKernel(f)
	if err != nil {
		return status, err
	}
	defer client.Close()
	held := r.runState().HoldOut(want)
	p, err := rules.DiffKernel(client, want, r.diffOptions(f))
	if err != nil {
		return exitFailed, cliutil.ReadError(err)
	}
	pending := r.pendingDrains()
	if f.JSON {
		err = writePlanJSON(r.out, p, pending, held)
	} else {
		err = r.writePlan(p, pending, held)
	}
	if err != nil {
		return exitFailed, err
	}
	if err := f.RemovalGuard(p); err != nil {
		return exitUsage, err
	}
	if p.InSync() {
		return exitOK, nil
	}
	return exitChanges, nil
}

// pendingDrains reads the journal without locking it, for display; a
// journal that cannot be read is reported, not fatal.
func (r *runner) pendingDrains() []rules.DrainEntry {
	j, err := r.journal(false)
	if err != nil {
		if !errors.Is(err, record.ErrNoJournal) {
			fmt.Fprintf(r.errOut, "lvsctl: warning: %v\n", err)
		}
		return nil
	}
	defer j.Close()
	jr, err := j.Load()
	if err != nil || jr == nil {
		if err != nil {
			fmt.Fprintf(r.errOut, "lvsctl: warning: %v\n", err)
		}
		return nil
	}
	return jr.Drains
}

// planRows are the plan as table rows: one per field changed.
func planRows(p *rules.Plan) [][]string {
	var rows [][]string
	for i := range p.Changes {
		c := &p.Changes[i]
		dest := ""
		if c.Dest != nil {
			dest = rules.DestKeyOf(c.Dest).String()
		}
		svc := rules.KeyOf(&c.Service).String()
		switch c.Action {
		case rules.EditService, rules.EditDest, rules.ReAddDest:
			for _, fl := range c.Fields {
				rows = append(rows, []string{string(c.Action), svc, dest, fl.Name, fl.Old + " -> " + fl.New})
			}
		case rules.DeleteDest:
			rows = append(rows, []string{string(c.Action), svc, dest, "connections",
				fmt.Sprintf("active %d, inactive %d", c.Active, c.Inactive)})
		case rules.DeleteService:
			rows = append(rows, []string{string(c.Action), svc, "(" + cliutil.Plural(len(c.Dests), "real server", "real servers") + ")", "connections",
				fmt.Sprintf("active %d, inactive %d", c.Active, c.Inactive)})
		case rules.AddService:
			rows = append(rows, []string{string(c.Action), svc, "", "scheduler", c.Service.Scheduler})
		case rules.AddDest:
			rows = append(rows, []string{string(c.Action), svc, dest, "weight", strconv.Itoa(int(int32(c.Dest.Weight)))})
		}
	}
	return rows
}

func (r *runner) writePlan(p *rules.Plan, pending []rules.DrainEntry, held []record.Server) error {
	for _, h := range held {
		fmt.Fprintf(r.out, "held: %s -r %s is out of service by lvsctl run's check (%s, %s), not drift\n",
			h.Service, h.Destination, h.Health.State, h.Result())
	}
	for _, e := range pending {
		fmt.Fprintf(r.out, "journal: %s -r %s was draining (weight %d before, deadline %s): apply finishes it, or cancels it if FILE keeps the server\n",
			e.Service, e.Dest, e.Weight, e.Deadline.UTC().Format(time.RFC3339))
	}
	if p.InSync() {
		_, err := fmt.Fprintln(r.out, "in sync: no changes")
		return err
	}
	if err := clitable.Write(r.out, []string{"ACTION", "SERVICE", "REAL SERVER", "FIELD", "CHANGE"}, planRows(p)); err != nil {
		return err
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(r.out, "warning: %s\n", w)
	}
	_, err := fmt.Fprintf(r.out, "%s\n", cliutil.Summary(p))
	return err
}

// jsonPlan is the plan's JSON document.
type jsonPlan struct {
	InSync        bool         `json:"in_sync"`
	Changes       []jsonChange `json:"changes"`
	Warnings      []string     `json:"warnings"`
	PendingDrains []jsonDrain  `json:"pending_drains"`
	// Held are the real servers lvsctl run keeps out by their checks.
	Held []jsonHeld `json:"held,omitempty"`
}

// jsonHeld is a real server lvsctl run keeps out of service.
type jsonHeld struct {
	Service     string `json:"service"`
	Destination string `json:"destination"`
	State       string `json:"state"`
	Result      string `json:"result,omitempty"`
}

// jsonChange is one change, in the words of the plan's table: the
// service and real server as ipvsadm writes them.
type jsonChange struct {
	Action          string      `json:"action"`
	Service         string      `json:"service"`
	Destination     string      `json:"destination,omitempty"`
	Fields          []jsonField `json:"fields,omitempty"`
	ActiveConns     *uint32     `json:"active_conns,omitempty"`
	InactiveConns   *uint32     `json:"inactive_conns,omitempty"`
	RealServerCount *int        `json:"real_servers,omitempty"`
	Error           string      `json:"error,omitempty"`
}

type jsonField struct {
	Field string `json:"field"`
	Old   string `json:"old"`
	New   string `json:"new"`
}

// jsonDrain is a drain in progress, as plan, apply and status write it.
type jsonDrain struct {
	Service       string    `json:"service"`
	Destination   string    `json:"destination"`
	WeightBefore  uint32    `json:"weight_before"`
	Started       time.Time `json:"started"`
	Deadline      time.Time `json:"deadline"`
	DeleteService bool      `json:"delete_service"`
}

func toJSONChange(c *rules.Change) jsonChange {
	jc := jsonChange{Action: string(c.Action), Service: rules.KeyOf(&c.Service).String()}
	if c.Dest != nil {
		jc.Destination = rules.DestKeyOf(c.Dest).String()
	}
	for _, f := range c.Fields {
		jc.Fields = append(jc.Fields, jsonField{f.Name, f.Old, f.New})
	}
	if c.Action == rules.DeleteDest || c.Action == rules.DeleteService || c.Action == rules.ReAddDest {
		a, in := c.Active, c.Inactive
		jc.ActiveConns, jc.InactiveConns = &a, &in
	}
	if c.Action == rules.DeleteService {
		n := len(c.Dests)
		jc.RealServerCount = &n
	}
	return jc
}

func toJSONChanges(cs []rules.Change) []jsonChange {
	out := make([]jsonChange, 0, len(cs))
	for i := range cs {
		out = append(out, toJSONChange(&cs[i]))
	}
	return out
}

func toJSONDrains(es []rules.DrainEntry) []jsonDrain {
	out := make([]jsonDrain, 0, len(es))
	for _, e := range es {
		out = append(out, jsonDrain{Service: e.Service.String(), Destination: e.Dest.String(), WeightBefore: e.Weight,
			Started: e.Started.UTC(), Deadline: e.Deadline.UTC(), DeleteService: e.DeleteService})
	}
	return out
}

func toJSONPlan(p *rules.Plan, pending []rules.DrainEntry) jsonPlan {
	doc := jsonPlan{InSync: p.InSync(), Changes: toJSONChanges(p.Changes), Warnings: p.Warnings, PendingDrains: toJSONDrains(pending)}
	if doc.Warnings == nil {
		doc.Warnings = []string{}
	}
	return doc
}

func writePlanJSON(w io.Writer, p *rules.Plan, pending []rules.DrainEntry, held []record.Server) error {
	doc := toJSONPlan(p, pending)
	for _, h := range held {
		doc.Held = append(doc.Held, jsonHeld{h.Service, h.Destination, h.Health.State.String(), h.Result()})
	}
	return writeJSON(w, doc)
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// jsonApply is what apply --json reports: the plan, then what was done.
type jsonApply struct {
	// Result is converged, stopped (the kernel refused a change: nothing
	// was drained or deleted), interrupted (drains left in the journal)
	// or not_converged.
	Result    string       `json:"result"`
	Plan      jsonPlan     `json:"plan"`
	Applied   []jsonChange `json:"applied"`
	Refused   []jsonChange `json:"refused"`
	Held      []jsonChange `json:"held"`
	Drains    jsonDrains   `json:"drains"`
	Remaining []jsonChange `json:"remaining"`
}

type jsonDrains struct {
	Empty    int         `json:"ended_without_connections"`
	Deadline int         `json:"ended_at_deadline"`
	Gone     int         `json:"deleted_by_others"`
	Pending  []jsonDrain `json:"pending"`
}

// reportJSON writes apply's JSON document and returns its status.
func (r *runner) reportJSON(res *rules.ConvergeResult, applied []rules.Change) (int, error) {
	doc := jsonApply{Plan: toJSONPlan(res.Plan, nil), Applied: toJSONChanges(applied), Refused: []jsonChange{},
		Held: toJSONChanges(res.Held), Drains: jsonDrains{Pending: []jsonDrain{}}, Remaining: []jsonChange{}}
	failed := res.Failed
	if d := res.Drain; d != nil {
		doc.Drains = jsonDrains{Empty: d.Done, Deadline: d.TimedOut, Gone: d.Gone, Pending: toJSONDrains(d.Pending)}
		failed = append(failed, d.Failed...)
	}
	for _, f := range failed {
		jc := toJSONChange(&f.Change)
		jc.Error = f.Err.Error()
		doc.Refused = append(doc.Refused, jc)
	}
	if res.Remaining != nil {
		doc.Remaining = toJSONChanges(res.Remaining.Changes)
	}
	status := exitOK
	switch {
	case res.Stopped:
		doc.Result, status = "stopped", exitFailed
	case res.Drain != nil && len(res.Drain.Pending) > 0:
		doc.Result, status = "interrupted", exitInterrupted
	case !res.Converged():
		doc.Result, status = "not_converged", exitFailed
	default:
		doc.Result = "converged"
	}
	return status, writeJSON(r.out, doc)
}

// status prints lvsctl run's record and the journal of interrupted
// drains, and says by its status how the director is (see statusOK).
func (r *runner) status(c *statusCmd) (int, error) {
	var jr *rules.Journal
	dir := r.journalPath()
	j, err := r.journal(false)
	switch {
	case errors.Is(err, record.ErrNoJournal):
	case err != nil:
		return statusUnknown, err
	default:
		defer j.Close()
		if jr, err = j.Load(); err != nil {
			return statusUnknown, err
		}
	}
	var drains []rules.DrainEntry
	if jr != nil {
		drains = jr.Drains
	}
	var st *record.Run
	if j != nil {
		if st, err = j.LoadRun(); err != nil {
			return statusUnknown, err
		}
	}
	code, verdict := statusVerdict(st, len(drains))
	if c.JSON {
		doc := jsonStatus{Status: verdict, Journal: dir, PendingDrains: toJSONDrains(drains), Run: toJSONRun(st)}
		if err := writeJSON(r.out, doc); err != nil {
			return statusUnknown, err
		}
	} else if err := r.writeRunStatus(st); err != nil {
		return statusUnknown, err
	} else if len(drains) == 0 {
		fmt.Fprintf(r.out, "no drain pending (journal %s)\n", dir)
	} else {
		fmt.Fprintf(r.out, "%s pending (journal %s, source %s, updated %s); 'lvsctl apply FILE' finishes or cancels them\n",
			cliutil.Plural(len(drains), "drain", "drains"), dir, jr.Source, jr.Updated.UTC().Format(time.RFC3339))
		var rows [][]string
		for _, e := range drains {
			then := "drain, keep service"
			if e.DeleteService {
				then = "drain, delete service"
			}
			rows = append(rows, []string{e.Service.String(), e.Dest.String(), strconv.FormatUint(uint64(e.Weight), 10),
				e.Started.UTC().Format(time.RFC3339), e.Deadline.UTC().Format(time.RFC3339), then})
		}
		if err := clitable.Write(r.out, []string{"SERVICE", "REAL SERVER", "WEIGHT BEFORE", "STARTED", "DEADLINE", "THEN"}, rows); err != nil {
			return statusUnknown, err
		}
	}
	return code, nil
}

// statusVerdict is status's exit status and its word for it: critical
// when a service's real servers all failed their checks; warning when a
// real server is held out by its check or draining, a drain is pending,
// the last reload was refused, probes fall behind, the run that wrote
// the record has stopped, or a prefix the file announces is not announced;
// ok otherwise.
func statusVerdict(st *record.Run, drains int) (int, string) {
	if st != nil && len(st.AllDown) > 0 {
		return statusCritical, "critical"
	}
	warn := drains > 0
	if st != nil {
		warn = warn || st.Refused != "" || st.Late || !st.Alive()
		for i := range st.Servers {
			warn = warn || !st.Servers[i].InService
		}
		for i := range st.Announce {
			warn = warn || !st.Announce[i].Announced
		}
	}
	if warn {
		return statusWarning, "warning"
	}
	return statusOK, "ok"
}

// jsonStatus is status --json's document.
type jsonStatus struct {
	// Status is ok, warning or critical, as the exit status says.
	Status        string      `json:"status"`
	Journal       string      `json:"journal"`
	PendingDrains []jsonDrain `json:"pending_drains"`
	// Run is lvsctl run's record, when a run left one.
	Run *jsonRun `json:"run,omitempty"`
}

// jsonRun is what status says of lvsctl run.
type jsonRun struct {
	PID      int             `json:"pid"`
	Running  bool            `json:"running"`
	File     string          `json:"file"`
	Checks   string          `json:"checks,omitempty"`
	Started  time.Time       `json:"started"`
	Updated  time.Time       `json:"updated"`
	AllDown  []string        `json:"all_down"`
	Lateness health.Lateness `json:"lateness"`
	// Late is set while probes fall behind their schedule.
	Late bool `json:"late"`
	// ReloadRefused is why the last reload was refused, and when.
	ReloadRefused   string       `json:"reload_refused,omitempty"`
	ReloadRefusedAt time.Time    `json:"reload_refused_at,omitzero"`
	Servers         []jsonServer `json:"servers"`
	// Announce is each prefix the file announces, as the record has it;
	// absent when the file announces nothing.
	Announce []record.Announcement `json:"announce,omitempty"`
}

// jsonServer is one checked real server's health.
type jsonServer struct {
	Service      string        `json:"service"`
	Destination  string        `json:"destination"`
	InService    bool          `json:"in_service"`
	State        string        `json:"state"`
	Result       string        `json:"result,omitempty"`
	Passes       int           `json:"consecutive_passes"`
	Fails        int           `json:"consecutive_failures"`
	LastChange   time.Time     `json:"last_change,omitzero"`
	LastProbe    time.Time     `json:"last_probe,omitzero"`
	LastDuration time.Duration `json:"last_probe_duration_ns"`
	Check        string        `json:"check"`
	// Weight is the one the real server has in the kernel's table, by the
	// record (record.Server.TableWeight); ConfiguredWeight is the file's.
	Weight           uint32 `json:"weight"`
	ConfiguredWeight uint32 `json:"configured_weight"`
	// Checks are each of the server's checks, in the file's order; State,
	// Result, Check and the rest above are those of the one that decides
	// (the first down, else the first not up).
	Checks []jsonCheck `json:"checks"`
}

// jsonCheck is one check of a real server.
type jsonCheck struct {
	Check        string        `json:"check"`
	State        string        `json:"state"`
	Result       string        `json:"result,omitempty"`
	Passes       int           `json:"consecutive_passes"`
	Fails        int           `json:"consecutive_failures"`
	LastChange   time.Time     `json:"last_change,omitzero"`
	LastProbe    time.Time     `json:"last_probe,omitzero"`
	LastDuration time.Duration `json:"last_probe_duration_ns"`
	// Weight is the weight a dynamic exec check last passed with.
	Weight *uint32 `json:"weight,omitempty"`
}

func toJSONRun(st *record.Run) *jsonRun {
	if st == nil {
		return nil
	}
	out := &jsonRun{PID: st.PID, Running: st.Alive(), File: st.File, Checks: st.Checks, Started: st.Started, Updated: st.Updated,
		AllDown: st.AllDown, Lateness: st.Lateness, Late: st.Late, ReloadRefused: st.Refused, ReloadRefusedAt: st.RefusedAt,
		Servers: []jsonServer{}, Announce: st.Announce}
	if out.AllDown == nil {
		out.AllDown = []string{}
	}
	for _, s := range st.Servers {
		h := s.Health
		w, _ := s.TableWeight()
		js := jsonServer{Service: s.Service, Destination: s.Destination, InService: s.InService,
			Weight: w, ConfiguredWeight: s.Weight, State: h.State.String(), Result: h.Result, Passes: h.Passes,
			Fails: h.Fails, LastChange: h.LastChange, LastProbe: h.LastProbe, LastDuration: h.LastDuration, Check: s.CheckType()}
		for _, c := range s.AllChecks() {
			ch := &c.Health
			js.Checks = append(js.Checks, jsonCheck{Check: c.Check, State: ch.State.String(), Result: ch.Result, Passes: ch.Passes,
				Fails: ch.Fails, LastChange: ch.LastChange, LastProbe: ch.LastProbe, LastDuration: ch.LastDuration, Weight: ch.Weight})
		}
		out.Servers = append(out.Servers, js)
	}
	return out
}

// weightText is s's weight in the table, followed by the file's when that
// differs: "5", "3 (file 5)", "0 (file 5)".
func weightText(s *record.Server) string {
	w, _ := s.TableWeight()
	if w == s.Weight {
		return strconv.FormatUint(uint64(w), 10)
	}
	return fmt.Sprintf("%d (file %d)", w, s.Weight)
}

// writeRunStatus prints lvsctl run's record: who runs, the checker's
// lateness, each prefix the file announces (and why one is not), and each
// checked real server's health.
func (r *runner) writeRunStatus(st *record.Run) error {
	if st == nil {
		return nil
	}
	state := "running"
	if !st.Alive() {
		state = "not running (its last record)"
	}
	timing := "on time"
	if st.Late {
		timing = "LATE: failures are noticed late"
	}
	fmt.Fprintf(r.out, "lvsctl run: pid %d %s, file %s, updated %s\n", st.PID, state, st.File, st.Updated.UTC().Format(time.RFC3339))
	fmt.Fprintf(r.out, "probes %s (recent lateness p99 %s, max %s)\n", timing, st.Lateness.RecentP99.Round(time.Millisecond), st.Lateness.RecentMax.Round(time.Millisecond))
	if st.Refused != "" {
		fmt.Fprintf(r.out, "last reload REFUSED at %s, the running file stays: %s\n", st.RefusedAt.UTC().Format(time.RFC3339), st.Refused)
	}
	for _, s := range st.AllDown {
		fmt.Fprintf(r.out, "ALL REAL SERVERS OF %s FAILED THEIR CHECKS\n", s)
	}
	for _, a := range st.Announce {
		if a.Announced {
			fmt.Fprintf(r.out, "announced %s (%s)\n", a.Prefix, strings.Join(a.Services, ", "))
		} else {
			fmt.Fprintf(r.out, "NOT announced %s: %s\n", a.Prefix, a.Why)
		}
	}
	// One row per check: a real server with several has one for each,
	// its name, serving and weight repeated, so that each row reads alone
	// (and greps) and the check that holds it out has its own.
	var rows [][]string
	for _, s := range st.Servers {
		serving := "in service"
		if !s.InService {
			serving = "held out"
		}
		for _, c := range s.AllChecks() {
			h := &c.Health
			since := "-"
			if !h.LastChange.IsZero() {
				since = h.LastChange.UTC().Format(time.RFC3339)
			}
			rows = append(rows, []string{s.Service, s.Destination, serving, weightText(&s), h.State.String(), c.Check,
				fmt.Sprintf("%d/%d", h.Passes, h.Fails), h.LastDuration.Round(time.Microsecond).String(), since, h.Result})
		}
	}
	return clitable.Write(r.out, []string{"SERVICE", "REAL SERVER", "SERVING", "WEIGHT", "CHECK", "TYPE", "PASS/FAIL", "LATENCY", "SINCE", "LAST RESULT"}, rows)
}
