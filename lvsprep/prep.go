package lvsprep

import (
	"errors"
	"fmt"
	"github.com/lvskit/lvskit/internal/clitable"
	"github.com/lvskit/lvskit/internal/netnsid"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/lvskit/lvskit/netfilter"
)

// rootNeeded is the error of a user other than root where lvsprep needs
// root; it says what for.
type rootNeeded struct{ what string }

func (e rootNeeded) Error() string { return "you must be root to " + e.what }

// errNotRoot is returned before any change when lvsprep lacks privileges.
var errNotRoot = rootNeeded{"change the host: lvsprep changes sysctls, addresses, routes, iptables rules and modules " +
	"(--dry-run shows the commands, check shows what is missing)"}

// runner carries out one command against a host, writing its log to out.
type runner struct {
	h           *Host
	dir         string
	out, errOut io.Writer
}

func (r *runner) logf(format string, args ...any) { fmt.Fprintf(r.out, format, args...) }

// preflight finds the errors that must stop lvsprep before it changes
// anything: unknown interfaces, a source address that is not the host's, an
// address that clashes with one already configured.
func (r *runner) preflight(p profile) error {
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

func findRecord(recs []record, key string) int {
	return slices.IndexFunc(recs, func(r record) bool { return r.Key() == key })
}

// open opens this namespace's state directory. For a change (write), the
// directory is created or tightened and the tree's lock is held until the
// returned function runs: the tree is the directory, or the root above a
// netns-* directory, whose siblings undo also updates. State written by an
// earlier namespace that had this directory's name is set aside first.
func (r *runner) open(write bool) (*store, func(), error) {
	if !write && !r.h.IsRoot() && ownerOnly(r.dir, r.h.UID) {
		return nil, nil, rootNeeded{"read the state in " + r.dir}
	}
	var lockDir *store
	if write {
		root := r.dir
		if strings.HasPrefix(filepath.Base(r.dir), "netns-") {
			root = filepath.Dir(r.dir)
		}
		var err error
		if lockDir, err = openStore(root, r.h.UID, true); err != nil {
			return nil, nil, err
		}
		if err := lockDir.lock(true); err != nil {
			lockDir.close()
			return nil, nil, err
		}
	}
	release := func() { lockDir.close() }
	s, err := openStore(r.dir, r.h.UID, write)
	if err != nil {
		release()
		return nil, nil, err
	}
	stale, err := r.checkIdentity(s, write)
	if err == nil && stale != nil {
		s, err = r.setAside(s, *stale, write)
	}
	if err != nil {
		s.close()
		release()
		return nil, nil, err
	}
	return s, func() { s.close(); release() }, nil
}

// setAside deals with a state directory written by another network
// namespace or before a reboot: its settings are gone with that namespace.
// A netns-* directory is renamed stale-netns-*-COOKIE beside it (the name
// was reused by a new namespace) and a fresh one is opened; any other
// directory is refused, since the user named it.
func (r *runner) setAside(s *store, was netnsid.Identity, write bool) (*store, error) {
	base := filepath.Base(s.path)
	if !strings.HasPrefix(base, "netns-") {
		return s, fmt.Errorf("the state in %s was written in another network namespace or before a reboot (%s): "+
			"the settings it records are gone; move it away to start afresh", s.path, was)
	}
	if !write {
		fmt.Fprintf(r.errOut, "lvsprep: note: %s was written by an earlier network namespace (%s); it is set aside at the next change\n", s.path, was)
		s.close()
		return &store{path: s.path, trust: s.trust}, nil
	}
	aside := filepath.Join(filepath.Dir(s.path), fmt.Sprintf("stale-%s-%d", base, was.Cookie))
	if err := os.Rename(s.path, aside); err != nil {
		return s, fmt.Errorf("setting aside stale state: %w", err)
	}
	s.close()
	r.logf("note: %s was written by an earlier network namespace (%s), whose settings are gone; moved to %s\n", s.path, was, aside)
	ns, err := openStore(r.dir, r.h.UID, true)
	if err != nil {
		return nil, err
	}
	if _, err := r.checkIdentity(ns, true); err != nil {
		ns.close()
		return nil, err
	}
	return ns, nil
}

// apply brings the host to the profile, step by step. Each change is
// journaled in the state file before it is made (a pending record, with
// the value it replaces) and again after, so a kill at any point leaves a
// record for --undo. If a step fails, the changes of this run are reverted
// in reverse order and the state is put back as it was.
func (r *runner) apply(p profile) error {
	if !r.h.IsRoot() {
		return errNotRoot
	}
	if err := r.preflight(p); err != nil {
		return err
	}
	s, done, err := r.open(true)
	if err != nil {
		return err
	}
	defer done()
	st, err := s.load(p.Key)
	if err != nil {
		return err
	}
	if st != nil && !slices.Equal(st.Args, p.Args) {
		return fmt.Errorf("%s is already applied with other settings (%s); undo it first: %s",
			p.Name, strings.Join(st.Args, " "), p.undoCommand())
	}
	fresh := st == nil
	if fresh {
		st = &state{Profile: p.Name, Args: p.Args, Applied: r.h.Now().UTC()}
	}
	original := slices.Clone(st.Records)

	var changed []record // this run's changes, for rollback
	changes, inPlace := 0, 0
	fail := func(s0 step, failed *record, err error) error {
		r.logf("failed    %s\n", strings.Join(applyCommands(s0, nil), "; "))
		if failed != nil {
			// The failed change undid itself; reverting it again is
			// harmless and covers a kernel that half did it.
			_, _ = r.h.revert(*failed)
		}
		var rollbackErrs []error
		var kept []record
		var leftAlone []string
		for i := len(changed) - 1; i >= 0; i-- {
			left, rerr := r.h.revert(changed[i])
			switch {
			case rerr != nil:
				rollbackErrs = append(rollbackErrs, rerr)
				kept = append(kept, changed[i])
				r.logf("NOT reverted %s: %v\n", strings.Join(revertCommands(changed[i]), "; "), rerr)
			case left != "":
				leftAlone = append(leftAlone, left)
				r.logf("left      %s\n", left)
			default:
				r.logf("reverted  %s\n", strings.Join(revertCommands(changed[i]), "; "))
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
			serr = s.remove(p.Key)
		} else {
			serr = s.save(p.Key, st)
		}
		if len(rollbackErrs) > 0 {
			return errors.Join(err, fmt.Errorf("rolling back: %w (the rest is recorded for %s)",
				errors.Join(rollbackErrs...), p.undoCommand()), serr)
		}
		if serr != nil {
			return errors.Join(err, serr)
		}
		if len(leftAlone) > 0 {
			return fmt.Errorf("%w (rolled back, except: %s)", err, strings.Join(leftAlone, "; "))
		}
		return fmt.Errorf("%w (rolled back: nothing changed)", err)
	}

	for _, step := range p.Steps {
		idx := findRecord(st.Records, step.Key())
		cur := r.h.check(step)
		if cur.Err != nil {
			return fail(step, nil, cur.Err)
		}
		if cur.Conflict != "" {
			return fail(step, nil, errors.New(cur.Conflict))
		}
		if cur.OK {
			if idx < 0 {
				st.Records = append(st.Records, record{step: step})
				if err := s.save(p.Key, st); err != nil {
					return fail(step, nil, err)
				}
			}
			inPlace++
			r.logf("in place  %s\n", strings.Join(applyCommands(step, nil), "; "))
			continue
		}
		rec, err := r.h.prepare(step)
		if err != nil {
			return fail(step, nil, err)
		}
		// The intent first. A setting that drifted since an earlier run
		// keeps its original record: that one knows what was there before
		// lvsprep.
		if idx < 0 {
			rec.Pending = true
			st.Records = append(st.Records, rec)
			idx = len(st.Records) - 1
			if err := s.save(p.Key, st); err != nil {
				st.Records = st.Records[:idx]
				return fail(step, nil, err)
			}
		} else if !st.Records[idx].Changed {
			st.Records[idx] = record{step: step} // the original state was the wanted one
		}
		if err := r.h.change(rec); err != nil {
			if st.Records[idx].Pending {
				st.Records = slices.Delete(st.Records, idx, idx+1)
			}
			return fail(step, &rec, err)
		}
		rec.Pending = false
		changed = append(changed, rec)
		if st.Records[idx].Pending {
			st.Records[idx].Pending = false
			if err := s.save(p.Key, st); err != nil {
				return fail(step, nil, err)
			}
		}
		changes++
		r.logf("changed   %s\n", strings.Join(applyCommands(step, rec.PriorRoutes), "; "))
	}
	if p.VRRPVIP.IsValid() {
		r.logf("vrrp      %s\n", p.vrrpNote())
	}
	r.logf("%s: %d changed, %d already in place. State: %s\nUndo with: %s\n",
		p.Name, changes, inPlace, statePath(r.dir, p.Key), p.undoCommand())
	return nil
}

// undo reverts what the profile's state file records, newest change first,
// dropping each record from the file once its setting is back, so a kill
// midway leaves what is still to do. A setting that another applied profile
// also relies on is left in place; if that profile found it already set, it
// inherits this record, so its own undo later restores the value from
// before either of them.
func (r *runner) undo(p profile) error {
	if !r.h.IsRoot() {
		return errNotRoot
	}
	s, done, err := r.open(true)
	if err != nil {
		return err
	}
	defer done()
	st, err := s.load(p.Key)
	if err != nil {
		return fmt.Errorf("%w; nothing was changed. Inspect the file, and remove it to forget that profile", err)
	}
	if st == nil {
		r.logf("%s: nothing to undo (no state file %s)\n", p.Name, statePath(r.dir, p.Key))
		return nil
	}
	others, err := r.otherStates(s, p.Key)
	if err != nil {
		return err
	}
	var errs []error
	reverted, kept, left := 0, 0, 0
	for i := len(st.Records) - 1; i >= 0; i-- {
		rec := st.Records[i]
		if !rec.Changed {
			continue
		}
		if owner := handOver(others, rec); owner != nil {
			if err := owner.s.save(owner.key, owner.st); err != nil {
				errs = append(errs, err)
				continue
			}
			kept++
			r.logf("kept      %s: %s still needs it\n", rec.Setting(), owner)
		} else {
			why, err := r.h.revert(rec)
			switch {
			case err != nil:
				errs = append(errs, err)
				r.logf("failed    %s: %v\n", strings.Join(revertCommands(rec), "; "), err)
				continue
			case why != "":
				left++
				r.logf("left      %s\n", why)
			default:
				reverted++
				r.logf("reverted  %s\n", strings.Join(revertCommands(rec), "; "))
			}
		}
		st.Records = slices.Delete(st.Records, i, i+1)
		if err := s.save(p.Key, st); err != nil {
			return fmt.Errorf("undo incomplete: %w", err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("undo incomplete, the rest stays recorded in %s: %w", statePath(r.dir, p.Key), errors.Join(errs...))
	}
	if err := s.remove(p.Key); err != nil {
		return err
	}
	summary := fmt.Sprintf("%d reverted", reverted)
	if kept > 0 {
		summary += fmt.Sprintf(", %d kept for other profiles", kept)
	}
	if left > 0 {
		summary += fmt.Sprintf(", %d left in place", left)
	}
	r.logf("%s: %s; state removed.\n", p.Name, summary)
	return nil
}

// otherState is an applied profile other than the one being undone.
type otherState struct {
	s   *store
	key string
	st  *state
	// local is true in the same network namespace. Only there do profiles
	// share sysctls, addresses and rules; kernel modules are shared by all
	// namespaces of the machine.
	local bool
}

func (o *otherState) String() string {
	s := o.st.Profile + " " + strings.Join(o.st.Args, " ")
	if !o.local {
		s += " (in " + o.s.path + ")"
	}
	return s
}

// otherStates loads the other state files: those of this namespace first,
// then those of the machine's other namespaces (the directories beside it,
// see netnsid.Dir). A file that cannot be read or trusted is named
// and passed over: it must not block the undo of another profile.
func (r *runner) otherStates(self *store, selfKey string) ([]*otherState, error) {
	stores := []*store{self}
	root := r.dir
	var dirs []string
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
	for _, d := range dirs {
		s, err := openStore(d, r.h.UID, false)
		if err != nil {
			r.logf("warning: passing over %s: %v\n", d, err)
			continue
		}
		stores = append(stores, s)
	}
	var out []*otherState
	for _, s := range stores {
		keys, err := s.keys()
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if s == self && k == selfKey {
				continue
			}
			st, err := s.load(k)
			if err != nil {
				r.logf("warning: passing over a state file that cannot be used (settings it shares are reverted anyway): %v\n", err)
				continue
			}
			if st != nil {
				out = append(out, &otherState{s: s, key: k, st: st, local: s == self})
			}
		}
	}
	return out, nil
}

// handOver looks for another applied profile that relies on the record's
// setting. If there is one, the record's memory of the prior value moves to
// it (when it found the setting already in place) and it is returned.
func handOver(others []*otherState, rec record) *otherState {
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
func (r *runner) plan(p profile, undo bool) error {
	if undo {
		s, done, err := r.open(false)
		if err != nil {
			return err
		}
		defer done()
		st, err := s.load(p.Key)
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
	if p.VRRPVIP.IsValid() {
		r.logf("# %s\n", p.vrrpNote())
	}
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

// checkRow is one line of check's table and, when it is not ok, how to fix
// it: shell lines, comments starting with "# ".
type checkRow struct {
	status, check, have string
	fix                 []string
}

// statusInfo is the status of a row that reports what the host has
// without wanting anything of it: nothing to fix.
const statusInfo = "info"

func (c checkRow) fine() bool { return c.status == "ok" || c.status == statusInfo }

// vrrpNote says, in apply's log and the dry run, that the VIP is not
// added.
func (p profile) vrrpNote() string {
	return fmt.Sprintf("VIP %s on %s left to VRRP: keepalived adds it on the master", p.VRRPVIP, p.VRRPDev)
}

// checkVRRPVIP is check's row for a VIP left to VRRP: whether this host
// holds it now (it is the master) or not (a backup, or keepalived is not
// running). Either is right at some time, so the row is information.
func (r *runner) checkVRRPVIP(p profile) checkRow {
	row := checkRow{status: statusInfo, check: "VIP " + p.VRRPVIP.String() + " on " + p.VRRPDev + " held by VRRP"}
	addrs, err := r.h.Links.Addrs(p.VRRPDev)
	if err != nil {
		row.status, row.have = "unknown", r.unreadable(err)
		row.fix = []string{"# lvsprep reads the interface's addresses to tell whether this host holds the VIP", "ip address show dev " + p.VRRPDev}
		return row
	}
	row.have = "not held here: a backup, or keepalived is not running"
	for _, a := range addrs {
		switch {
		case a == p.VRRPVIP:
			row.have = "held here: the VRRP master"
		case a.Addr() == p.VRRPVIP.Addr():
			row.have = "held here as " + a.String() + ": the VRRP master (virtual_ipaddress says /" + strconv.Itoa(a.Bits()) + ")"
		}
	}
	return row
}

// unreadable is what check says of a setting it could not read: a user
// other than root is told that root can.
func (r *runner) unreadable(err error) string {
	if !r.h.IsRoot() {
		return "unknown: you must be root to read it"
	}
	return "cannot read: " + err.Error()
}

// check prints, for each setting of the profile, what it checks and what
// the host has, then for each line that is not ok the command that fixes
// it. It reports whether everything is in place.
func (r *runner) check(p profile) (bool, error) {
	var rows []checkRow
	var missingDevs []string
	for _, d := range p.Devs {
		if _, err := r.h.Links.IsUp(d); errors.Is(err, netfilter.ErrNoLink) {
			missingDevs = append(missingDevs, d)
			rows = append(rows, checkRow{"missing", "interface " + d + " exists", "absent", []string{
				"# no interface " + d + " here: run lvsprep again with --dev naming one of these",
				"ip -brief link show"}})
		}
	}
	stepsFailed := false
	for _, s := range p.Steps {
		cur := r.h.check(s)
		row := checkRow{status: cur.word(), check: s.Check(), have: cur.Have}
		switch {
		case cur.OK:
		case slices.ContainsFunc(missingDevs, s.uses):
			row.fix = []string{"# needs an interface that does not exist"}
		case cur.Err != nil:
			row.have = r.unreadable(cur.Err)
			if !r.h.IsRoot() {
				row.fix = []string{"# run the check as root to read it", "lvsprep check " + p.describe()}
			} else {
				row.fix = []string{"# " + s.Why + "; lvsprep makes it only if it is missing", "lvsprep " + p.describe()}
			}
		default:
			row.fix = []string{"# " + s.Why}
			if cur.Conflict != "" {
				row.fix = append(row.fix, "# "+cur.Conflict)
			}
			var prior []netfilter.Route
			if s.Kind == kindRoute {
				prior, _ = r.h.Links.DefaultRoutes(s.Route.Family())
			}
			row.fix = append(row.fix, applyCommands(s, prior)...)
		}
		if !cur.OK {
			stepsFailed = true
		}
		rows = append(rows, row)
	}
	if p.VIP.IsValid() {
		rows = append(rows, r.checkServices(p.VIP)...)
	}
	if p.VRRPVIP.IsValid() && !slices.Contains(missingDevs, p.VRRPDev) {
		rows = append(rows, r.checkVRRPVIP(p))
	}
	ok := !slices.ContainsFunc(rows, func(c checkRow) bool { return !c.fine() })

	r.logf("%s\n", p.describe())
	table := make([][]string, len(rows))
	for i, c := range rows {
		table[i] = []string{c.status, c.check, c.have}
	}
	if err := clitable.Write(r.out, []string{"STATUS", "CHECK", "HAVE"}, table); err != nil {
		return false, err
	}
	if err := r.appliedNote(p); err != nil {
		return false, err
	}
	if ok {
		r.logf("Everything is in place.\n")
		return true, nil
	}
	r.logf("\n")
	if stepsFailed && len(missingDevs) == 0 {
		r.logf("To fix the settings, run:\n  lvsprep %s\nor fix each line by hand (then lvsprep keeps no record to undo):\n", p.describe())
	} else {
		r.logf("To fix each line:\n")
	}
	for _, c := range rows {
		if c.fine() {
			continue
		}
		fix := c.fix
		why := ""
		if len(fix) > 0 && strings.HasPrefix(fix[0], "# ") {
			why, fix = " "+strings.TrimPrefix(fix[0], "# "), fix[1:]
		}
		r.logf("  # %s (%s):%s\n", c.check, c.status, why)
		for _, f := range fix {
			r.logf("  %s\n", f)
		}
	}
	return false, nil
}

// appliedNote tells whether lvsprep applied the profile, from its state
// file; a user who may not read the state directory is told so.
func (r *runner) appliedNote(p profile) error {
	s, done, err := r.open(false)
	var rn rootNeeded
	if errors.As(err, &rn) {
		r.logf("Whether lvsprep applied it is unknown: %v.\n", err)
		return nil
	} else if err != nil {
		return err
	}
	defer done()
	st, err := s.load(p.Key)
	if err != nil {
		return err
	}
	if st != nil {
		r.logf("Applied by lvsprep at %s (state %s).\n", st.Applied.Format("2006-01-02 15:04:05 MST"), statePath(r.dir, p.Key))
	}
	return nil
}

// status lists the applied profiles. A state file that cannot be read or
// trusted is listed as such, with the reason, and makes the status 1.
func (r *runner) status() error {
	s, done, err := r.open(false)
	if err != nil {
		return err
	}
	defer done()
	keys, err := s.keys()
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		r.logf("No profile applied (no state files in %s).\n", r.dir)
		return nil
	}
	var rows [][]string
	var undos, bad []string
	for _, k := range keys {
		st, err := s.load(k)
		if err != nil {
			rows = append(rows, []string{k, "UNUSABLE STATE", "-", "-"})
			bad = append(bad, err.Error())
			continue
		}
		if st == nil {
			continue
		}
		n, pending := 0, 0
		for _, rec := range st.Records {
			if rec.Changed {
				n++
			}
			if rec.Pending {
				pending++
			}
		}
		changed := fmt.Sprintf("%d of %d", n, len(st.Records))
		if pending > 0 {
			changed += fmt.Sprintf(" (%d interrupted)", pending)
		}
		rows = append(rows, []string{st.Profile, strings.Join(st.Args, " "), changed, st.Applied.Format("2006-01-02 15:04:05 MST")})
		undos = append(undos, profile{Name: st.Profile, Args: st.Args}.undoCommand())
	}
	if err := clitable.Write(r.out, []string{"PROFILE", "SETTINGS", "CHANGED", "APPLIED"}, rows); err != nil {
		return err
	}
	if len(undos) > 0 {
		r.logf("Undo with:\n")
		for _, u := range undos {
			r.logf("  %s\n", u)
		}
	}
	if len(bad) > 0 {
		r.logf("Unusable state files (lvsprep will not act on them; inspect, then remove them to forget those profiles):\n")
		for _, b := range bad {
			r.logf("  %s\n", b)
		}
		return problemsFound{}
	}
	return nil
}

// ownerOnly reports whether uid may not read dir because dir, or a
// directory above it, belongs to another user and is closed to everyone
// else, as lvsprep leaves its state directories.
func ownerOnly(dir string, uid int) bool {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrPermission) {
		return true
	} else if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) != uid && fi.Mode().Perm()&0o077 == 0
}
