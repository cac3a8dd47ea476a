package lvsprep

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lvskit/lvskit/netfilter"
)

// errNotRoot is returned before any change when lvsprep lacks privileges.
var errNotRoot = errors.New("must run as root: lvsprep changes sysctls, addresses, routes, iptables rules and modules " +
	"(--dry-run shows the commands, check shows what is missing)")

// runner carries out one command against a host, writing its log to out.
type runner struct {
	h   *Host
	dir string
	out io.Writer
}

func (r *runner) logf(format string, args ...any) { fmt.Fprintf(r.out, format, args...) }

// preflight finds the errors that must stop lvsprep before it changes
// anything: unknown interfaces, a source address that is not the host's, an
// address that clashes with one already configured.
func (r *runner) preflight(p Profile) error {
	for _, d := range p.Devs {
		if _, err := r.h.Links.IsUp(d); errors.Is(err, netfilter.ErrNoLink) {
			return fmt.Errorf("no network interface %q on this host (ip link lists them)", d)
		} else if err != nil {
			return err
		}
	}
	if p.SNAT.IsValid() {
		local, err := r.isLocal(p.SNAT)
		if err != nil {
			return err
		}
		if !local {
			return fmt.Errorf("--snat %s is not an address of this host: real servers' replies to it would not come back", p.SNAT)
		}
	}
	for _, s := range p.Steps {
		if s.Kind != kindAddr {
			continue
		}
		if st := r.h.check(s); st.Conflict != "" {
			return errors.New(st.Conflict)
		}
	}
	return nil
}

func (r *runner) isLocal(a netip.Addr) (bool, error) {
	names, err := r.h.Links.Names()
	if err != nil {
		return false, err
	}
	for _, n := range names {
		addrs, err := r.h.Links.Addrs(n)
		if err != nil {
			return false, err
		}
		for _, p := range addrs {
			if p.Addr() == a {
				return true, nil
			}
		}
	}
	return false, nil
}

func findRecord(recs []Record, key string) int {
	return slices.IndexFunc(recs, func(r Record) bool { return r.Key() == key })
}

// apply brings the host to the profile, step by step, recording each
// change in the state file before moving on. If a step fails, the changes of
// this run are reverted in reverse order and the state is put back as it
// was.
func (r *runner) apply(p Profile) error {
	if !r.h.IsRoot() {
		return errNotRoot
	}
	if err := r.preflight(p); err != nil {
		return err
	}
	st, err := loadState(r.dir, p.Key)
	if err != nil {
		return err
	}
	if st != nil && !slices.Equal(st.Args, p.Args) {
		return fmt.Errorf("%s is already applied with other settings (%s); undo it first: %s",
			p.Name, strings.Join(st.Args, " "), p.undoCommand())
	}
	fresh := st == nil
	if fresh {
		st = &State{Profile: p.Name, Args: p.Args, Applied: r.h.Now().UTC()}
	}
	original := slices.Clone(st.Records)

	var changed []Record // this run's changes, for rollback
	changes, inPlace := 0, 0
	fail := func(s Step, err error) error {
		r.logf("failed    %s\n", strings.Join(applyCommands(s, nil), "; "))
		var rollbackErrs []error
		var kept []Record
		for i := len(changed) - 1; i >= 0; i-- {
			note, rerr := r.h.revert(changed[i])
			if rerr != nil {
				rollbackErrs = append(rollbackErrs, rerr)
				kept = append(kept, changed[i])
				r.logf("NOT reverted %s: %v\n", strings.Join(revertCommands(changed[i]), "; "), rerr)
				continue
			}
			r.logf("reverted  %s\n", strings.Join(revertCommands(changed[i]), "; "))
			if note != "" {
				r.logf("note: %s\n", note)
			}
		}
		st.Records = original
		for _, k := range kept {
			if findRecord(st.Records, k.Key()) < 0 {
				st.Records = append(st.Records, k)
			}
		}
		var serr error
		if fresh && len(st.Records) == 0 {
			serr = removeState(r.dir, p.Key)
		} else {
			serr = saveState(r.dir, p.Key, st)
		}
		if len(rollbackErrs) > 0 {
			return errors.Join(err, fmt.Errorf("rolling back: %w (the rest is recorded for %s)",
				errors.Join(rollbackErrs...), p.undoCommand()), serr)
		}
		if serr != nil {
			return errors.Join(err, serr)
		}
		return fmt.Errorf("%w (rolled back: nothing changed)", err)
	}

	for _, s := range p.Steps {
		idx := findRecord(st.Records, s.Key())
		cur := r.h.check(s)
		if cur.Err != nil {
			return fail(s, cur.Err)
		}
		if cur.Conflict != "" {
			return fail(s, errors.New(cur.Conflict))
		}
		if cur.OK {
			if idx < 0 {
				st.Records = append(st.Records, Record{Step: s})
				if err := saveState(r.dir, p.Key, st); err != nil {
					return fail(s, err)
				}
			}
			inPlace++
			r.logf("in place  %s\n", strings.Join(applyCommands(s, nil), "; "))
			continue
		}
		priorRoutes := []netfilter.Route(nil)
		if s.Kind == kindRoute {
			priorRoutes, _ = r.h.Links.DefaultRoutes(s.Route.Family())
		}
		rec, err := r.h.apply(s)
		if err != nil {
			return fail(s, err)
		}
		changed = append(changed, rec)
		// A setting that drifted since an earlier run keeps its original
		// record: that one knows what was there before lvsprep.
		if idx < 0 {
			st.Records = append(st.Records, rec)
		}
		if err := saveState(r.dir, p.Key, st); err != nil {
			return fail(s, err)
		}
		changes++
		r.logf("changed   %s\n", strings.Join(applyCommands(s, priorRoutes), "; "))
	}
	r.logf("%s: %d changed, %d already in place. State: %s\nUndo with: %s\n",
		p.Name, changes, inPlace, statePath(r.dir, p.Key), p.undoCommand())
	return nil
}

