package planner

import (
	corev1 "k8s.io/api/core/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// State is a node's place in its life under a profile: one machine for
// selection, apply, verification, canary, rollback, managed reboot,
// release and revert. docs/architecture.md draws it; Machine is the table.
type State string

// The node states.
const (
	Unselected State = "Unselected" // no LatencyNode
	Baselining State = "Baselining" // selected, measured on Baseline, waiting for its turn
	Applying   State = "Applying"   // spec at a revision, its agent not Applied yet
	Verifying  State = "Verifying"  // Applied, inside the verification window (a canary first)
	Tuned      State = "Tuned"      // the revision passed (or no rollout gates it)
	RolledBack State = "RolledBack" // moved back to the previous revision after a failed verdict
	Draining   State = "Draining"   // reboot record Draining: cordoned, pods evicted
	Rebooting  State = "Rebooting"  // reboot record Rebooting: the agent is asked to reboot
	Rejoining  State = "Rejoining"  // reboot record Verifying: back in a new boot, judged
	TakenBack  State = "TakenBack"  // a request taken back: cordoned until it settles
	Stalled    State = "Stalled"    // reboots paused for a person; the node stays cordoned
	Reverting  State = "Reverting"  // action Revert: the agent restores the originals
	Released   State = "Released"   // LatencyNode deleted, labels off, the manager's cordon lifted
)

// Event is what a pass read that moves a node.
type Event string

// The events.
const (
	EvSelected       Event = "selected"             // the profile wins the node
	EvTurn           Event = "turn"                 // the rollout moves it to the target (canary first)
	EvApplied        Event = "agent applied"        // the agent reports Applied for the spec
	EvPassed         Event = "verdict passed"       // the window ended within the budget
	EvFailed         Event = "verdict failed"       // regressed, or failed to apply
	EvStaged         Event = "staged"               // the agent staged boot arguments; a slot is free
	EvPodsLeft       Event = "pods left"            // pods still to evict (a PodDisruptionBudget refused one)
	EvDrained        Event = "drained"              // no pod left to evict, still cordoned
	EvUncordoned     Event = "uncordoned"           // found uncordoned while Draining
	EvDrainTimeout   Event = "drain timeout"        // drainTimeout passed
	EvNewBoot        Event = "new boot"             // the agent reports a new boot for the revision, Ready
	EvRebootFailed   Event = "reboot failed"        // the agent could not reboot
	EvBootTimeout    Event = "boot timeout"         // bootTimeout passed (Ready: let go; not Ready: stall)
	EvVerified       Event = "verified"             // Applied in the new boot and judged
	EvDeselected     Event = "deselected"           // left the selection, taken over, profile deleted
	EvSettled        Event = "request settled"      // a taken-back request can no longer reboot the node
	EvReverted       Event = "agent reverted"       // the agent reports Reverted (or the node is gone)
	EvRebootBackGoAt Event = "reboot back go-ahead" // rolled back with arguments left: a person (or Automatic) says go
)

// Write is one field a transition writes, named by its object and field:
// the writer table of docs/architecture.md lists who writes each today.
type Write string

// The writes.
const (
	WriteLatencyNode   Write = "LatencyNode create"
	WriteTuning        Write = "LatencyNode spec.tuning/action/revision"
	WriteVerifyAfter   Write = "LatencyNode spec.verifyAfter"
	WriteRecord        Write = "LatencyNode spec.reboot"
	WriteRecordClear   Write = "LatencyNode spec.reboot cleared"
	WriteRevert        Write = "LatencyNode spec.action=Revert"
	WriteDelete        Write = "LatencyNode delete"
	WriteLabels        Write = "Node labels"
	WriteLabelsOff     Write = "Node labels removed"
	WriteTaint         Write = "Node tuning-pending taint"
	WriteCordon        Write = "Node spec.unschedulable (cordon, marker)"
	WriteUncordon      Write = "Node spec.unschedulable lifted (own marker only)"
	WriteEvict         Write = "Pod eviction"
	WriteStatusPause   Write = "LatencyProfile status.reboots paused"
	WriteStatusVerdict Write = "LatencyProfile status.rollout verdict"
)

// Transition is one row of the machine: from a state, on an event, to a
// state, with the writes that state needs and the function that decides
// it (Decider: a planner function, or a function of controllers/ or of
// another of its packages, such as rollout.Decide, that the planner has not
// taken over yet).
type Transition struct {
	From, To State
	On       Event
	Act      Act // the reboot act it is, for rows NextReboot and Startable decide
	Writes   []Write
	Decider  string
}

// Machine is the node state machine, written once.
var Machine = []Transition{
	{Unselected, Baselining, EvSelected, Wait, []Write{WriteLabels, WriteTaint, WriteLatencyNode}, "controllers.nodeSelection.apply"},
	{Unselected, Applying, EvSelected, Wait, []Write{WriteLabels, WriteTaint, WriteLatencyNode}, "controllers.nodeSelection.apply"},
	{Baselining, Applying, EvTurn, Wait, []Write{WriteTuning, WriteVerifyAfter}, "rollout.Decide"},
	{Applying, Verifying, EvApplied, Wait, []Write{WriteTaint}, "rollout.Decide"},
	{Verifying, Tuned, EvPassed, Wait, []Write{WriteStatusVerdict}, "rollout.Decide"},
	{Verifying, RolledBack, EvFailed, Wait, []Write{WriteStatusVerdict, WriteTuning}, "rollout.Decide"},
	{Verifying, Draining, EvStaged, Start, []Write{WriteRecord, WriteCordon}, "planner.Startable"},
	{RolledBack, Draining, EvRebootBackGoAt, Start, []Write{WriteRecord, WriteCordon}, "planner.Startable"},
	{Draining, Draining, EvUncordoned, Drain, []Write{WriteCordon}, "planner.NextReboot"},
	{Draining, Draining, EvPodsLeft, Drain, []Write{WriteEvict}, "planner.NextReboot"},
	{Draining, Rebooting, EvDrained, Request, []Write{WriteRecord}, "planner.NextReboot"},
	{Draining, Applying, EvDrainTimeout, Abandon, []Write{WriteStatusPause, WriteUncordon, WriteRecordClear}, "planner.NextReboot"},
	{Draining, Applying, EvDeselected, Finish, []Write{WriteUncordon, WriteRecordClear}, "planner.NextReboot"},
	{Rebooting, Rejoining, EvNewBoot, Verify, []Write{WriteRecord, WriteVerifyAfter}, "planner.NextReboot"},
	{Rebooting, Applying, EvRebootFailed, Abandon, []Write{WriteStatusPause, WriteUncordon, WriteRecordClear}, "planner.NextReboot"},
	{Rebooting, Stalled, EvBootTimeout, Stall, []Write{WriteStatusPause}, "planner.NextReboot"},
	{Rebooting, TakenBack, EvDeselected, Withdraw, []Write{WriteRecord}, "planner.NextReboot"},
	{TakenBack, Applying, EvSettled, Finish, []Write{WriteUncordon, WriteRecordClear}, "planner.NextReboot"},
	{Rejoining, Tuned, EvVerified, Finish, []Write{WriteUncordon, WriteRecordClear}, "planner.NextReboot"},
	{Rejoining, Applying, EvBootTimeout, Abandon, []Write{WriteStatusPause, WriteUncordon, WriteRecordClear}, "planner.NextReboot"},
	{Rejoining, Applying, EvDeselected, Finish, []Write{WriteUncordon, WriteRecordClear}, "planner.NextReboot"},
	{Applying, Reverting, EvDeselected, Wait, []Write{WriteRevert}, "planner.Release"},
	{Verifying, Reverting, EvDeselected, Wait, []Write{WriteRevert}, "planner.Release"},
	{Tuned, Reverting, EvDeselected, Wait, []Write{WriteRevert}, "planner.Release"},
	{Baselining, Reverting, EvDeselected, Wait, []Write{WriteRevert}, "planner.Release"},
	{Reverting, Released, EvReverted, Wait, []Write{WriteLabelsOff, WriteDelete}, "planner.Release"},
	// Released while a reboot record stands: the release and the
	// profile's pass race; whichever comes first lets the node go.
	{Draining, Draining, EvDeselected, Wait, []Write{WriteRevert}, "planner.Release"},
	{Draining, Released, EvReverted, Wait, []Write{WriteLabelsOff, WriteUncordon, WriteDelete}, "planner.Release"},
	{TakenBack, TakenBack, EvDeselected, Wait, []Write{WriteRevert}, "planner.Release"},
	{TakenBack, Released, EvSettled, Wait, []Write{WriteLabelsOff, WriteUncordon, WriteDelete}, "planner.Release"},
}

// StateOf is the state a node is in, read from its LatencyNode (nil: none)
// and Node: the planner's view of where the last pass left it. Verdict
// states (Verifying, Tuned, RolledBack) come from the rollout's Class.
func StateOf(ln *v1alpha1.LatencyNode, n *corev1.Node, c Class) State {
	switch {
	case ln == nil:
		return Unselected
	case ln.Spec.Action == v1alpha1.ActionRevert && ln.Spec.Reboot == nil:
		return Reverting
	case ln.Spec.Reboot != nil:
		return recordState(ln.Spec.Reboot)
	case ln.Spec.Action == v1alpha1.ActionBaseline:
		return Baselining
	}
	switch c {
	case ClassPassed:
		return Tuned
	case ClassFailed:
		return RolledBack
	}
	if n != nil && TunedThisBoot(n, ln) {
		return Verifying
	}
	return Applying
}

func recordState(rec *v1alpha1.NodeRebootSpec) State {
	switch {
	case Withdrawn(rec):
		return TakenBack
	case rec.Phase == v1alpha1.RebootDraining:
		return Draining
	case rec.Phase == v1alpha1.RebootRequested:
		return Rebooting
	}
	return Rejoining
}
