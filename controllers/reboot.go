package controllers

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Managed reboots (issue 26), the decision half: for one node, what its
// reboot record (LatencyNode spec.reboot) says next. Pure: the reconciler
// (reboot_controller.go) gathers the inputs, reboot_act.go carries the act
// out.
//
// A node's managed reboot, once the rollout moved it to a revision whose
// boot policy is Reboot and its agent staged the arguments:
//
//	(no record) → cordon, Draining → evict its pods → Rebooting (boot id
//	recorded) → the agent reboots → new boot id, rebootedFor == revision,
//	Ready → Verifying → Applied in the new boot and the rollout's verdict
//	→ uncordon, no record.
//
// The record is in the API, so a restarted manager resumes where it was;
// the agent reboots at most once per revision (status.boot.rebootedFor).
//
// A reboot back: after a rollback, a node moved back (to the previous
// revision, or Revert) whose running kernel still holds arguments the agent
// staged for the rolled-back target reports them Unstaged. It is rebooted
// once more through the same phases, its record's revision backRevision of
// the target, and verified by what the agent reports in the new boot: the
// arguments gone (no longer Unstaged) and, under Apply, its tuning Applied.

// rebootAct is what a node's managed reboot does next.
type rebootAct int

const (
	rebootWait     rebootAct = iota // nothing to do until an input changes
	rebootStart                     // record Draining, cordon
	rebootDrain                     // evict what is left on the node
	rebootRequest                   // drained: record Rebooting with the boot id
	rebootVerify                    // back with a new boot: record Verifying
	rebootFinish                    // verified (or nothing to reboot): uncordon, clear
	rebootAbandon                   // drain timed out or the reboot failed: uncordon, clear, pause
	rebootStall                     // did not come back in time: pause, stays cordoned
	rebootWithdraw                  // requested, no longer to be: take the request back, stays cordoned
)

// Defaults of spec.reboot.
const (
	defaultDrainTimeout = 10 * time.Minute
	defaultBootTimeout  = 15 * time.Minute
)

// rebootLimits are a profile's spec.reboot with its defaults.
type rebootLimits struct{ Drain, Boot time.Duration }

func rebootLimitsOf(p *v1alpha1.LatencyProfile) rebootLimits {
	l := rebootLimits{defaultDrainTimeout, defaultBootTimeout}
	if s := p.Spec.Reboot; s != nil {
		if s.DrainTimeout != nil {
			l.Drain = s.DrainTimeout.Duration
		}
		if s.BootTimeout != nil {
			l.Boot = s.BootTimeout.Duration
		}
	}
	return l
}

// rebootsAllowed: the tuning ln holds lets the agent stage and reboot.
func rebootsAllowed(ln *v1alpha1.LatencyNode) bool {
	bp := ln.Spec.Tuning.BootParameters
	return ln.Spec.Action == v1alpha1.ActionApply && bp != nil && bp.Policy == v1alpha1.BootReboot
}

// backSuffix ends the revision of a reboot back (backRevision); a profile
// revision ends in hex digits (revisionName), so the two never meet.
const backSuffix = "-back"

// backRevision is the revision of the reboot that takes a rolled-back
// target's arguments out of a node's kernel: one per target and node.
func backRevision(target string) string {
	if len(target) > 253-len(backSuffix) {
		target = target[:253-len(backSuffix)]
	}
	return target + backSuffix
}

// isBack: rec is a reboot back.
func isBack(rec *v1alpha1.NodeRebootSpec) bool {
	return rec != nil && strings.HasSuffix(rec.Revision, backSuffix)
}

// unstagedForReboot: ln was moved off target (a rollback: the previous
// revision or Revert), its agent reported that spec with arguments it
// staged still in the running kernel (Unstaged), and it has not been
// rebooted back from target yet.
func unstagedForReboot(ln *v1alpha1.LatencyNode, target string) bool {
	b := ln.Status.Boot
	return (ln.Spec.Action == v1alpha1.ActionApply || ln.Spec.Action == v1alpha1.ActionRevert) && ln.Spec.Revision != target &&
		ln.Status.ObservedGeneration >= ln.Generation && b != nil && b.State == v1alpha1.BootUnstaged &&
		b.RebootedFor != backRevision(target)
}

