package rules

import (
	"context"
	"errors"

	"golang.org/x/sys/unix"
)

// maxRounds bounds how often Converge re-reads the kernel after changes it
// refused because the table changed under it.
const maxRounds = 3

// ConvergeResult is what one apply did.
type ConvergeResult struct {
	Plan   *Plan // the first plan, made from the first read
	Rounds int   // plans made before the drain (1 when nothing raced)
	// Failed are the changes the kernel refused in the last round.
	Failed []ChangeError
	// Stopped is set when the kernel refused an add or edit for a reason
	// other than a concurrent change: then nothing was drained or deleted,
	// and Held lists the deletes of the last plan that were not started.
	Stopped bool
	Held    []Change
	// Drain is how the drain ended (nil when Stopped).
	Drain *DrainResult
	// Remaining is what still differs from the desired set after the
	// apply (nil when the kernel now equals it).
	Remaining *Plan
}

// Converged reports whether the kernel holds the desired set.
func (r *ConvergeResult) Converged() bool { return r.Remaining == nil }

// Converge makes the kernel equal desired: it reads the kernel, plans and
// makes the adds and edits; when the kernel refuses a change because the
// table changed meanwhile (someone else added or deleted the same
// service or real server), it reads again and plans again, at most three
// times (maxRounds). Only when every add and edit was made does it delete
// what leaves: at once, or through a drain (see Drain). A refusal of any
// other kind (a scheduler the kernel lacks, say), or a race that outlasts
// the rounds, stops the apply there: nothing is drained or deleted, so a
// refused change never leads to a removal. prior are drains an
// interrupted apply left in the journal.
//
// Every change is acknowledged by the kernel, so an apply whose changes
// were all accepted in the first round is done without another read (the
// read dominates an apply's cost); otherwise the table is read once more
// and what still differs is returned in Remaining.
func (a *Applier) Converge(ctx context.Context, desired *Set, o DiffOptions, prior []DrainEntry) (*ConvergeResult, error) {
	res := &ConvergeResult{}
	o.Draining = a.DrainTimeout > 0
	var p *Plan
	for res.Rounds < maxRounds {
		var err error
		if p, err = DiffKernel(a.Client, desired, o); err != nil {
			return res, err
		}
		if res.Plan == nil {
			res.Plan = p
		}
		if a.Check != nil {
			if err := a.Check(p); err != nil {
				return res, err
			}
		}
		res.Rounds++
		failed, err := a.Changes(p)
		if err != nil {
			return res, err
		}
		res.Failed = failed
		if len(failed) == 0 || !raced(failed) {
			break
		}
	}
	if len(res.Failed) > 0 {
		res.Stopped = true
		for _, c := range p.Changes {
			if c.Action == DeleteDest || c.Action == DeleteService {
				res.Held = append(res.Held, c)
			}
		}
		return res, a.remaining(res, desired, o)
	}
	var err error
	if a.DrainTimeout > 0 {
		res.Drain, err = a.Drain(ctx, p, prior)
	} else {
		res.Drain = &DrainResult{}
		if res.Drain.Failed, err = a.Deletes(p); err == nil {
			err = a.saveJournal(nil)
		}
	}
	if err != nil {
		return res, err
	}
	if res.Rounds == 1 && len(res.Drain.Failed) == 0 {
		return res, nil
	}
	return res, a.remaining(res, desired, o)
}

// remaining reads the kernel again and records what still differs.
func (a *Applier) remaining(res *ConvergeResult, desired *Set, o DiffOptions) error {
	rem, err := DiffKernel(a.Client, desired, o)
	if err != nil {
		return err
	}
	if !rem.InSync() {
		res.Remaining = rem
	}
	return nil
}

// raced reports whether every refusal is one a concurrent change explains:
// what an add adds exists already (EEXIST), the service is gone (ESRCH),
// or the real server an edit or delete names is gone (ENOENT). A service
// add or edit answered ENOENT lacks its scheduler or persistence engine:
// no race explains that.
func raced(failed []ChangeError) bool {
	for _, f := range failed {
		switch {
		case errors.Is(f.Err, unix.EEXIST), errors.Is(f.Err, unix.ESRCH):
		case errors.Is(f.Err, unix.ENOENT) && f.Change.Dest != nil:
		default:
			return false
		}
	}
	return true
}
