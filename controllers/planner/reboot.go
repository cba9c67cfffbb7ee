package planner

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Managed reboots (issue 26), the decision half: for one node, what its
// reboot record (LatencyNode spec.reboot) says next. Pure: the reconciler
// (controllers/reboot_controller.go) gathers the inputs,
// controllers/reboot_act.go carries the act out.
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
// once more through the same phases, its record's revision BackRevision of
// the target, and verified by what the agent reports in the new boot: the
// arguments gone (no longer Unstaged) and, under Apply, its tuning Applied.

// Act is what a node's managed reboot does next.
type Act int

const (
	Wait     Act = iota // nothing to do until an input changes
	Start               // record Draining, cordon
	Drain               // evict what is left on the node
	Request             // drained: record Rebooting with the boot id
	Verify              // back with a new boot: record Verifying
	Finish              // verified (or nothing to reboot): uncordon, clear
	Abandon             // drain timed out or the reboot failed: uncordon, clear, pause
	Stall               // did not come back in time: pause, stays cordoned
	Withdraw            // requested, no longer to be: take the request back, stays cordoned
)

var actNames = [...]string{"Wait", "Start", "Drain", "Request", "Verify", "Finish", "Abandon", "Stall", "Withdraw"}

func (a Act) String() string {
	if a < 0 || int(a) >= len(actNames) {
		return "Act(" + strconv.Itoa(int(a)) + ")"
	}
	return actNames[a]
}

// Class is a node's place in the rollout of the target revision (the
// rollout decides it: controllers/rollout; the reboots read it).
type Class int

const (
	ClassWaiting   Class = iota // not reached yet
	ClassVerifying              // holds the target, not judged yet
	ClassPassed
	ClassFailed
)

// Defaults of spec.reboot.
const (
	DefaultDrainTimeout = 10 * time.Minute
	DefaultBootTimeout  = 15 * time.Minute
)

// Limits are a profile's spec.reboot with its defaults.
type Limits struct{ Drain, Boot time.Duration }

