package rollout

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/planner"
	"latencytier.io/latencytier/controllers/profilestatus"
)

// Node is one node the profile owns, as the rollout sees it.
type Node struct {
	Name   string
	Canary bool // matches spec.rollout.canary.selector
	// Joining: p selects the node but no LatencyNode carries p yet. It
	// waits (nothing to move) and keeps the rollout from being Complete.
	Joining bool
	// Action and Revision are what its LatencyNode spec asks for.
	Action   v1alpha1.NodeAction
	Revision string
	// Reported: the agent acted on this spec (observedGeneration current).
	Reported bool
	// ApplyFailed carries the Applied=False message when Reported.
	ApplyFailed string
	// SetAt is when the controller last changed Action or Revision.
	SetAt             time.Time
	Baseline, Current *v1alpha1.LatencyEvidence
	// Verdict is the one on record (the previous pass's entry in the
	// profile's status.rollout.verdicts), nil when none: only Regressed
	// and Inconclusive verdicts are listed, the others are judged again
	// from the evidence. VerdictCurrent says it judged the revision the
	// node holds.
	Verdict        *Verdict
	VerdictCurrent bool
	// AwaitingReboot: the node's boot parameters are staged, or it is
	// draining or rebooting (planner/reboot.go): it is judged after the boot.
	AwaitingReboot bool
}

// Input is everything a rollout decision is made from.
type Input struct {
	Policy *v1alpha1.RolloutSpec // nil: all at once, verdicts as evidence only
	Gate   Gate
	// Unmeasured: the target tuning measures nothing (measurement.source
	// Disabled), so no window will come to judge it.
	Unmeasured bool
	Generation int64
	// Target is the revision to roll out; Last the status it replaces.
	Target string
	Last   *v1alpha1.RolloutStatus
	Nodes  []Node // sorted by name
	Now    time.Time
}

// Move sets a node's LatencyNode to Action at Revision.
type Move struct {
	Node     string
	Action   v1alpha1.NodeAction
	Revision string
}

// Plan is the decision: what to write and what status says.
type Plan struct {
	Moves    []Move
	Verdicts map[string]*Verdict // nil entry: the node has no verdict
	// Kept are the nodes whose verdict stays as on record, figures and
	// time included (it may have judged an earlier revision).
	Kept   map[string]bool
	Status v1alpha1.RolloutStatus
	Events []Event
	// RequeueAfter is when a clock (window, timeout) next changes the plan.
	RequeueAfter time.Duration
	// Classes place each node relative to the target (the managed
	// reboots uncordon a node once it passed or failed).
	Classes map[string]planner.Class
}

// Decide is the rollout's next step. Pure: the same input gives the
// same plan, and the plan for an input it produced is empty of moves.
func Decide(in Input) Plan {
	d := decider{in: in, plan: Plan{Verdicts: map[string]*Verdict{}, Kept: map[string]bool{}}}
	d.plan.Status = v1alpha1.RolloutStatus{Revision: in.Target, PreviousRevision: previousRevision(in),
		ObservedGeneration: in.Generation}
	d.classify()
	d.plan.Classes = d.class
	switch {
	case in.Policy == nil:
		d.allAtOnce()
	case d.halted():
		d.keepHalted()
	case len(d.failed) > 0:
		d.onFailure()
	case in.Policy.Paused:
		d.setPhase(v1alpha1.RolloutPaused, "paused by spec.rollout.paused")
	default:
		d.advance()
	}
	d.count()
	d.plan.Status.Verdicts, d.plan.Status.VerdictsOmitted = d.verdictList()
	return d.plan
}

// previousRevision is where a rollback returns to: the last revision that
// completed, kept across spec changes made mid-rollout.
func previousRevision(in Input) string {
	switch {
	case in.Last == nil:
		return ""
	case in.Last.Revision == in.Target:
		return in.Last.PreviousRevision
	case in.Last.Phase == v1alpha1.RolloutComplete:
		return in.Last.Revision
	default:
		return in.Last.PreviousRevision
	}
}

type decider struct {
	in      Input
	plan    Plan
	class   map[string]planner.Class
	failed  []string // names, in order
	failMsg map[string]string
}