// undo reverts what the profile's state file records, newest change first.
// A setting that another applied profile also relies on is left in place;
// if that profile found it already set, it inherits this record, so its own
// undo later restores the value from before either of them.
func (r *runner) undo(p Profile) error {
	if !r.h.IsRoot() {
		return errNotRoot
	}
	st, err := loadState(r.dir, p.Key)
	if err != nil {
		return err
	}
	if st == nil {
		r.logf("%s: nothing to undo (no state file %s)\n", p.Name, statePath(r.dir, p.Key))
		return nil
	}
	others, err := r.otherStates(p.Key)
	if err != nil {
		return err
	}
	dirty := map[*otherState]bool{}
	var kept []Record
	var errs []error
	reverted := 0
	for i := len(st.Records) - 1; i >= 0; i-- {
		rec := st.Records[i]
		if !rec.Changed {
			continue
		}
		if owner := handOver(others, rec); owner != nil {
			dirty[owner] = true
			r.logf("kept      %s: %s still needs it\n", rec.Setting(), owner)
			continue
		}
		note, err := r.h.revert(rec)
		if err != nil {
			errs = append(errs, err)
			kept = append([]Record{rec}, kept...)
			r.logf("failed    %s: %v\n", strings.Join(revertCommands(rec), "; "), err)
			continue
		}
		reverted++
		r.logf("reverted  %s\n", strings.Join(revertCommands(rec), "; "))
		if note != "" {
			r.logf("note: %s\n", note)
		}
	}
	for o := range dirty {
		if err := saveState(o.dir, o.key, o.st); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		st.Records = kept
		if err := saveState(r.dir, p.Key, st); err != nil {
			errs = append(errs, err)
		}
		return fmt.Errorf("undo incomplete, the rest stays recorded in %s: %w", statePath(r.dir, p.Key), errors.Join(errs...))
	}
	if err := removeState(r.dir, p.Key); err != nil {
		return err
	}
	r.logf("%s: %d reverted; state removed.\n", p.Name, reverted)
	return nil
}

// otherState is an applied profile other than the one being undone.
type otherState struct {
	dir, key string
	st       *State
	// local is true in the same network namespace. Only there do profiles
	// share sysctls, addresses and rules; kernel modules are shared by all
	// namespaces of the machine.
	local bool
}

func (o *otherState) String() string {
	s := o.st.Profile + " " + strings.Join(o.st.Args, " ")
	if !o.local {
		s += " (in " + o.dir + ")"
	}
	return s
}

// otherStates loads the other state files: those of this namespace first,
// then those of the machine's other namespaces (the directories beside it,
// see namespaceStateDir).
func (r *runner) otherStates(self string) ([]*otherState, error) {
	dirs := []string{r.dir}
	root := r.dir
	if strings.HasPrefix(filepath.Base(r.dir), "netns-") {
		root = filepath.Dir(r.dir)
		dirs = append(dirs, root)
	}
	siblings, _ := filepath.Glob(filepath.Join(root, "netns-*"))
	for _, d := range siblings {
		if d != r.dir {
			dirs = append(dirs, d)
		}
	}
	var out []*otherState
	for _, d := range dirs {
		keys, err := stateKeys(d)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if d == r.dir && k == self {
				continue
			}
			st, err := loadState(d, k)
			if err != nil {
				return nil, err
			}
			if st != nil {
				out = append(out, &otherState{dir: d, key: k, st: st, local: d == r.dir})
			}
		}
	}
	return out, nil
}

