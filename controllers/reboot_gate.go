package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/planner"
	"latencytier.io/latencytier/controllers/profilestatus"
	"latencytier.io/latencytier/controllers/rollout"
)

// Reboots only through a canary (issue 40): a profile's Reboot boot policy
// stages arguments only while the profile has a rollout whose canary is
// smaller than its selection, so untested arguments never sit in every
// node's bootloader at once (where any unplanned reboot would boot them).
// When the gate is closed the manager writes the nodes' tuning with policy
// ReportOnly (the agent stages nothing and reports its plan) and the
// profile's RebootsAllowed condition says why. Pure: the profile
// reconciler counts the selection; the pass's node selection
// (selection.go) and the rollout write what gatedTuning gives.
//
// A gate that opens later (the selection grew) stages on the nodes the
// rollout moves from then on: a node moved while it was closed keeps
// ReportOnly until the next revision, so no node that was not a canary is
// rebooted outside one.

// rebootGate is whether p's Reboot policy may stage now.
type rebootGate struct {
	// Wanted: p's tuning asks for bootParameters.policy Reboot.
	Wanted bool
	Open   bool
	Reason string
	// Message says why, with the counts.
	Message string
}

// rebootGateOf decides the gate of p over a selection of selected nodes,
// canaries of which match spec.rollout.canary.selector.
func rebootGateOf(p *v1alpha1.LatencyProfile, selected, canaries int) rebootGate {
	bp := p.Spec.BootParameters
	if bp == nil || bp.Policy != v1alpha1.BootReboot {
		return rebootGate{Open: true}
	}
	g := rebootGate{Wanted: true}
	ro := p.Spec.Rollout
	if ro == nil {
		g.Reason = v1alpha1.ReasonRebootsNeedRollout
		g.Message = "bootParameters.policy Reboot stages nothing without spec.rollout: set a canary smaller than the selection"
		return g
	}
	size, what := canarySize(ro, selected, canaries)
	if size < 1 || size >= selected {
		g.Reason = v1alpha1.ReasonCanaryNotSmaller
		g.Message = fmt.Sprintf("bootParameters.policy Reboot stages nothing: the canary (%s) is %d of the %d selected node(s); it must be at least 1 and fewer than the selection",
			what, size, selected)
		return g
	}
	g.Open, g.Reason = true, v1alpha1.ReasonCanarySmaller
	g.Message = fmt.Sprintf("the canary (%s) is %d of the %d selected node(s)", what, size, selected)
	return g
}

// canarySize is how many of selected nodes the rollout changes first:
// those matching the canary selector, a canary count or percentage, or
// (no canary) the first batch of maxInFlight.
func canarySize(ro *v1alpha1.RolloutSpec, selected, canaries int) (int, string) {
	switch c := ro.Canary; {
	case c != nil && c.Selector != nil:
		return canaries, "rollout.canary.selector"
	case c != nil && c.Nodes != nil:
		return min(rollout.Scaled(c.Nodes, selected, 1), selected), "rollout.canary.nodes " + c.Nodes.String()
	}
	what := "no rollout.canary: the first batch of rollout.maxInFlight"
	if ro.MaxInFlight != nil {
		what += " " + ro.MaxInFlight.String()
	}
	return min(rollout.Scaled(ro.MaxInFlight, selected, 1), selected), what
}

// rebootGateIn is p's gate over the nodes p owns in this pass.
func rebootGateIn(p *v1alpha1.LatencyProfile, in profilestatus.Input) rebootGate {
	if bp := p.Spec.BootParameters; bp == nil || bp.Policy != v1alpha1.BootReboot {
		return rebootGate{Open: true}
	}
	var canary labels.Selector
	if ro := p.Spec.Rollout; ro != nil && ro.Canary != nil && ro.Canary.Selector != nil {
		canary, _ = metav1.LabelSelectorAsSelector(ro.Canary.Selector)
	}
	selected, canaries := 0, 0
	for i := range in.Nodes {
		n := &in.Nodes[i]
		if in.Resolution(n).Winner != p.Name {
			continue
		}
		selected++
		if canary != nil && canary.Matches(planner.Selectable(n.Labels)) {
			canaries++
		}
	}
	return rebootGateOf(p, selected, canaries)
}

// gatedTuning is t as written to a node under g: policy Reboot turned
// ReportOnly while the gate is closed (the agent stages nothing).
func gatedTuning(t v1alpha1.TuningSpec, g rebootGate) v1alpha1.TuningSpec {
	if g.Open || t.BootParameters == nil || t.BootParameters.Policy != v1alpha1.BootReboot {
		return t
	}
	bp := *t.BootParameters
	bp.Policy = v1alpha1.BootReportOnly
	t.BootParameters = &bp
	return t
}

// setRebootsCondition sets p's RebootsAllowed from g (removed when p asks
// for no reboots), and reports whether it turned False.
func setRebootsCondition(conds *[]metav1.Condition, g rebootGate, gen int64, now metav1.Time) bool {
	if !g.Wanted {
		meta.RemoveStatusCondition(conds, v1alpha1.ProfileRebootsAllowed)
		return false
	}
	was := meta.FindStatusCondition(*conds, v1alpha1.ProfileRebootsAllowed)
	wasOpen := was == nil || was.Status != metav1.ConditionFalse
	st := metav1.ConditionTrue
	if !g.Open {
		st = metav1.ConditionFalse
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: v1alpha1.ProfileRebootsAllowed, Status: st, Reason: g.Reason,
		Message: profilestatus.Truncate(g.Message), ObservedGeneration: gen, LastTransitionTime: now})
	return wasOpen && !g.Open
}

// eventRebootsGated is the event of a gate that closed.
const eventRebootsGated = "RebootsNotAllowed"
