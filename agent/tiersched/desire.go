package tiersched

import (
	"fmt"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/podcgroup"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// QuotaRemoved says the profile removes pod p's CFS quota (policy Remove;
// Burst keeps the quota and adds a burst over it).
func QuotaRemoved(p podcgroup.Pod) bool { return p.OptedIn && !p.Burst }

// Desire is one pass's scheduler/class for the node spec at revision, class
// being spec.scheduler.class: the knob (Fair: unload ours; Tier: load it)
// or the result that stands instead of it. For Tier:
//   - The exit marker of an ejection at this revision: Fallback with the
//     kernel's reason, and no knob, so the engine restores fair and nothing
//     reloads the scheduler. A marker of another revision is cleared: a new
//     revision (or a revert, which asks for nothing) is a new decision.
//   - A pod keeping a CPU limit: Unsupported, no knob (an attached
//     scheduler is then detached by the engine: the limit wins).
//
// With class unset there is neither knob nor result: a journaled class is
// restored to fair like any setting the spec dropped.
func Desire(root *host.Root, class *v1alpha1.SchedulerClass, revision string, pods []podcgroup.Pod, opts ...podcgroup.Option) ([]knob.Knob, []v1alpha1.SettingResult, error) {
	want := class != nil && *class == v1alpha1.SchedulerClassTier
	ex, err := ReadExit(root)
	if err != nil {
		return nil, nil, fmt.Errorf("read the tier scheduler's exit marker: %w", err)
	}
	if ex != nil && (!want || ex.Revision != revision) {
		if err := ClearExit(root); err != nil {
			return nil, nil, err
		}
		ex = nil
	}
	switch {
	case class == nil:
		return nil, nil, nil
	case !want:
		return []knob.Knob{Knob(Fair)}, nil, nil
	case ex != nil:
		return nil, []v1alpha1.SettingResult{{Setting: SettingID, Desired: Tier, Actual: Fair, State: v1alpha1.SettingFallback, Message: ex.Message()}}, nil
	}
	if r := QuotaRefusal(root, pods, QuotaRemoved, opts...); r != nil {
		actual, _ := Read(root)
		return nil, []v1alpha1.SettingResult{{Setting: SettingID, Desired: Tier, Actual: actual, State: v1alpha1.SettingUnsupported, Message: r.Reason}}, nil
	}
	return []knob.Knob{Knob(Tier)}, nil, nil
}
