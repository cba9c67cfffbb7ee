// Package plan decides, without touching the host, what the agent must
// change: desired knobs plus what the kernel holds now (and what the agent
// last verified) in, a list of changes and the settings already settled out.
package plan

import (
	"fmt"

	"latencytier.io/latencytier/agent/kerr"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Observed is what reading one knob gave.
type Observed struct {
	Value string
	Err   error
}

// Change is one write the agent must make.
type Change struct {
	Knob knob.Knob
	// From is the value the kernel holds now.
	From string
	// Drift says the agent had verified Desired here before, so someone else
	// changed it since.
	Drift bool
}

// Plan is the outcome of Make.
type Plan struct {
	// Changes are the writes, in knob order.
	Changes []Change
	// Settled are results for knobs that need no write: already at the
	// desired value, or unreadable (Unsupported, Failed).
	Settled []v1alpha1.SettingResult
}

// Make compares desired knobs with observed values. verified maps a knob ID
// to the value the agent last wrote and read back (from the journal).
func Make(knobs []knob.Knob, observed map[string]Observed, verified map[string]string) Plan {
	var p Plan
	for _, k := range knobs {
		o, ok := observed[k.ID]
		switch {
		case !ok:
			p.Settled = append(p.Settled, result(k, "", v1alpha1.SettingFailed, "not read"))
		case o.Err != nil:
			p.Settled = append(p.Settled, readFailure(k, o.Err))
		case k.Matches(o.Value, k.Desired):
			p.Settled = append(p.Settled, result(k, o.Value, v1alpha1.SettingApplied, k.Note))
		default:
			v, had := verified[k.ID]
			p.Changes = append(p.Changes, Change{Knob: k, From: o.Value, Drift: had && k.Matches(v, k.Desired)})
		}
	}
	return p
}

// OwnerOf reports whether another writer on the node owns k's target,
// with the OwnedBy result naming it (agent/owners decides; nil: nobody
// owns anything).
type OwnerOf func(k knob.Knob) (v1alpha1.SettingResult, bool)

// Own takes the knobs another writer owns out of knobs: the rest in order,
// and the OwnedBy result of each taken. An owned knob is neither written
// nor re-asserted, and drift on it is not the agent's.
func Own(knobs []knob.Knob, of OwnerOf) (mine []knob.Knob, owned []v1alpha1.SettingResult) {
	if of == nil {
		return knobs, nil
	}
	for _, k := range knobs {
		if r, ok := of(k); ok {
			r.Setting, r.Desired, r.State = k.ID, k.Desired, v1alpha1.SettingOwnedBy
			owned = append(owned, r)
			continue
		}
		mine = append(mine, k)
	}
	return mine, owned
}

func readFailure(k knob.Knob, err error) v1alpha1.SettingResult {
	state := v1alpha1.SettingFailed
	if kerr.ClassOf(err) == kerr.Unsupported {
		state = v1alpha1.SettingUnsupported
	}
	return result(k, "", state, fmt.Sprintf("read failed: %v", err))
}

func result(k knob.Knob, actual string, state v1alpha1.SettingState, msg string) v1alpha1.SettingResult {
	return v1alpha1.SettingResult{Setting: k.ID, Desired: k.Desired, Actual: actual, State: state, Message: msg}
}

// Orphans returns the journaled IDs that no desired knob names any more, in
// journal order: settings a changed or removed spec no longer wants.
func Orphans(journaled []string, knobs []knob.Knob) []string {
	want := make(map[string]bool, len(knobs))
	for _, k := range knobs {
		want[k.ID] = true
	}
	var out []string
	for _, id := range journaled {
		if !want[id] {
			out = append(out, id)
		}
	}
	return out
}

// revertAction is what revert does with one journaled setting.
type revertAction int

const (
	// revertWrite writes the original back: the kernel holds our value.
	revertWrite revertAction = iota
	// RevertNothing: the kernel already holds the original.
	RevertNothing
	// RevertConflict: the kernel holds a value neither ours nor the
	// original; someone else set it, and revert leaves it.
	RevertConflict
)

// Revert decides one journaled setting's revert from its current value.
func Revert(current, original string, ours func(string) bool, equal func(a, b string) bool) revertAction {
	switch {
	case equal(current, original):
		return RevertNothing
	case ours(current):
		return revertWrite
	default:
		return RevertConflict
	}
}
