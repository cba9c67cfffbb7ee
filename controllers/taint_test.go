package controllers

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// gateLN is a LatencyNode at generation 2 applying profile p.
func gateLN(observed int64, applied metav1.ConditionStatus, boot string) *v1alpha1.LatencyNode {
	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "n", Generation: 2},
		Spec: v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionApply, Profile: "p"}}
	ln.Status.ObservedGeneration = observed
	if applied != "" {
		ln.Status.Conditions = []metav1.Condition{{Type: v1alpha1.NodeApplied, Status: applied}}
	}
	if boot != "" {
		ln.Status.Boot = &v1alpha1.BootStatus{State: v1alpha1.BootBooted, BootID: boot}
	}
	return ln
}

func tainted(n *corev1.Node) *corev1.Node {
	n.Spec.Taints = []corev1.Taint{pendingTaint}
	return n
}

func nodeBooted(boot string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	n.Status.NodeInfo.BootID = boot
	return n
}

func nodeReady(boot string, st corev1.ConditionStatus) *corev1.Node {
	n := nodeBooted(boot)
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
	return n
}

func TestWantsPendingTaint(t *testing.T) {
	reverting := gateLN(2, metav1.ConditionFalse, "b1")
	reverting.Spec.Action = v1alpha1.ActionRevert
	baseline := gateLN(2, metav1.ConditionFalse, "b1")
	baseline.Spec.Action = v1alpha1.ActionBaseline
	deleting := gateLN(1, "", "")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		ln   *v1alpha1.LatencyNode
		want bool
	}{
		{"not selected: no LatencyNode", nodeBooted("b1"), nil, false},
		{"deselected: reverting", nodeBooted("b1"), reverting, false},
		{"LatencyNode being deleted", nodeBooted("b1"), deleting, false},
		{"just selected: nothing reported", nodeBooted("b1"), gateLN(0, "", ""), true},
		// Untainted and Applied in this boot: a spec written since (a
		// rollout move, a reboot record) does not put the taint back.
		{"untainted, Applied for an older generation in this boot", nodeBooted("b1"), gateLN(1, metav1.ConditionTrue, "b1"), false},
		{"failed to apply", nodeBooted("b1"), gateLN(2, metav1.ConditionFalse, "b1"), true},
		{"measuring its baseline (nothing tuned)", nodeBooted("b1"), baseline, true},
		{"Applied in this boot", nodeBooted("b1"), gateLN(2, metav1.ConditionTrue, "b1"), false},
		{"Applied in the previous boot", nodeBooted("b2"), gateLN(2, metav1.ConditionTrue, "b1"), true},
		{"Applied, no boot reported, kubelet reports one", nodeBooted("b1"), gateLN(2, metav1.ConditionTrue, ""), true},
		{"Applied, no boot id anywhere", nodeBooted(""), gateLN(2, metav1.ConditionTrue, ""), false},
		{"tainted, Applied for an older generation in this boot", tainted(nodeBooted("b1")), gateLN(1, metav1.ConditionTrue, "b1"), true},
		{"tainted, Applied for this generation in this boot", tainted(nodeBooted("b1")), gateLN(2, metav1.ConditionTrue, "b1"), false},
		{"tainted, Applied in the previous boot", tainted(nodeBooted("b2")), gateLN(2, metav1.ConditionTrue, "b1"), true},
		{"tainted, deselected", tainted(nodeBooted("b1")), reverting, false},
		// Down (an unplanned reboot on its way): tainted before the
		// kubelet can report the new boot Ready.
		{"Applied in this boot, NotReady", nodeReady("b1", corev1.ConditionFalse), gateLN(2, metav1.ConditionTrue, "b1"), true},
		{"Applied in this boot, Ready Unknown", nodeReady("b1", corev1.ConditionUnknown), gateLN(2, metav1.ConditionTrue, "b1"), true},
		{"Applied in this boot, Ready again", tainted(nodeReady("b1", corev1.ConditionTrue)), gateLN(2, metav1.ConditionTrue, "b1"), false},
		{"NotReady, deselected", nodeReady("b1", corev1.ConditionFalse), reverting, false},
	} {
		if got := wantsPendingTaint(tc.node, tc.ln); got != tc.want {
			t.Errorf("%s: wantsPendingTaint = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTrimNodeKeepsTheGateAndCordonInputs(t *testing.T) {
	n := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{pendingTaint}, PodCIDR: "10.0.0.0/24"}}
	n.Status.NodeInfo = corev1.NodeSystemInfo{BootID: "b1", KernelVersion: "6.1"}
	out, err := trimNode(n)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Node)
	if !got.Spec.Unschedulable || !hasTaint(got.Spec.Taints, pendingTaint) || got.Status.NodeInfo.BootID != "b1" {
		t.Errorf("trimmed node lost what the gate reads: %+v %+v", got.Spec, got.Status.NodeInfo)
	}
	if got.Spec.PodCIDR != "" || got.Status.NodeInfo.KernelVersion != "" {
		t.Errorf("trimmed node kept what nothing reads: %+v %+v", got.Spec, got.Status.NodeInfo)
	}
}