// stagedForReboot: the agent reported ln's current spec with the arguments
// staged in the bootloader and has not rebooted for this revision yet.
// Planned, Failed, Unsupported and Conflict never lead to a cordon.
func stagedForReboot(ln *v1alpha1.LatencyNode) bool {
	b := ln.Status.Boot
	return rebootsAllowed(ln) && ln.Spec.Revision != "" && ln.Status.ObservedGeneration >= ln.Generation &&
		b != nil && b.State == v1alpha1.BootStaged && b.RebootedFor != ln.Spec.Revision
}

// startable: a reboot may start on ln (no record yet) now: the profile
// still selects its node (a node that left the selection is never rebooted
// by us, even in the moment before the node controller turns its spec to
// Revert), the node is Ready and not cordoned (by someone else: a cordoned
// node waits), and it is staged for the target revision (any revision
// after a rollback) or, after a rollback, its kernel still holds the
// target's arguments (Unstaged: the reboot back).
func startable(ln *v1alpha1.LatencyNode, n *corev1.Node, target string, rolledBack, deselected bool) bool {
	if n == nil || deselected || n.Spec.Unschedulable || readyStatus(n) != corev1.ConditionTrue {
		return false
	}
	staged := stagedForReboot(ln) && (ln.Spec.Revision == target || rolledBack)
	return staged || (rolledBack && unstagedForReboot(ln, target))
}

// awaitingReboot: the rollout must wait for ln's reboot before it judges
// the node (its verdict compares the latency before and after the boot):
// it is staged, draining or rebooting. A node in Verifying is judged.
func awaitingReboot(ln *v1alpha1.LatencyNode) bool {
	if r := ln.Spec.Reboot; r != nil {
		return r.Phase != v1alpha1.RebootVerifying
	}
	return stagedForReboot(ln)
}

// rebootView is one node as its reboot decision sees it.
type rebootView struct {
	LN   *v1alpha1.LatencyNode
	Node *corev1.Node // nil: gone
	// Judged: the rollout judges the revision the node rebooted for;
	// Class is its verdict then.
	Judged bool
	Class  nodeClass
	// Drained: no pod left to evict (read only in Draining).
	Drained bool
	// Deselected: the node left the profile's selection.
	Deselected bool
	Limits     rebootLimits
	Now        time.Time
}

// nextReboot is the act for a node that has a reboot record, with the
// reason for events and status.
func nextReboot(v rebootView) (rebootAct, string) {
	rec, ln := v.LN.Spec.Reboot, v.LN
	if rec == nil {
		return rebootWait, ""
	}
	action := ln.Spec.Action == v1alpha1.ActionApply || (isBack(rec) && ln.Spec.Action == v1alpha1.ActionRevert)
	if withdrawn(rec) {
		return nextWithdrawn(v)
	}
	if v.Node == nil || !ln.DeletionTimestamp.IsZero() {
		return rebootFinish, "no longer to be rebooted"
	}
	if rec.Phase == v1alpha1.RebootRequested && (v.Deselected || !action) {
		// The agent may have read the request already: the node stays
		// cordoned until that is settled (nextWithdrawn).
		return rebootWithdraw, "no longer to be rebooted"
	}
	if !action {
		return rebootFinish, "no longer to be rebooted"
	}
	if v.Deselected {
		// A reboot back included: a node that left the selection keeps
		// what its kernel holds until someone else reboots it.
		return rebootFinish, "no longer selected by the profile"
	}
	switch rec.Phase {
	case v1alpha1.RebootDraining:
		return nextDraining(v)
	case v1alpha1.RebootRequested:
		return nextRebooting(v)
	default:
		return nextVerifying(v)
	}
}