func (d *decider) classify() {
	d.class, d.failMsg = map[string]planner.Class{}, map[string]string{}
	for i := range d.in.Nodes {
		n := &d.in.Nodes[i]
		v := d.verdictOf(n)
		d.plan.Verdicts[n.Name] = v
		d.plan.Kept[n.Name] = v != nil && v == n.Verdict
		c, msg := d.classOf(n)
		d.class[n.Name] = c
		if c == planner.ClassFailed {
			d.failed = append(d.failed, n.Name)
			d.failMsg[n.Name] = msg
		}
	}
}

// classOf places a node relative to the target revision.
func (d *decider) classOf(n *Node) (planner.Class, string) {
	if n.Action != v1alpha1.ActionApply || n.Revision != d.in.Target {
		return planner.ClassWaiting, ""
	}
	if n.AwaitingReboot {
		return planner.ClassVerifying, "" // the reboot has its own timeouts
	}
	if !n.Reported {
		return d.timedOut(n, planner.ClassVerifying, "its agent did not report")
	}
	if n.ApplyFailed != "" {
		return planner.ClassFailed, "failed to apply: " + n.ApplyFailed
	}
	v := d.plan.Verdicts[n.Name]
	switch {
	case d.in.Policy == nil || d.completed():
		return planner.ClassPassed, "" // evidence only
	case v.Passed():
		return planner.ClassPassed, ""
	case v.Reason == v1alpha1.VerdictRegressed:
		return planner.ClassFailed, "regressed: " + v.Message
	}
	return d.timedOut(n, planner.ClassVerifying, "inconclusive: "+v.Message)
}

// timedOut applies onInconclusive once inconclusiveTimeout has passed.
func (d *decider) timedOut(n *Node, c planner.Class, why string) (planner.Class, string) {
	p := d.in.Policy
	if p == nil {
		return c, ""
	}
	deadline := n.SetAt.Add(timeout(p))
	if d.in.Now.Before(deadline) {
		d.wake(deadline)
		return c, ""
	}
	if p.OnInconclusive == v1alpha1.InconclusivePass {
		return planner.ClassPassed, ""
	}
	return planner.ClassFailed, why + " after " + timeout(p).String()
}

// completed: the target's rollout finished on at least one node; later
// nodes join without a gate. (A profile whose nodes have no LatencyNode yet
// is Complete on none: its nodes still go canary first.)
func (d *decider) completed() bool {
	l := d.in.Last
	return l != nil && l.Revision == d.in.Target && l.Phase == v1alpha1.RolloutComplete && l.Updated > 0
}

// halted: a rollback or a regression pause for this generation stands.
func (d *decider) halted() bool {
	l := d.in.Last
	if l == nil || l.Revision != d.in.Target || l.ObservedGeneration != d.in.Generation {
		return false
	}
	return l.Phase == v1alpha1.RolloutRolledBack || (l.Phase == v1alpha1.RolloutPaused && !d.in.Policy.Paused)
}

func (d *decider) keepHalted() {
	l := d.in.Last
	d.plan.Status.Phase, d.plan.Status.Message, d.plan.Status.RolledBack = l.Phase, l.Message, l.RolledBack
	d.plan.Status.PreviousRevision = l.PreviousRevision
	if l.Phase == v1alpha1.RolloutRolledBack {
		d.plan.Moves = d.rollbackMoves()
	}
}

// onFailure rolls back or pauses on the first failed node.
func (d *decider) onFailure() {
	first := d.failed[0]
	msg := fmt.Sprintf("node %s %s", first, d.failMsg[first])
	if len(d.failed) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(d.failed)-1)
	}
	if d.in.Policy.OnRegression != v1alpha1.RegressionPause {
		d.plan.Moves = d.rollbackMoves()
		to := d.plan.Status.PreviousRevision
		if to == "" {
			to = "no tuning (reverted)"
		}
		d.plan.Status.RolledBack = int32(len(d.plan.Moves))
		d.setPhase(v1alpha1.RolloutRolledBack, fmt.Sprintf("%s; rolled back %d node(s) to %s", msg, len(d.plan.Moves), to))
		return
	}
	d.setPhase(v1alpha1.RolloutPaused, msg+"; paused")
}