func LimitsOf(p *v1alpha1.LatencyProfile) Limits {
	l := Limits{DefaultDrainTimeout, DefaultBootTimeout}
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

// RebootsAllowed: the tuning ln holds lets the agent stage and reboot.
func RebootsAllowed(ln *v1alpha1.LatencyNode) bool {
	bp := ln.Spec.Tuning.BootParameters
	return ln.Spec.Action == v1alpha1.ActionApply && bp != nil && bp.Policy == v1alpha1.BootReboot
}

// BackSuffix ends the revision of a reboot back (BackRevision); a profile
// revision ends in hex digits (RevisionName), so the two never meet.
const BackSuffix = "-back"

// BackRevision is the revision of the reboot that takes a rolled-back
// target's arguments out of a node's kernel: one per target and node.
func BackRevision(target string) string {
	if len(target) > 253-len(BackSuffix) {
		target = target[:253-len(BackSuffix)]
	}
	return target + BackSuffix
}

// IsBack: rec is a reboot back.
func IsBack(rec *v1alpha1.NodeRebootSpec) bool {
	return rec != nil && strings.HasSuffix(rec.Revision, BackSuffix)
}

// UnstagedForReboot: ln was moved off target (a rollback: the previous
// revision or Revert), its agent reported that spec with arguments it
// staged still in the running kernel (Unstaged), and it has not been
// rebooted back from target yet.
func UnstagedForReboot(ln *v1alpha1.LatencyNode, target string) bool {
	b := ln.Status.Boot
	return (ln.Spec.Action == v1alpha1.ActionApply || ln.Spec.Action == v1alpha1.ActionRevert) && ln.Spec.Revision != target &&
		ln.Status.ObservedGeneration >= ln.Generation && b != nil && b.State == v1alpha1.BootUnstaged &&
		b.RebootedFor != BackRevision(target)
}

// StagedForReboot: the agent reported ln's current spec with the arguments
// staged in the bootloader and has not rebooted for this revision yet.
// Planned, Failed, Unsupported and Conflict never lead to a cordon.
func StagedForReboot(ln *v1alpha1.LatencyNode) bool {
	b := ln.Status.Boot
	return RebootsAllowed(ln) && ln.Spec.Revision != "" && ln.Status.ObservedGeneration >= ln.Generation &&
		b != nil && b.State == v1alpha1.BootStaged && b.RebootedFor != ln.Spec.Revision
}

// Startable: a reboot may start on ln (no record yet) now: the profile
// still selects its node (a node that left the selection is never rebooted
// by us, even in the moment before the selection turns its spec to
// Revert), the node is Ready and not cordoned (by someone else: a cordoned
// node waits), and it is staged for the target revision (any revision
// after a rollback) or, after a rollback, its kernel still holds the
// target's arguments (Unstaged: the reboot back).
func Startable(ln *v1alpha1.LatencyNode, n *corev1.Node, target string, rolledBack, deselected bool) bool {
	if n == nil || deselected || n.Spec.Unschedulable || ReadyStatus(n) != corev1.ConditionTrue {
		return false
	}
	staged := StagedForReboot(ln) && (ln.Spec.Revision == target || rolledBack)
	return staged || (rolledBack && UnstagedForReboot(ln, target))
}

// AwaitingReboot: the rollout must wait for ln's reboot before it judges
// the node (its verdict compares the latency before and after the boot):
// it is staged, draining or rebooting. A node in Verifying is judged.
func AwaitingReboot(ln *v1alpha1.LatencyNode) bool {
	if r := ln.Spec.Reboot; r != nil {
		return r.Phase != v1alpha1.RebootVerifying
	}
	return StagedForReboot(ln)
}

// RebootView is one node as its reboot decision sees it.
type RebootView struct {
	LN   *v1alpha1.LatencyNode
	Node *corev1.Node // nil: gone
	// Judged: the rollout judges the revision the node rebooted for;
	// Class is its verdict then.
	Judged bool
	Class  Class
	// Drained: no pod left to evict (read only in Draining).
	Drained bool
	// Deselected: the node left the profile's selection.
	Deselected bool
	Limits     Limits
	Now        time.Time
}

// ViewOf is the view of ln's reboot record in a pass of profile p:
// deselected says the node left p's selection (a label changed, a profile
// of higher priority or a tie, p deleted); a record p did not write (the
// LatencyNode was taken over and kept the record of the profile it left:
// RecordOf) is one of a node that left p too. classes are the rollout's
// classes of p's nodes (nil when the rollout did not run); the reboot is
// judged by the rollout only for the record of p's target revision.
func ViewOf(p *v1alpha1.LatencyProfile, target string, ln *v1alpha1.LatencyNode, n *corev1.Node, deselected bool,
	classes map[string]Class, now time.Time) RebootView {
	v := RebootView{LN: ln, Node: n, Limits: LimitsOf(p), Now: now}
	v.Deselected = deselected || !RecordOf(ln.Spec.Reboot, p.Name)
	v.Class, v.Judged = classes[ln.Name]
	v.Judged = v.Judged && p.Spec.Rollout != nil && ln.Spec.Reboot.Revision == target
	return v
}

// NextReboot is the act for a node that has a reboot record, with the
// reason for events and status.
func NextReboot(v RebootView) (Act, string) {
	rec, ln := v.LN.Spec.Reboot, v.LN
	if rec == nil {
		return Wait, ""
	}
	action := ln.Spec.Action == v1alpha1.ActionApply || (IsBack(rec) && ln.Spec.Action == v1alpha1.ActionRevert)
	if Withdrawn(rec) {
		return nextWithdrawn(v)
	}
	if v.Node == nil || !ln.DeletionTimestamp.IsZero() {
		return Finish, "no longer to be rebooted"
	}
	if rec.Phase == v1alpha1.RebootRequested && (v.Deselected || !action) {
		// The agent may have read the request already: the node stays
		// cordoned until that is settled (nextWithdrawn).
		return Withdraw, "no longer to be rebooted"
	}
	if !action {
		return Finish, "no longer to be rebooted"
	}
	if v.Deselected {
		// A reboot back included: a node that left the selection keeps
		// what its kernel holds until someone else reboots it.
		return Finish, "no longer selected by the profile"
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
func nextDraining(v RebootView) (Act, string) {
	rec := v.LN.Spec.Reboot
	if v.Drained && v.Node.Spec.Unschedulable {
		return Request, "drained"
	}
	if !v.Now.Before(rec.Since.Add(v.Limits.Drain)) {
		return Abandon, fmt.Sprintf("the drain of node %s did not finish within %s; uncordoned, not rebooted", v.LN.Name, v.Limits.Drain)
	}
	return Drain, "draining"
}

func nextRebooting(v RebootView) (Act, string) {
	rec, b := v.LN.Spec.Reboot, v.LN.Status.Boot
	if rebootedBack(v) {
		return Verify, "back with boot " + b.BootID
	}
	if b != nil && b.State == v1alpha1.BootFailed && (b.BootID == rec.BootID || b.BootID == "") &&
		v.LN.Status.ObservedGeneration >= v.LN.Generation {
		return Abandon, fmt.Sprintf("the agent on node %s did not reboot it: %s; uncordoned", v.LN.Name, b.Message)
	}
	if !v.Now.Before(rec.Since.Add(v.Limits.Boot)) {
		if kubelet := v.Node.Status.NodeInfo.BootID; kubelet != "" && kubelet != rec.BootID {
			// Booted anew (the kubelet says so) but the agent never
			// reported it for the revision: the request is spent.
			return bootTimedOut(v, "rebooted but its agent did not report the new boot for "+rec.Revision)
		}
		return Stall, fmt.Sprintf("node %s did not come back within %s of the reboot request; it stays cordoned", v.LN.Name, v.Limits.Boot)
	}
	return Wait, "rebooting"
}

// rebootedBack: the agent reports a boot other than the one the reboot was
// asked in, made for this revision, and the kubelet is Ready in it.
func rebootedBack(v RebootView) bool {
	rec, b := v.LN.Spec.Reboot, v.LN.Status.Boot
	if b == nil || b.BootID == "" || b.BootID == rec.BootID || b.RebootedFor != rec.Revision {
		return false
	}
	kubelet := v.Node.Status.NodeInfo.BootID
	return ReadyStatus(v.Node) == corev1.ConditionTrue && (kubelet == "" || kubelet == b.BootID)
}

func nextVerifying(v RebootView) (Act, string) {
	rec, ln := v.LN.Spec.Reboot, v.LN
	if IsBack(rec) {
		return nextVerifyingBack(v)
	}
	if ln.Spec.Revision != rec.Revision {
		// The rollout moved the node on (a rollback): done with this
		// boot; the next revision's staging starts its own reboot.
		return Finish, "moved to revision " + ln.Spec.Revision
	}
	if !TunedThisBoot(v.Node, ln) {
		if !v.Now.Before(rec.Since.Add(v.Limits.Boot)) {
			return bootTimedOut(v, "rebooted but did not report its tuning Applied")
		}
		return Wait, "waiting for Applied in the new boot"
	}
	if !v.Judged {
		return Finish, "Applied in the new boot"
	}
	switch v.Class {
	case ClassPassed:
		return Finish, "verified"
	case ClassFailed:
		return Finish, "failed verification; the rollout acts on it"
	}
	return Wait, "verifying"
}

// bootTimedOut is the act for a node that booted anew (Verifying) but
// whose agent did not report what the reboot is judged by within
// bootTimeout. A Ready node is let go (issue 40): uncordoned, its record
// cleared so its reboot slot is free, and the reboots pause for a person
// with the reason; the tuning-pending taint stays on it (its tuning is
// not reported in this boot), so the tier's pods still do not land there.
// A node that is not Ready stays cordoned for a person to look at.
func bootTimedOut(v RebootView, what string) (Act, string) {
	why := fmt.Sprintf("node %s %s within %s", v.LN.Name, what, v.Limits.Boot)
	if ReadyStatus(v.Node) == corev1.ConditionTrue {
		return Abandon, why + "; uncordoned with the tuning-pending taint kept"
	}
	return Stall, why + " and is not Ready; it stays cordoned"
}

// nextVerifyingBack judges a reboot back by the agent's report of the new
// boot: the arguments gone from the running kernel and, under Apply, the
// tuning Applied in it (the taint lifts then).
func nextVerifyingBack(v RebootView) (Act, string) {
	rec, ln, b := v.LN.Spec.Reboot, v.LN, v.LN.Status.Boot
	kubelet := v.Node.Status.NodeInfo.BootID
	reported := ln.Status.ObservedGeneration >= ln.Generation && b != nil && b.BootID != rec.BootID &&
		(kubelet == "" || kubelet == b.BootID)
	if reported && ln.Spec.Action == v1alpha1.ActionApply {
		reported = TunedThisBoot(v.Node, ln)
	}
	switch {
	case !reported && !v.Now.Before(rec.Since.Add(v.Limits.Boot)):
		return bootTimedOut(v, "rebooted to take the rolled-back arguments out but did not report the new boot")
	case !reported:
		return Wait, "waiting for the agent's report of the new boot"
	case b.State == v1alpha1.BootUnstaged:
		return Abandon, fmt.Sprintf("node %s rebooted but its kernel still holds the rolled-back arguments: %s; uncordoned", ln.Name, b.Message)
	}
	return Finish, "rebooted without the rolled-back arguments"
}

// RebootCounts is status.reboots from the profile's LatencyNodes after the
// pass's acts (acts: node → the act carried out).
func RebootCounts(lns []*v1alpha1.LatencyNode, acts map[string]Act, target string) v1alpha1.RebootRolloutStatus {
	var st v1alpha1.RebootRolloutStatus
	for _, ln := range lns {
		phase := v1alpha1.RebootPhase("")
		if ln.Spec.Reboot != nil {
			phase = ln.Spec.Reboot.Phase
		}
		switch acts[ln.Name] {
		case Start, Withdraw:
			phase = v1alpha1.RebootDraining
		case Request:
			phase = v1alpha1.RebootRequested
		case Verify:
			phase = v1alpha1.RebootVerifying
		case Finish, Abandon:
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
		case b != nil && b.RebootedFor == BackRevision(target) && b.State != v1alpha1.BootUnstaged:
			st.Rebooted++ // rebooted back after target's rollback
		case RebootsAllowed(ln) && b != nil && (b.State == v1alpha1.BootStaged || b.State == v1alpha1.BootPlanned) && b.RebootedFor != ln.Spec.Revision,
			UnstagedForReboot(ln, target):
			st.Pending++
		}
	}
	return st
}

// SortedLatencyNodes are the LatencyNodes of lns that carry profile, by name.
func SortedLatencyNodes(lns map[string]*v1alpha1.LatencyNode, profile string) []*v1alpha1.LatencyNode {
	out := make([]*v1alpha1.LatencyNode, 0, len(lns))
	for _, ln := range lns {
		if ln.Spec.Profile == profile {
			out = append(out, ln)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