// nextDraining asks for the reboot only of a drained node that is still
// cordoned: a node found uncordoned (a manager that stopped between the
// Draining record and the cordon, or a person's uncordon) is cordoned
// again first, and drained after, so nothing is scheduled onto it before
// it reboots.
func nextDraining(v rebootView) (rebootAct, string) {
	rec := v.LN.Spec.Reboot
	if v.Drained && v.Node.Spec.Unschedulable {
		return rebootRequest, "drained"
	}
	if !v.Now.Before(rec.Since.Add(v.Limits.Drain)) {
		return rebootAbandon, fmt.Sprintf("the drain of node %s did not finish within %s; uncordoned, not rebooted", v.LN.Name, v.Limits.Drain)
	}
	return rebootDrain, "draining"
}

func nextRebooting(v rebootView) (rebootAct, string) {
	rec, b := v.LN.Spec.Reboot, v.LN.Status.Boot
	if rebootedBack(v) {
		return rebootVerify, "back with boot " + b.BootID
	}
	if b != nil && b.State == v1alpha1.BootFailed && (b.BootID == rec.BootID || b.BootID == "") &&
		v.LN.Status.ObservedGeneration >= v.LN.Generation {
		return rebootAbandon, fmt.Sprintf("the agent on node %s did not reboot it: %s; uncordoned", v.LN.Name, b.Message)
	}
	if !v.Now.Before(rec.Since.Add(v.Limits.Boot)) {
		if kubelet := v.Node.Status.NodeInfo.BootID; kubelet != "" && kubelet != rec.BootID {
			// Booted anew (the kubelet says so) but the agent never
			// reported it for the revision: the request is spent.
			return bootTimedOut(v, "rebooted but its agent did not report the new boot for "+rec.Revision)
		}
		return rebootStall, fmt.Sprintf("node %s did not come back within %s of the reboot request; it stays cordoned", v.LN.Name, v.Limits.Boot)
	}
	return rebootWait, "rebooting"
}

// rebootedBack: the agent reports a boot other than the one the reboot was
// asked in, made for this revision, and the kubelet is Ready in it.
func rebootedBack(v rebootView) bool {
	rec, b := v.LN.Spec.Reboot, v.LN.Status.Boot
	if b == nil || b.BootID == "" || b.BootID == rec.BootID || b.RebootedFor != rec.Revision {
		return false
	}
	kubelet := v.Node.Status.NodeInfo.BootID
	return readyStatus(v.Node) == corev1.ConditionTrue && (kubelet == "" || kubelet == b.BootID)
}

func nextVerifying(v rebootView) (rebootAct, string) {
	rec, ln := v.LN.Spec.Reboot, v.LN
	if isBack(rec) {
		return nextVerifyingBack(v)
	}
	if ln.Spec.Revision != rec.Revision {
		// The rollout moved the node on (a rollback): done with this
		// boot; the next revision's staging starts its own reboot.
		return rebootFinish, "moved to revision " + ln.Spec.Revision
	}
	if !tunedThisBoot(v.Node, ln) {
		if !v.Now.Before(rec.Since.Add(v.Limits.Boot)) {
			return bootTimedOut(v, "rebooted but did not report its tuning Applied")
		}
		return rebootWait, "waiting for Applied in the new boot"
	}
	if !v.Judged {
		return rebootFinish, "Applied in the new boot"
	}
	switch v.Class {
	case classPassed:
		return rebootFinish, "verified"
	case classFailed:
		return rebootFinish, "failed verification; the rollout acts on it"
	}
	return rebootWait, "verifying"
}