// handOver looks for another applied profile that relies on the record's
// setting. If there is one, the record's memory of the prior value moves to
// it (when it found the setting already in place) and it is returned.
func handOver(others []*otherState, rec Record) *otherState {
	for _, o := range others {
		if !o.local && rec.Kind != kindModule {
			continue
		}
		j := findRecord(o.st.Records, rec.Key())
		if j < 0 {
			continue
		}
		if !o.st.Records[j].Changed {
			o.st.Records[j].Changed = true
			o.st.Records[j].Prior = rec.Prior
			o.st.Records[j].PriorRoutes = rec.PriorRoutes
		}
		return o
	}
	return nil
}

// plan prints the commands equivalent to applying (or undoing) the profile
// on this host, without changing anything. Settings already in place are
// shown as comments; where the state cannot be read (iptables needs root)
// the command is shown.
func (r *runner) plan(p Profile, undo bool) error {
	if undo {
		st, err := loadState(r.dir, p.Key)
		if err != nil {
			return err
		}
		if st == nil {
			r.logf("# %s: nothing to undo (no state file %s)\n", p.Name, statePath(r.dir, p.Key))
			return nil
		}
		r.logf("# undo %s %s (dry run: nothing is changed)\n", st.Profile, strings.Join(st.Args, " "))
		for i := len(st.Records) - 1; i >= 0; i-- {
			for _, c := range revertCommands(st.Records[i]) {
				r.logf("%s\n", c)
			}
		}
		return nil
	}
	if err := r.preflight(p); err != nil {
		return err
	}
	r.logf("# %s (dry run: nothing is changed)\n", p.describe())
	for _, s := range p.Steps {
		cur := r.h.check(s)
		var prior []netfilter.Route
		if s.Kind == kindRoute {
			prior, _ = r.h.Links.DefaultRoutes(s.Route.Family())
		}
		for _, c := range applyCommands(s, prior) {
			if cur.OK {
				r.logf("# in place: %s\n", c)
			} else {
				r.logf("%s\n", c)
			}
		}
	}
	return nil
}

// check prints what the profile needs and what the host has, and how to
// fix what is missing. It reports whether everything is in place.
func (r *runner) check(p Profile) (bool, error) {
	var rows [][]string
	var fixes []string
	ok := true
	for _, d := range p.Devs {
		if _, err := r.h.Links.IsUp(d); errors.Is(err, netfilter.ErrNoLink) {
			ok = false
			rows = append(rows, []string{"missing", "interface " + d, "exists", "absent"})
			fixes = append(fixes, fmt.Sprintf("# interface %s does not exist: name the right one with --dev (ip link lists them)", d))
		}
	}
	for _, s := range p.Steps {
		cur := r.h.check(s)
		have := cur.Have
		if cur.Err != nil {
			have = "cannot read: " + cur.Err.Error()
		}
		rows = append(rows, []string{cur.word(), s.Setting(), s.Want(), have})
		if cur.OK {
			continue
		}
		ok = false
		fixes = append(fixes, "# "+s.Why)
		if cur.Conflict != "" {
			fixes = append(fixes, "# "+cur.Conflict)
		}
		var prior []netfilter.Route
		if s.Kind == kindRoute {
			prior, _ = r.h.Links.DefaultRoutes(s.Route.Family())
		}
		fixes = append(fixes, applyCommands(s, prior)...)
	}
	r.logf("%s\n", p.describe())
	if err := writeTable(r.out, []string{"STATUS", "SETTING", "WANT", "HAVE"}, rows); err != nil {
		return false, err
	}
	st, err := loadState(r.dir, p.Key)
	if err != nil {
		return false, err
	}
	if st != nil {
		r.logf("Applied by lvsprep at %s (state %s).\n", st.Applied.Format("2006-01-02 15:04:05 MST"), statePath(r.dir, p.Key))
	}
	if ok {
		r.logf("Everything is in place.\n")
		return true, nil
	}
	r.logf("\nTo fix, run: lvsprep %s\nor these commands:\n", p.describe())
	for _, f := range fixes {
		r.logf("  %s\n", f)
	}
	return false, nil
}

// status lists the applied profiles.
func (r *runner) status() error {
	keys, err := stateKeys(r.dir)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		r.logf("No profile applied (no state files in %s).\n", r.dir)
		return nil
	}
	var rows [][]string
	var undos []string
	for _, k := range keys {
		st, err := loadState(r.dir, k)
		if err != nil {
			return err
		}
		if st == nil {
			continue
		}
		n := 0
		for _, rec := range st.Records {
			if rec.Changed {
				n++
			}
		}
		rows = append(rows, []string{st.Profile, strings.Join(st.Args, " "),
			fmt.Sprintf("%d of %d", n, len(st.Records)), st.Applied.Format("2006-01-02 15:04:05 MST")})
		undos = append(undos, Profile{Name: st.Profile, Args: st.Args}.undoCommand())
	}
	if err := writeTable(r.out, []string{"PROFILE", "SETTINGS", "CHANGED", "APPLIED"}, rows); err != nil {
		return err
	}
	r.logf("Undo with:\n")
	for _, u := range undos {
		r.logf("  %s\n", u)
	}
	return nil
}
