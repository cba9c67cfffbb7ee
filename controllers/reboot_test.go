package controllers

import (
	"context"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

var rebootT0 = time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)

// rebootLN is a LatencyNode at generation 3 holding revision r1 with boot
// policy Reboot, reported, Applied, with boot state st in boot b1.
func rebootLN(st v1alpha1.BootState) *v1alpha1.LatencyNode {
	ln := gateLN(3, metav1.ConditionTrue, "b1")
	ln.Generation = 3
	ln.Spec.Revision = "r1"
	ln.Spec.Tuning.BootParameters = &v1alpha1.BootParametersSpec{Policy: v1alpha1.BootReboot}
	ln.Status.Boot.State = st
	return ln
}

func readyNode(boot string) *corev1.Node {
	n := nodeBooted(boot)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

// cordonedNode is readyNode cordoned, as the manager leaves a node it drains.
func cordonedNode(boot string) *corev1.Node {
	n := readyNode(boot)
	n.Spec.Unschedulable = true
	return n
}

// withRecord gives ln a reboot record for r1 in phase since; one past
// Draining carries the boot it was requested in, b1, as the manager writes
// it (a Draining record never requested has none).
func withRecord(ln *v1alpha1.LatencyNode, phase v1alpha1.RebootPhase, since time.Time) *v1alpha1.LatencyNode {
	ln.Spec.Reboot = &v1alpha1.NodeRebootSpec{Revision: "r1", Phase: phase, Since: metav1.NewTime(since)}
	if phase != v1alpha1.RebootDraining {
		ln.Spec.Reboot.BootID = "b1"
	}
	return ln
}

// TestStagedForRebootNeverOnAStagingFailure: only Staged for the current
// spec, under policy Reboot, not yet rebooted for the revision, leads to a
// cordon.
func TestStagedForRebootNeverOnAStagingFailure(t *testing.T) {
	for _, st := range []v1alpha1.BootState{v1alpha1.BootPlanned, v1alpha1.BootFailed, v1alpha1.BootUnsupported,
		v1alpha1.BootConflict, v1alpha1.BootNotNeeded, v1alpha1.BootBooted} {
		if stagedForReboot(rebootLN(st)) {
			t.Errorf("state %s: staged for reboot", st)
		}
	}
	if !stagedForReboot(rebootLN(v1alpha1.BootStaged)) {
		t.Error("Staged: not staged for reboot")
	}
	old := rebootLN(v1alpha1.BootStaged)
	old.Status.ObservedGeneration = 2
	report := rebootLN(v1alpha1.BootStaged)
	report.Spec.Tuning.BootParameters.Policy = v1alpha1.BootReportOnly
	done := rebootLN(v1alpha1.BootStaged)
	done.Status.Boot.RebootedFor = "r1"
	for name, ln := range map[string]*v1alpha1.LatencyNode{"older report": old, "ReportOnly": report, "rebooted for r1 already": done} {
		if stagedForReboot(ln) {
			t.Errorf("%s: staged for reboot", name)
		}
	}
}

func TestNextReboot(t *testing.T) {
	limits := rebootLimits{Drain: 10 * time.Minute, Boot: 15 * time.Minute}
	back := func() *v1alpha1.LatencyNode {
		ln := withRecord(rebootLN(v1alpha1.BootBooted), v1alpha1.RebootRequested, rebootT0)
		ln.Status.Boot.BootID, ln.Status.Boot.RebootedFor = "b2", "r1"
		return ln
	}
	failed := withRecord(rebootLN(v1alpha1.BootFailed), v1alpha1.RebootRequested, rebootT0)
	verifying := func(boot string) *v1alpha1.LatencyNode {
		ln := withRecord(rebootLN(v1alpha1.BootBooted), v1alpha1.RebootVerifying, rebootT0)
		ln.Status.Boot.BootID, ln.Status.Boot.RebootedFor = boot, "r1"
		return ln
	}
	// Issue 40: one setting the kernel refused as Invalid does not keep
	// the reboot from verifying.
	invalidOnly := verifying("b2")
	invalidOnly.Status.Conditions[0] = metav1.Condition{Type: v1alpha1.NodeApplied, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonPartiallyApplied}
	invalidOnly.Status.Settings = []v1alpha1.SettingResult{{Setting: "sysctl/net.core.busy_poll", State: v1alpha1.SettingInvalid},
		{Setting: "sysctl/kernel.sched_autogroup_enabled", State: v1alpha1.SettingApplied}}
	movedOn := verifying("b2")
	movedOn.Spec.Revision = "r0"
	reverting := withRecord(rebootLN(v1alpha1.BootStaged), v1alpha1.RebootDraining, rebootT0)
	reverting.Spec.Action = v1alpha1.ActionRevert
	notReady := readyNode("b2")
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	for _, tc := range []struct {
		name   string
		v      rebootView
		want   rebootAct
		paused bool
	}{
		{"no record", rebootView{LN: rebootLN(v1alpha1.BootStaged), Node: readyNode("b1")}, rebootWait, false},
		{"deselected mid-drain", rebootView{LN: reverting, Node: readyNode("b1")}, rebootFinish, false},
		{"node gone", rebootView{LN: withRecord(rebootLN(v1alpha1.BootStaged), v1alpha1.RebootDraining, rebootT0)}, rebootFinish, false},
		{"pods left", rebootView{LN: withRecord(rebootLN(v1alpha1.BootStaged), v1alpha1.RebootDraining, rebootT0), Node: cordonedNode("b1"),
			Now: rebootT0.Add(9 * time.Minute)}, rebootDrain, false},
		{"drained", rebootView{LN: withRecord(rebootLN(v1alpha1.BootStaged), v1alpha1.RebootDraining, rebootT0), Node: cordonedNode("b1"),
			Drained: true, Now: rebootT0.Add(11 * time.Minute)}, rebootRequest, false},
		// A manager that stopped between the Draining record and the
		// cordon, or a person's uncordon: cordoned again before the
		// reboot, never asked to reboot uncordoned.
		{"drained but not cordoned", rebootView{LN: withRecord(rebootLN(v1alpha1.BootStaged), v1alpha1.RebootDraining, rebootT0), Node: readyNode("b1"),
			Drained: true, Now: rebootT0.Add(time.Minute)}, rebootDrain, false},
		{"drain timed out", rebootView{LN: withRecord(rebootLN(v1alpha1.BootStaged), v1alpha1.RebootDraining, rebootT0), Node: cordonedNode("b1"),
			Now: rebootT0.Add(10 * time.Minute)}, rebootAbandon, true},
		{"not rebooted yet", rebootView{LN: withRecord(rebootLN(v1alpha1.BootStaged), v1alpha1.RebootRequested, rebootT0), Node: readyNode("b1"),
			Now: rebootT0.Add(time.Minute)}, rebootWait, false},
		{"back, Ready, same boot as kubelet", rebootView{LN: back(), Node: readyNode("b2"), Now: rebootT0.Add(time.Minute)}, rebootVerify, false},
		{"back but not Ready", rebootView{LN: back(), Node: notReady, Now: rebootT0.Add(time.Minute)}, rebootWait, false},
		{"agent's boot is not the kubelet's", rebootView{LN: back(), Node: readyNode("b3"), Now: rebootT0.Add(time.Minute)}, rebootWait, false},
		{"never came back", rebootView{LN: withRecord(rebootLN(v1alpha1.BootStaged), v1alpha1.RebootRequested, rebootT0), Node: notReady,
			Now: rebootT0.Add(15 * time.Minute)}, rebootStall, true},
		{"agent could not reboot", rebootView{LN: failed, Node: readyNode("b1"), Now: rebootT0.Add(time.Minute)}, rebootAbandon, true},
		{"verifying: Applied in the new boot, no rollout", rebootView{LN: verifying("b2"), Node: readyNode("b2"), Now: rebootT0}, rebootFinish, false},
		{"verifying: Applied of the old boot", rebootView{LN: verifying("b1"), Node: readyNode("b2"), Now: rebootT0}, rebootWait, false},
		// Issue 40: past bootTimeout a rebooted node that is Ready is
		// let go (uncordoned, its slot free, the taint kept) and the
		// reboots pause; one not Ready stays cordoned.
		{"verifying: never Applied, Ready", rebootView{LN: verifying("b1"), Node: readyNode("b2"), Now: rebootT0.Add(16 * time.Minute)}, rebootAbandon, true},
		{"verifying: never Applied, not Ready", rebootView{LN: verifying("b1"), Node: notReady, Now: rebootT0.Add(16 * time.Minute)}, rebootStall, true},
		{"rebooted, agent silent, Ready", rebootView{LN: withRecord(rebootLN(v1alpha1.BootStaged), v1alpha1.RebootRequested, rebootT0), Node: readyNode("b2"),
			Now: rebootT0.Add(15 * time.Minute)}, rebootAbandon, true},
		{"rebooted, agent silent, before bootTimeout", rebootView{LN: withRecord(rebootLN(v1alpha1.BootStaged), v1alpha1.RebootRequested, rebootT0), Node: readyNode("b2"),
			Now: rebootT0.Add(14 * time.Minute)}, rebootWait, false},
		{"not rebooted past bootTimeout, Ready", rebootView{LN: withRecord(rebootLN(v1alpha1.BootStaged), v1alpha1.RebootRequested, rebootT0), Node: readyNode("b1"),
			Now: rebootT0.Add(15 * time.Minute)}, rebootStall, true},
		{"verifying: Applied but one Invalid, no rollout", rebootView{LN: invalidOnly, Node: readyNode("b2"), Now: rebootT0}, rebootFinish, false},
		{"verifying: window open", rebootView{LN: verifying("b2"), Node: readyNode("b2"), Judged: true, Class: classVerifying, Now: rebootT0}, rebootWait, false},
		{"verifying: passed", rebootView{LN: verifying("b2"), Node: readyNode("b2"), Judged: true, Class: classPassed, Now: rebootT0}, rebootFinish, false},
		{"verifying: regressed", rebootView{LN: verifying("b2"), Node: readyNode("b2"), Judged: true, Class: classFailed, Now: rebootT0}, rebootFinish, false},
		{"verifying: rolled back", rebootView{LN: movedOn, Node: readyNode("b2"), Judged: true, Class: classWaiting, Now: rebootT0}, rebootFinish, false},
	} {
		tc.v.Limits = limits
		got, why := nextReboot(tc.v)
		if got != tc.want {
			t.Errorf("%s: act %d (%s), want %d", tc.name, got, why, tc.want)
		}
		if paused := got == rebootAbandon || got == rebootStall; paused != tc.paused {
			t.Errorf("%s: pauses %v, want %v", tc.name, paused, tc.paused)
		}
	}
}

func TestMaxRebootingFlag(t *testing.T) {
	f, err := parseManagerFlags(nil)
	if err != nil || f.maxRebooting != 1 {
		t.Fatalf("default --max-rebooting = %d (%v), want 1", f.maxRebooting, err)
	}
	if f, err := parseManagerFlags([]string{"--max-rebooting=3"}); err != nil || f.maxRebooting != 3 {
		t.Fatalf("--max-rebooting=3: %d, %v", f.maxRebooting, err)
	}
	if _, err := parseManagerFlags([]string{"--max-rebooting=0"}); err == nil {
		t.Fatal("--max-rebooting=0 accepted: nothing would ever reboot")
	}
}

// TestRebootCounts: status.reboots counts each node once, after the acts
// of the pass.
func TestRebootCounts(t *testing.T) {
	staged := rebootLN(v1alpha1.BootStaged)
	staged.Name = "staged"
	starting := rebootLN(v1alpha1.BootStaged)
	starting.Name = "starting"
	draining := withRecord(rebootLN(v1alpha1.BootStaged), v1alpha1.RebootDraining, rebootT0)
	draining.Name = "draining"
	finishing := withRecord(rebootLN(v1alpha1.BootBooted), v1alpha1.RebootVerifying, rebootT0)
	finishing.Name, finishing.Status.Boot.RebootedFor = "finishing", "r1"
	failed := rebootLN(v1alpha1.BootFailed)
	failed.Name = "failed"
	acts := map[string]rebootAct{"starting": rebootStart, "draining": rebootRequest, "finishing": rebootFinish}
	got := rebootCounts([]*v1alpha1.LatencyNode{staged, starting, draining, finishing, failed}, acts, "r1")
	want := v1alpha1.RebootRolloutStatus{Draining: 1, Rebooting: 1, Rebooted: 1, Pending: 1}
	if got != want {
		t.Errorf("counts = %+v, want %+v", got, want)
	}
}

// TestRebootBack: after a rollback from r2, a node moved back (r1 without
// boot parameters, or Revert) that reports the target's arguments still in
// its kernel (Unstaged) is due a reboot back, once; the reboot back is
// judged by the new boot: the arguments gone and, under Apply, Applied.
func TestRebootBack(t *testing.T) {
	unstaged := func(action v1alpha1.NodeAction) *v1alpha1.LatencyNode {
		ln := rebootLN(v1alpha1.BootUnstaged)
		ln.Spec.Tuning.BootParameters, ln.Spec.Action = nil, action
		if action == v1alpha1.ActionRevert {
			ln.Spec.Revision = ""
		}
		ln.Status.Boot.RebootedFor = "r2"
		return ln
	}
	for _, a := range []v1alpha1.NodeAction{v1alpha1.ActionApply, v1alpha1.ActionRevert} {
		if !unstagedForReboot(unstaged(a), "r2") {
			t.Errorf("%s, Unstaged after the rollback of r2: not due a reboot back", a)
		}
	}
	done := unstaged(v1alpha1.ActionApply)
	done.Status.Boot.RebootedFor = backRevision("r2")
	atTarget := unstaged(v1alpha1.ActionApply)
	atTarget.Spec.Revision = "r2"
	gone := unstaged(v1alpha1.ActionApply)
	gone.Status.Boot.State = v1alpha1.BootNotNeeded
	for name, ln := range map[string]*v1alpha1.LatencyNode{"rebooted back already": done, "holds the target": atTarget, "nothing left": gone} {
		if unstagedForReboot(ln, "r2") {
			t.Errorf("%s: due a reboot back", name)
		}
	}

	limits := rebootLimits{Drain: 10 * time.Minute, Boot: 15 * time.Minute}
	verifying := func(action v1alpha1.NodeAction, st v1alpha1.BootState, boot string) *v1alpha1.LatencyNode {
		ln := unstaged(action)
		ln.Spec.Reboot = &v1alpha1.NodeRebootSpec{Revision: backRevision("r2"), Phase: v1alpha1.RebootVerifying, Since: metav1.NewTime(rebootT0), BootID: "b1"}
		ln.Status.Boot.State, ln.Status.Boot.BootID, ln.Status.Boot.RebootedFor = st, boot, backRevision("r2")
		return ln
	}
	notApplied := verifying(v1alpha1.ActionApply, v1alpha1.BootNotNeeded, "b2")
	notApplied.Status.Conditions = nil
	cases := []struct {
		name string
		v    rebootView
		want rebootAct
	}{
		{"revert: draining goes on", rebootView{LN: func() *v1alpha1.LatencyNode {
			ln := unstaged(v1alpha1.ActionRevert)
			ln.Spec.Reboot = &v1alpha1.NodeRebootSpec{Revision: backRevision("r2"), Phase: v1alpha1.RebootDraining, Since: metav1.NewTime(rebootT0)}
			return ln
		}(), Node: cordonedNode("b1"), Drained: true}, rebootRequest},
		// Rolled back to Revert, then deselected: no longer the
		// profile's to reboot; let go (uncordoned, record cleared).
		{"revert, deselected: let go", rebootView{LN: func() *v1alpha1.LatencyNode {
			ln := unstaged(v1alpha1.ActionRevert)
			ln.Spec.Reboot = &v1alpha1.NodeRebootSpec{Revision: backRevision("r2"), Phase: v1alpha1.RebootDraining, Since: metav1.NewTime(rebootT0)}
			return ln
		}(), Node: cordonedNode("b1"), Drained: true, Deselected: true}, rebootFinish},
		{"back without the arguments, Applied", rebootView{LN: verifying(v1alpha1.ActionApply, v1alpha1.BootNotNeeded, "b2"), Node: readyNode("b2")}, rebootFinish},
		{"reverted, back without the arguments", rebootView{LN: verifying(v1alpha1.ActionRevert, v1alpha1.BootNotNeeded, "b2"), Node: readyNode("b2")}, rebootFinish},
		{"back, not Applied yet", rebootView{LN: notApplied, Node: readyNode("b2")}, rebootWait},
		{"back, not Applied in time, Ready: let go", rebootView{LN: notApplied, Node: readyNode("b2"), Now: rebootT0.Add(time.Hour)}, rebootAbandon},
		{"back, not Applied in time, not Ready", rebootView{LN: notApplied, Node: func() *corev1.Node {
			n := readyNode("b2")
			n.Status.Conditions[0].Status = corev1.ConditionUnknown
			return n
		}(), Now: rebootT0.Add(time.Hour)}, rebootStall},
		{"back still holding them", rebootView{LN: verifying(v1alpha1.ActionApply, v1alpha1.BootUnstaged, "b2"), Node: readyNode("b2")}, rebootAbandon},
	}
	for _, c := range cases {
		c.v.Limits = limits
		if c.v.Now.IsZero() {
			c.v.Now = rebootT0.Add(time.Minute)
		}
		if got, why := nextReboot(c.v); got != c.want {
			t.Errorf("%s: act %d (%s), want %d", c.name, got, why, c.want)
		}
	}
}

// TestRebootRequestedThenDeselected: a node that leaves the selection with
// its reboot requested (a reboot back or not) has the request taken back
// and stays cordoned while the agent may still reboot for it: until the
// node boots anew, or its agent has reported the record as it is now and
// withdrawGrace has passed with the node Ready in the same boot, or the
// boot timeout. Selected again meanwhile, the request is not made again.
func TestRebootRequestedThenDeselected(t *testing.T) {
	limits := rebootLimits{Drain: 10 * time.Minute, Boot: 15 * time.Minute}
	requested := func(rev string) *v1alpha1.LatencyNode {
		ln := withRecord(rebootLN(v1alpha1.BootUnstaged), v1alpha1.RebootRequested, rebootT0)
		ln.Spec.Action, ln.Spec.Reboot.Revision = v1alpha1.ActionRevert, rev
		return ln
	}
	// taken back at T0+1m (generation 4), the agent's report of it (at
	// the reported generation, in boot) or not yet (0).
	takenBack := func(reported int64, boot string) *v1alpha1.LatencyNode {
		ln := requested(backRevision("r1"))
		ln.Generation = 4
		ln.Spec.Reboot.Phase, ln.Spec.Reboot.Since = v1alpha1.RebootDraining, metav1.NewTime(rebootT0.Add(time.Minute))
		if reported > 0 {
			ln.Status.ObservedGeneration, ln.Status.Boot.BootID = reported, boot
		}
		return ln
	}
	reselected := takenBack(3, "b1")
	reselected.Spec.Action = v1alpha1.ActionApply
	notReady := readyNode("b1")
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	at := func(d time.Duration) time.Time { return rebootT0.Add(time.Minute + d) }
	for _, tc := range []struct {
		name string
		v    rebootView
		want rebootAct
	}{
		{"reboot back requested, deselected: taken back", rebootView{LN: requested(backRevision("r1")), Node: cordonedNode("b1"), Deselected: true, Now: at(0)}, rebootWithdraw},
		{"reboot requested, deselected: taken back", rebootView{LN: requested("r1"), Node: cordonedNode("b1"), Deselected: true, Now: at(0)}, rebootWithdraw},
		{"taken back, agent not reported since", rebootView{LN: takenBack(3, "b1"), Node: cordonedNode("b1"), Deselected: true, Now: at(5 * time.Minute)}, rebootWait},
		{"taken back, agent reported, within the grace", rebootView{LN: takenBack(4, "b1"), Node: cordonedNode("b1"), Deselected: true, Now: at(withdrawGrace - time.Second)}, rebootWait},
		{"taken back, agent reported, grace passed", rebootView{LN: takenBack(4, "b1"), Node: cordonedNode("b1"), Deselected: true, Now: at(withdrawGrace)}, rebootFinish},
		{"taken back, going down", rebootView{LN: takenBack(4, "b1"), Node: func() *corev1.Node { n := notReady.DeepCopy(); n.Spec.Unschedulable = true; return n }(), Deselected: true, Now: at(withdrawGrace)}, rebootWait},
		{"taken back, rebooted anyway (kubelet's boot)", rebootView{LN: takenBack(3, "b1"), Node: cordonedNode("b2"), Deselected: true, Now: at(time.Second)}, rebootFinish},
		{"taken back, rebooted anyway (agent's boot)", rebootView{LN: takenBack(4, "b2"), Node: cordonedNode(""), Deselected: true, Now: at(time.Second)}, rebootFinish},
		{"taken back, the agent silent past the boot timeout", rebootView{LN: takenBack(3, "b1"), Node: cordonedNode("b1"), Deselected: true, Now: at(limits.Boot)}, rebootFinish},
		{"taken back, selected again: not asked again", rebootView{LN: reselected, Node: cordonedNode("b1"), Drained: true, Now: at(time.Second)}, rebootWait},
	} {
		tc.v.Limits = limits
		if got, why := nextReboot(tc.v); got != tc.want {
			t.Errorf("%s: act %d (%s), want %d", tc.name, got, why, tc.want)
		}
	}
	// The node controller releases the node only once that settled.
	if !requestOutstanding(requested("r1"), cordonedNode("b1"), rebootT0.Add(withdrawGrace-time.Second), limits.Boot) {
		t.Error("a standing request is not outstanding")
	}
	if !requestOutstanding(takenBack(3, "b1"), cordonedNode("b1"), at(0), limits.Boot) {
		t.Error("a request taken back, unread, is not outstanding")
	}
	if requestOutstanding(takenBack(3, "b1"), cordonedNode("b2"), at(0), limits.Boot) {
		t.Error("a request taken back from a node that rebooted is outstanding")
	}
	if requestOutstanding(withRecord(rebootLN(v1alpha1.BootStaged), v1alpha1.RebootDraining, rebootT0), cordonedNode("b1"), at(0), limits.Boot) {
		t.Error("a Draining record never requested is outstanding")
	}
}

// TestRecordOf: a reboot record belongs to the profile whose revision it
// names (a reboot back's too), not to a profile whose name is a prefix of
// another's.
func TestRecordOf(t *testing.T) {
	long := strings.Repeat("p", 250)
	for _, tc := range []struct {
		rev, profile string
		want         bool
	}{
		{"gateway-0a1b2c3d", "gateway", true},
		{"gateway-0a1b2c3d-back", "gateway", true},
		{"gateway-0a1b2c3d", "edge", false},
		{"a-b-0a1b2c3d", "a", false},
		{"a-0a1b2c3d", "a-b", false},
		{"a-deadbeef-0a1b2c3d", "a", false},
		{revisionName(long, &v1alpha1.TuningSpec{}), long, true},
		{backRevision(revisionName("gateway", &v1alpha1.TuningSpec{})), "gateway", true},
	} {
		if got := recordOf(&v1alpha1.NodeRebootSpec{Revision: tc.rev}, tc.profile); got != tc.want {
			t.Errorf("recordOf(%q, %q) = %v, want %v", tc.rev, tc.profile, got, tc.want)
		}
	}
}

// TestRebootStartsOnlyOnSelectedNodes: a reboot starts on a Ready,
// uncordoned node the profile still selects that is staged for the target
// (or any revision after a rollback) or, after a rollback, Unstaged; never
// on a node that left the selection, whatever its boot state, so a node
// deselected with arguments staged or still in its kernel is not rebooted
// by us (its agent reverts the bootloader; the kernel keeps them until a
// reboot of someone else's).
func TestRebootStartsOnlyOnSelectedNodes(t *testing.T) {
	staged := rebootLN(v1alpha1.BootStaged)
	unstagedBack := rebootLN(v1alpha1.BootUnstaged)
	unstagedBack.Spec.Tuning.BootParameters, unstagedBack.Spec.Revision = nil, "r0"
	unstagedBack.Status.Boot.RebootedFor = "r1"
	deselected := func(ln *v1alpha1.LatencyNode) *v1alpha1.LatencyNode {
		ln = ln.DeepCopy()
		ln.Spec.Action = v1alpha1.ActionRevert
		return ln
	}
	for _, tc := range []struct {
		name       string
		ln         *v1alpha1.LatencyNode
		node       *corev1.Node
		rolledBack bool
		deselected bool
		want       bool
	}{
		{"staged for the target", staged, readyNode("b1"), false, false, true},
		{"staged, cordoned by someone else", staged, cordonedNode("b1"), false, false, false},
		{"staged, not Ready", staged, nodeReady("b1", corev1.ConditionFalse), false, false, false},
		{"staged, deselected", staged, readyNode("b1"), false, true, false},
		{"Unstaged after a rollback", unstagedBack, readyNode("b1"), true, false, true},
		{"Unstaged after a rollback, moved to Revert", deselected(unstagedBack), readyNode("b1"), true, false, true},
		{"Unstaged after a rollback, deselected", deselected(unstagedBack), readyNode("b1"), true, true, false},
		{"Unstaged, no rollback", unstagedBack, readyNode("b1"), false, false, false},
	} {
		if got := startable(tc.ln, tc.node, "r1", tc.rolledBack, tc.deselected); got != tc.want {
			t.Errorf("%s: startable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestRebootBackWaitsForAPerson: after a rollback, the nodes that would be
// rebooted back (Unstaged, or staged for the previous revision) are not
// started until a person annotates the profile with the rolled-back
// revision (issue 40: a rollback on one node's verdict rebooted every
// rebooted node again); the go-ahead for another revision does not count.
func TestRebootBackWaitsForAPerson(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	back := rebootLN(v1alpha1.BootUnstaged)
	back.Name = "back"
	back.Spec.Tuning.BootParameters, back.Spec.Revision = nil, "r0"
	back.Status.Boot.RebootedFor = "r1"
	stagedPrev := rebootLN(v1alpha1.BootStaged)
	stagedPrev.Name, stagedPrev.Spec.Revision = "prev", "r0"
	lns := []*v1alpha1.LatencyNode{back, stagedPrev}
	nodes := map[string]*corev1.Node{"back": readyNode("b1"), "prev": readyNode("b1")}
	for _, tc := range []struct {
		name       string
		annotation string
		started    int
	}{
		{"no go-ahead", "", 0},
		{"go-ahead for another revision", "r9", 0},
		{"go-ahead for r1", "r1", 2},
	} {
		p := &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
		p.Status.Rollout = &v1alpha1.RolloutStatus{Revision: "r1", Phase: v1alpha1.RolloutRolledBack}
		if tc.annotation != "" {
			p.Annotations = map[string]string{v1alpha1.RebootBackAnnotation: tc.annotation}
		}
		r := &rebooter{Client: fake.NewClientBuilder().WithScheme(scheme).Build(), Max: 5}
		acts := map[string]rebootAct{}
		waiting, err := r.chooseStarts(context.Background(), p, lns, nodes, "r1", acts, func(*corev1.Node) bool { return false })
		if err != nil {
			t.Fatal(err)
		}
		if len(acts) != tc.started || len(waiting) != 2-tc.started {
			t.Errorf("%s: started %v, waiting %v; want %d started", tc.name, acts, waiting, tc.started)
		}
		if len(waiting) > 0 && !strings.Contains(backWaitMessage("r1", waiting), v1alpha1.RebootBackAnnotation+"=r1") {
			t.Errorf("%s: the message does not say how to go ahead: %s", tc.name, backWaitMessage("r1", waiting))
		}
	}
	// Not rolled back: a staged node starts without anyone's go-ahead.
	p := &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	staged := rebootLN(v1alpha1.BootStaged)
	r := &rebooter{Client: fake.NewClientBuilder().WithScheme(scheme).Build(), Max: 5}
	acts := map[string]rebootAct{}
	if _, err := r.chooseStarts(context.Background(), p, []*v1alpha1.LatencyNode{staged}, map[string]*corev1.Node{"n": readyNode("b1")}, "r1", acts,
		func(*corev1.Node) bool { return false }); err != nil || acts["n"] != rebootStart {
		t.Errorf("forward reboot: acts %v, err %v", acts, err)
	}
}

// TestInUseForgetsReleasedNodes: a node this manager started whose
// LatencyNode is gone (released with its record by the node controller)
// no longer holds a --max-rebooting slot, even when the cache never showed
// its record (found when the canary gate made the next node stage only
// after the first left).
func TestInUseForgetsReleasedNodes(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	live := rebootLN(v1alpha1.BootStaged)
	live.Name = "live"
	r := &rebooter{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(live).Build(), Max: 1}
	r.markStarted("gone", true)
	r.markStarted("live", true)
	used, err := r.inUse(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if used != 1 {
		t.Errorf("in use %d, want 1 (live, started, record not in the cache yet)", used)
	}
}

// TestRebootBackAllowed: a reboot back waits for a person by default
// (rebootBack unset or Pause) until the profile is annotated with the
// rolled-back revision; rebootBack Automatic needs no go-ahead.
func TestRebootBackAllowed(t *testing.T) {
	profile := func(policy v1alpha1.RebootBackPolicy, goAhead string) *v1alpha1.LatencyProfile {
		p := &v1alpha1.LatencyProfile{Spec: v1alpha1.LatencyProfileSpec{Rollout: &v1alpha1.RolloutSpec{RebootBack: policy}}}
		if goAhead != "" {
			p.Annotations = map[string]string{v1alpha1.RebootBackAnnotation: goAhead}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		p    *v1alpha1.LatencyProfile
		want bool
	}{
		{"no rollout", &v1alpha1.LatencyProfile{}, false},
		{"default", profile("", ""), false},
		{"Pause", profile(v1alpha1.RebootBackPause, ""), false},
		{"Pause, go-ahead for another revision", profile(v1alpha1.RebootBackPause, "r1"), false},
		{"Pause, go-ahead for r2", profile(v1alpha1.RebootBackPause, "r2"), true},
		{"Automatic", profile(v1alpha1.RebootBackAutomatic, ""), true},
	} {
		if got := rebootBackAllowed(tc.p, "r2"); got != tc.want {
			t.Errorf("%s: rebootBackAllowed = %v, want %v", tc.name, got, tc.want)
		}
	}
}