// rollbackMoves return every node changed away from the previous revision
// to it (Revert when there is none). Baseline nodes wrote nothing.
func (d *decider) rollbackMoves() []Move {
	prev := d.plan.Status.PreviousRevision
	var moves []Move
	for _, n := range d.in.Nodes {
		if n.Action != v1alpha1.ActionApply || n.Revision == prev {
			continue
		}
		if prev == "" {
			moves = append(moves, Move{n.Name, v1alpha1.ActionRevert, ""})
		} else {
			moves = append(moves, Move{n.Name, v1alpha1.ActionApply, prev})
		}
	}
	return moves
}

// allAtOnce: without a policy the selection writes every node; the
// rollout only reports.
func (d *decider) allAtOnce() {
	if d.countClass(planner.ClassPassed) == len(d.in.Nodes) {
		d.setPhase(v1alpha1.RolloutComplete, fmt.Sprintf("%d node(s) hold %s", len(d.in.Nodes), d.in.Target))
		return
	}
	d.setPhase(v1alpha1.RolloutProgressing, "all nodes at once (no spec.rollout)")
}

func (d *decider) setPhase(phase v1alpha1.RolloutPhase, msg string) {
	d.plan.Status.Phase, d.plan.Status.Message = phase, profilestatus.Truncate(msg)
	l := d.in.Last
	if l != nil && l.Phase == phase && l.Revision == d.in.Target {
		return
	}
	typ := corev1.EventTypeNormal
	if phase == v1alpha1.RolloutRolledBack || (phase == v1alpha1.RolloutPaused && len(d.failed) > 0) {
		typ = corev1.EventTypeWarning
	}
	d.plan.Events = append(d.plan.Events, Event{typ, "Rollout" + string(phase), d.plan.Status.Message})
}

func (d *decider) count() {
	st := &d.plan.Status
	for _, n := range d.in.Nodes {
		switch d.class[n.Name] {
		case planner.ClassWaiting:
			st.Waiting++
		case planner.ClassVerifying:
			st.Verifying++
		case planner.ClassPassed:
			st.Updated++
		case planner.ClassFailed:
			st.Failed++
		}
		if v := d.plan.Verdicts[n.Name]; v != nil {
			switch v.Reason {
			case v1alpha1.VerdictImproved:
				st.Improved++
			case v1alpha1.VerdictUnchanged:
				st.Unchanged++
			case v1alpha1.VerdictRegressed:
				st.Regressed++
			default:
				st.Inconclusive++
			}
		}
	}
	for _, m := range d.plan.Moves {
		if m.Action == v1alpha1.ActionApply && m.Revision == d.in.Target {
			st.Waiting--
			st.Verifying++
		}
	}
}

func (d *decider) countClass(c planner.Class) int {
	k := 0
	for _, n := range d.in.Nodes {
		if d.class[n.Name] == c {
			k++
		}
	}
	return k
}

// wake asks for a reconcile at t (the soonest of all asked for).
func (d *decider) wake(t time.Time) {
	wait := t.Sub(d.in.Now)
	if wait <= 0 {
		wait = time.Second
	}
	if d.plan.RequeueAfter == 0 || wait < d.plan.RequeueAfter {
		d.plan.RequeueAfter = wait
	}
}

// Scaled resolves a count or percentage of total, rounded up, at least min.
func Scaled(v *intstr.IntOrString, total, min int) int {
	if v == nil {
		return min
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, total, true)
	if err != nil || n < min {
		return min
	}
	return n
}

// Window is how long a node is verified after a move: spec.rollout.verificationWindow,
// a minute when unset.
func Window(p *v1alpha1.RolloutSpec) time.Duration {
	if p.VerificationWindow == nil {
		return time.Minute
	}
	return p.VerificationWindow.Duration
}

func timeout(p *v1alpha1.RolloutSpec) time.Duration {
	if p.InconclusiveTimeout == nil {
		return 10 * time.Minute
	}
	return p.InconclusiveTimeout.Duration
}

func sortByName(nodes []Node) {
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
}

// Event is an event a rollout step warrants: its type (Normal, Warning),
// reason and note. The profile reconciler records it once the step's
// status is on record.
type Event struct{ Type, Reason, Note string }