// bootTimedOut is the act for a node that booted anew (Verifying) but
// whose agent did not report what the reboot is judged by within
// bootTimeout. A Ready node is let go (issue 40): uncordoned, its record
// cleared so its reboot slot is free, and the reboots pause for a person
// with the reason; the tuning-pending taint stays on it (its tuning is
// not reported in this boot), so the tier's pods still do not land there.
// A node that is not Ready stays cordoned for a person to look at.
func bootTimedOut(v rebootView, what string) (rebootAct, string) {
	why := fmt.Sprintf("node %s %s within %s", v.LN.Name, what, v.Limits.Boot)
	if readyStatus(v.Node) == corev1.ConditionTrue {
		return rebootAbandon, why + "; uncordoned with the tuning-pending taint kept"
	}
	return rebootStall, why + " and is not Ready; it stays cordoned"
}

// nextVerifyingBack judges a reboot back by the agent's report of the new
// boot: the arguments gone from the running kernel and, under Apply, the
// tuning Applied in it (the taint lifts then).
func nextVerifyingBack(v rebootView) (rebootAct, string) {
	rec, ln, b := v.LN.Spec.Reboot, v.LN, v.LN.Status.Boot
	kubelet := v.Node.Status.NodeInfo.BootID
	reported := ln.Status.ObservedGeneration >= ln.Generation && b != nil && b.BootID != rec.BootID &&
		(kubelet == "" || kubelet == b.BootID)
	if reported && ln.Spec.Action == v1alpha1.ActionApply {
		reported = tunedThisBoot(v.Node, ln)
	}
	switch {
	case !reported && !v.Now.Before(rec.Since.Add(v.Limits.Boot)):
		return bootTimedOut(v, "rebooted to take the rolled-back arguments out but did not report the new boot")
	case !reported:
		return rebootWait, "waiting for the agent's report of the new boot"
	case b.State == v1alpha1.BootUnstaged:
		return rebootAbandon, fmt.Sprintf("node %s rebooted but its kernel still holds the rolled-back arguments: %s; uncordoned", ln.Name, b.Message)
	}
	return rebootFinish, "rebooted without the rolled-back arguments"
}

// rebootCounts is status.reboots from the profile's LatencyNodes after the
// pass's acts (acts: node → the act carried out).
func rebootCounts(lns []*v1alpha1.LatencyNode, acts map[string]rebootAct, target string) v1alpha1.RebootRolloutStatus {
	var st v1alpha1.RebootRolloutStatus
	for _, ln := range lns {
		phase := v1alpha1.RebootPhase("")
		if ln.Spec.Reboot != nil {
			phase = ln.Spec.Reboot.Phase
		}
		switch acts[ln.Name] {
		case rebootStart, rebootWithdraw:
			phase = v1alpha1.RebootDraining
		case rebootRequest:
			phase = v1alpha1.RebootRequested
		case rebootVerify:
			phase = v1alpha1.RebootVerifying
		case rebootFinish, rebootAbandon:
			phase = ""
		}
		b := ln.Status.Boot
		switch {
		case phase == v1alpha1.RebootDraining:
			st.Draining++
		case phase == v1alpha1.RebootRequested:
			st.Rebooting++
		case phase == v1alpha1.RebootVerifying:
			st.Verifying++
		case b != nil && b.RebootedFor == target && ln.Spec.Revision == target:
			st.Rebooted++
		case b != nil && b.RebootedFor == backRevision(target) && b.State != v1alpha1.BootUnstaged:
			st.Rebooted++ // rebooted back after target's rollback
		case rebootsAllowed(ln) && b != nil && (b.State == v1alpha1.BootStaged || b.State == v1alpha1.BootPlanned) && b.RebootedFor != ln.Spec.Revision,
			unstagedForReboot(ln, target):
			st.Pending++
		}
	}
	return st
}

// sortedLatencyNodes are the LatencyNodes of lns that carry profile, by name.
func sortedLatencyNodes(lns map[string]*v1alpha1.LatencyNode, profile string) []*v1alpha1.LatencyNode {
	out := make([]*v1alpha1.LatencyNode, 0, len(lns))
	for _, ln := range lns {
		if ln.Spec.Profile == profile {
			out = append(out, ln)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
