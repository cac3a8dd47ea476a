package rules

import (
	"context"
	"errors"

	"golang.org/x/sys/unix"
)

// MaxRounds bounds how often Converge re-reads the kernel after changes it
// refused because the table changed under it.
const MaxRounds = 3

// ConvergeResult is what one apply did.
type ConvergeResult struct {
	Plan   *Plan // the first plan, made from the first read
	Rounds int   // plans made before the drain (1 when nothing raced)
	// Failed are the changes the kernel refused in the last round.
	Failed []ChangeError
	Drain  *DrainResult
	// Remaining is what still differs from the desired set after the
	// apply (nil when the kernel now equals it).
	Remaining *Plan
}

// Converged reports whether the kernel holds the desired set.
func (r *ConvergeResult) Converged() bool { return r.Remaining == nil }

// Converge makes the kernel equal desired: it reads the kernel, plans and
// makes the adds and edits; when the kernel refuses a change because the
// table changed meanwhile (someone else added, edited or deleted), it reads
// again and plans again, at most MaxRounds times; then it drains and
// deletes what leaves (see Drain). prior are drains an interrupted apply
// left in the journal.
//
// Every change is acknowledged by the kernel, so an apply whose changes
// were all accepted in the first round is done without another read (the
// read dominates an apply's cost); after a refused change the table is read
// once more and what still differs is returned in Remaining.
func (a *Applier) Converge(ctx context.Context, desired *Set, o DiffOptions, prior []DrainEntry) (*ConvergeResult, error) {
	res := &ConvergeResult{}
	o.Draining = a.DrainTimeout > 0
	var p *Plan
	for res.Rounds < MaxRounds {
		var err error
		if p, err = DiffKernel(a.Client, desired, o); err != nil {
			return res, err
		}
		if res.Plan == nil {
			res.Plan = p
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
	var err error
	if res.Drain, err = a.Drain(ctx, p, prior); err != nil {
		return res, err
	}
	if res.Rounds == 1 && len(res.Failed) == 0 && len(res.Drain.Failed) == 0 {
		return res, nil
	}
	rem, err := DiffKernel(a.Client, desired, o)
	if err != nil {
		return res, err
	}
	if !rem.InSync() {
		res.Remaining = rem
	}
	return res, nil
}

// raced reports whether every refusal is one a concurrent change explains:
// the object existed already, or no longer exists.
func raced(failed []ChangeError) bool {
	for _, f := range failed {
		if !errors.Is(f.Err, unix.EEXIST) && !errors.Is(f.Err, unix.ESRCH) && !errors.Is(f.Err, unix.ENOENT) {
			return false
		}
	}
	return true
}
