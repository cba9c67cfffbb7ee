package planner

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Managed reboots of nodes that leave: a node that left the profile's
// selection (or whose LatencyNode another profile took over) is let go,
// uncordoned and its record cleared; a reboot already requested of it is
// taken back first, and the node stays cordoned until that request can no
// longer reboot it; a node released while its LatencyNode still holds a
// record is uncordoned before the record goes with the LatencyNode.

// WithdrawGrace is how long after a reboot request was taken back a node
// whose agent has reported since, still Ready in the same boot, stays
// cordoned before it is let go: a reboot the agent had already asked of
// systemd before it read the withdrawal shows by then (the kubelet's
// graceful node shutdown reports NotReady on the way down, then a new
// boot id).
const WithdrawGrace = time.Minute

// BootTimeoutOf is p's bootTimeout, the default when p is gone.
func BootTimeoutOf(p *v1alpha1.LatencyProfile) time.Duration {
	if p == nil {
		return DefaultBootTimeout
	}
	return LimitsOf(p).Boot
}

// Withdrawn: rec is a reboot request taken back from a node no longer to
// be rebooted (it left the selection, or its spec no longer asks for the
// reboot): phase Draining again (the agent reboots only for Rebooting)
// and still the boot id of the request, which a Draining record that was
// never requested lacks. The node stays cordoned under it until
// RequestSettled.
func Withdrawn(rec *v1alpha1.NodeRebootSpec) bool {
	return rec != nil && rec.Phase == v1alpha1.RebootDraining && rec.BootID != ""
}

// RequestSettled: the reboot request rec (standing, or Withdrawn) can no
// longer start a reboot of n: the node booted anew since it was made (the
// reboot happened); or the agent reported ln's current generation, so it
// read the record as it is now, in the request's boot, and the node has
// stayed Ready WithdrawGrace since rec.Since; or timeout passed since
// rec.Since (an agent that never reports).
func RequestSettled(ln *v1alpha1.LatencyNode, n *corev1.Node, now time.Time, timeout time.Duration) bool {
	rec, b := ln.Spec.Reboot, ln.Status.Boot
	if n == nil || !now.Before(rec.Since.Add(timeout)) {
		return true
	}
	agentBoot, kubeletBoot := "", n.Status.NodeInfo.BootID
	if b != nil {
		agentBoot = b.BootID
	}
	if (agentBoot != "" && agentBoot != rec.BootID) || (kubeletBoot != "" && kubeletBoot != rec.BootID) {
		return true
	}
	return ln.Status.ObservedGeneration >= ln.Generation && ReadyStatus(n) == corev1.ConditionTrue &&
		!now.Before(rec.Since.Add(WithdrawGrace))
}

// RequestOutstanding: ln holds a reboot request (standing, or Withdrawn)
// that may still reboot its node: the node must stay cordoned and its
// LatencyNode stay until it settles (the selection waits before it
// releases the node).
func RequestOutstanding(ln *v1alpha1.LatencyNode, n *corev1.Node, now time.Time, timeout time.Duration) bool {
	rec := ln.Spec.Reboot
	if rec == nil || (rec.Phase != v1alpha1.RebootRequested && !Withdrawn(rec)) {
		return false
	}
	return !RequestSettled(ln, n, now, timeout)
}

// RecordOf: rec was written for a revision of profile (RevisionName: the
// profile's name, "-" and hex digits; BackSuffix after it for a reboot
// back). A LatencyNode taken over by another profile keeps the record of
// the one it left (a tuning write carries the record over: executor.WriteSpec);
// that reboot is not the new profile's to carry on, its node having left
// the selection of the profile it was for.
func RecordOf(rec *v1alpha1.NodeRebootSpec, profile string) bool {
	if len(profile) > 253-revisionSuffix {
		profile = profile[:253-revisionSuffix]
	}
	rest, ok := strings.CutPrefix(strings.TrimSuffix(rec.Revision, BackSuffix), profile+"-")
	if !ok || rest == "" || len(rest) > revisionHash {
		return false
	}
	return strings.Trim(rest, "0123456789abcdef") == ""
}

// nextWithdrawn lets a node go once the request taken back from it has
// settled: rebooted anyway (its agent had read the request) or not
// rebooted and no longer able to. Selected again meanwhile or not, the
// request is not made again for the same record.
func nextWithdrawn(v RebootView) (Act, string) {
	if RequestSettled(v.LN, v.Node, v.Now, v.Limits.Boot) {
		return Finish, "the reboot request taken back settled"
	}
	return Wait, "waiting until the reboot request taken back can no longer reboot the node"
}

// ReleaseStep is what the selection (a profile's pass) does next with a node no
// profile owns any more (it left the selection, lost a tie, or its
// profile was deleted) whose LatencyNode is still there.
type ReleaseStep int

const (
	// ReleaseRevert turns spec.action to Revert: any action but Revert,
	// Baseline included (a node that joined a rollout, or a rolled-back
	// canary, measures on Baseline; only the agent's Reverted says it
	// holds nothing).
	ReleaseRevert ReleaseStep = iota
	// ReleaseHold keeps the LatencyNode, its reboot record and the
	// cordon: a reboot asked of the node may still come.
	ReleaseHold
	// ReleaseFinish takes the labels off, lifts the manager's cordon
	// when the record is still there (UncordonOnRelease) and deletes
	// the LatencyNode.
	ReleaseFinish
	// ReleaseWait waits for the agent's Reverted (or for the node to be
	// unreachable long enough).
	ReleaseWait
)

// ReleaseView is a released node as the selection read it.
type ReleaseView struct {
	LN   *v1alpha1.LatencyNode
	Node *corev1.Node
	Now  time.Time
	// BootTimeout is the bootTimeout of the profile the node leaves
	// (BootTimeoutOf); UnreachableAfter is the manager's timeout after
	// which a NotReady node is released without its agent.
	BootTimeout, UnreachableAfter time.Duration
}

// Release is the selection's next step with a released node: the
// agent reverts first; a node unreachable past the timeout goes without.
func Release(v ReleaseView) ReleaseStep {
	if v.LN.Spec.Action != v1alpha1.ActionRevert {
		return ReleaseRevert
	}
	gone, _ := Unreachable(v.Node, v.Now, v.UnreachableAfter)
	if !gone && RequestOutstanding(v.LN, v.Node, v.Now, v.BootTimeout) {
		return ReleaseHold
	}
	if gone || RevertDone(v.LN) {
		return ReleaseFinish
	}
	return ReleaseWait
}

// UncordonOnRelease: releasing n lifts its cordon first. Its LatencyNode,
// about to be deleted, still holds a reboot record, and n is cordoned with
// the manager's marker: the managed reboots cordoned it (they write the
// record before the cordon and clear it after the uncordon). The profile's
// pass that would let the node go may never come (the profile is gone) or
// come after the deletion, and the node would stay cordoned for good. A
// person's cordon, without the marker, stays.
func UncordonOnRelease(ln *v1alpha1.LatencyNode, n *corev1.Node) bool {
	if ln.Spec.Reboot == nil || n == nil || !n.Spec.Unschedulable {
		return false
	}
	_, ours := n.Annotations[v1alpha1.RebootCordonAnnotation]
	return ours
}
