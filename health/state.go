package health

import (
	"errors"
	"fmt"
	"time"
)

// State is a target's health.
type State uint8

// States. A target starts Unknown: its first pass makes it Up, Fall
// consecutive failures Down. Up turns Down after Fall consecutive
// failures, Down turns Up after Rise consecutive passes.
const (
	Unknown State = iota
	Up
	Down
)

var stateNames = [...]string{Unknown: "unknown", Up: "up", Down: "down"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", s)
}

// MarshalText writes "unknown", "up" or "down".
func (s State) MarshalText() ([]byte, error) {
	if int(s) >= len(stateNames) {
		return nil, fmt.Errorf("health: state %d", s)
	}
	return []byte(stateNames[s]), nil
}

// UnmarshalText reads what MarshalText writes.
func (s *State) UnmarshalText(b []byte) error {
	for i, n := range stateNames {
		if string(b) == n {
			*s = State(i)
			return nil
		}
	}
	return fmt.Errorf("health: state %q: unknown, up or down", b)
}

// resultOK is the Result of a passing probe.
const resultOK = "ok"

// TargetState is one target's health and its last probe.
type TargetState struct {
	Key TargetKey `json:"key"`
	// Target is the first target given with this key.
	Target Target `json:"target,omitzero"`
	State  State  `json:"state"`
	// Passes and Fails count the consecutive passes and failures up to
	// the last probe (one of them is 0).
	Passes int `json:"passes,omitempty"`
	Fails  int `json:"fails,omitempty"`
	// Result is "ok" (resultOK), the last probe's error, or empty before the
	// first probe.
	Result string `json:"result,omitempty"`
	// LastProbe is when the last probe started, LastDuration how long it
	// took and LastLate how late it started.
	LastProbe    time.Time     `json:"last_probe,omitzero"`
	LastDuration time.Duration `json:"last_duration,omitempty"`
	LastLate     time.Duration `json:"last_late,omitempty"`
	// LastChange is when State last changed.
	LastChange time.Time `json:"last_change,omitzero"`
	// Weight is the weight a dynamic exec check last passed with (see
	// WeightResult); nil for other checks, for a pass at the file's
	// weight (exit status 0), and once the target is down.
	Weight *uint32 `json:"weight,omitempty"`
}

// Change is a transition of a target's state. The checker delivers the
// latest transition of each target: when the receiver falls behind, the
// transitions of a target not yet received merge into one (Old of the
// first, New of the last), and merge away when they return to Old.
type Change struct {
	Key    TargetKey `json:"key"`
	Target Target    `json:"target"`
	Old    State     `json:"old"`
	New    State     `json:"new"`
	// Result is the result of the probe that made the change.
	Result string    `json:"result"`
	At     time.Time `json:"at"`
	// Weight is the target's weight with New (see TargetState.Weight). A
	// dynamic check that changes the weight of a target that stays up
	// makes a change from Up to Up.
	Weight *uint32 `json:"weight,omitempty"`
}

// WeightResult is what a probe of a dynamic exec check returns when it
// passes with a weight: exit status 2 to 255 is weight status-2, as
// keepalived's misc_dynamic has it. It is an error in type only, so that
// probes keep one signature: passed tells it from a failure.
type WeightResult struct {
	Weight uint32
}

func (w *WeightResult) Error() string { return fmt.Sprintf("ok, weight %d", w.Weight) }

// passed reports whether a probe's result is a pass: nil or a
// *WeightResult.
func passed(err error) bool {
	var w *WeightResult
	return err == nil || errors.As(err, &w)
}

// weightOf is the weight a passing result sets: nil for nil (the file's).
func weightOf(err error) *uint32 {
	var w *WeightResult
	if errors.As(err, &w) {
		v := w.Weight
		return &v
	}
	return nil
}

// Status is a Checker's snapshot.
type Status struct {
	// Targets are ordered by key (address, mark, spec).
	Targets  []TargetState `json:"targets"`
	Lateness Lateness      `json:"lateness"`
	// InFlight is the count of probes running.
	InFlight int `json:"in_flight"`
}