// invalidLN is gateLN with Applied False for settings whose states are
// given (issue 40: one bad value must not keep the taint on).
func invalidLN(reason string, omitted int32, states ...v1alpha1.SettingState) *v1alpha1.LatencyNode {
	ln := gateLN(2, metav1.ConditionFalse, "b1")
	ln.Status.Conditions[0].Reason = reason
	for i, s := range states {
		ln.Status.Settings = append(ln.Status.Settings, v1alpha1.SettingResult{Setting: fmt.Sprintf("sysctl/s%d", i), State: s})
	}
	ln.Status.SettingsOmitted = omitted
	return ln
}

func TestInvalidSettingDoesNotHoldTheTaint(t *testing.T) {
	const partial = v1alpha1.ReasonPartiallyApplied
	inv, app, fail := v1alpha1.SettingInvalid, v1alpha1.SettingApplied, v1alpha1.SettingFailed
	unsup, immov, conflict := v1alpha1.SettingUnsupported, v1alpha1.SettingImmovable, v1alpha1.SettingConflict
	for _, tc := range []struct {
		name    string
		ln      *v1alpha1.LatencyNode
		invalid int // settings refusedInvalid names
		want    bool
	}{
		{"one Invalid, the rest applied", invalidLN(partial, 0, inv, app, unsup, immov), 1, false},
		{"two Invalid", invalidLN(partial, 0, inv, inv, app), 2, false},
		{"Invalid and a Conflict", invalidLN(partial, 0, inv, conflict, app), 1, false},
		{"Invalid and Failed", invalidLN(partial, 0, fail, inv, app), 0, true},
		{"Invalid, the rest left out of the list", invalidLN(partial, 300, app, inv), 1, false},
		{"only Invalid listed and some left out: a Failed may hide", invalidLN(partial, 3, inv, inv), 0, true},
		{"Applied False for another reason", invalidLN(v1alpha1.ReasonApplyFailed, 0, inv), 0, true},
		{"PartiallyApplied without an Invalid setting", invalidLN(partial, 0, app), 0, true},
	} {
		if got := len(refusedInvalid(tc.ln)); got != tc.invalid {
			t.Errorf("%s: refusedInvalid names %d settings, want %d", tc.name, got, tc.invalid)
		}
		if got := wantsPendingTaint(tainted(nodeBooted("b1")), tc.ln); got != tc.want {
			t.Errorf("%s: wantsPendingTaint = %v, want %v", tc.name, got, tc.want)
		}
		if got := tunedThisBoot(nodeBooted("b1"), tc.ln); got == tc.want {
			t.Errorf("%s: tunedThisBoot = %v, want %v", tc.name, got, !tc.want)
		}
	}
	// In the previous boot it does not count.
	if !wantsPendingTaint(nodeBooted("b2"), invalidLN(partial, 0, inv)) {
		t.Error("an Invalid-only report of the previous boot lifted the taint")
	}
}
