package rollout

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// invalidLN is a LatencyNode of profile p at generation 2, reported,
// Applied False for reason, whose settings are in states (omitted more
// left out of the list).
func invalidLN(reason string, omitted int32, states ...v1alpha1.SettingState) *v1alpha1.LatencyNode {
	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "n", Generation: 2},
		Spec: v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionApply, Profile: "p"}}
	ln.Status.ObservedGeneration = 2
	ln.Status.Conditions = []metav1.Condition{{Type: v1alpha1.NodeApplied, Status: metav1.ConditionFalse, Reason: reason}}
	ln.Status.Boot = &v1alpha1.BootStatus{State: v1alpha1.BootBooted, BootID: "b1"}
	for i, s := range states {
		ln.Status.Settings = append(ln.Status.Settings, v1alpha1.SettingResult{Setting: fmt.Sprintf("sysctl/s%d", i), State: s})
	}
	ln.Status.SettingsOmitted = omitted
	return ln
}

// TestRolloutNodeOfInvalidOnlyIsNotAFailure: a node whose only unapplied
// settings are Invalid is judged by its latency, not failed (issue 40);
// a Failed setting still fails it.
func TestRolloutNodeOfInvalidOnlyIsNotAFailure(t *testing.T) {
	ln := invalidLN(v1alpha1.ReasonPartiallyApplied, 0, v1alpha1.SettingInvalid, v1alpha1.SettingApplied)
	if n := nodeOf(ln, false, nil); n.ApplyFailed != "" {
		t.Errorf("Invalid only: ApplyFailed %q", n.ApplyFailed)
	}
	ln = invalidLN(v1alpha1.ReasonPartiallyApplied, 0, v1alpha1.SettingFailed, v1alpha1.SettingInvalid)
	if n := nodeOf(ln, false, nil); n.ApplyFailed == "" {
		t.Error("a Failed setting did not fail the node")
	}
	// A scheduler the kernel ejected (Fallback) fails the node beside an
	// Invalid setting too, whichever reason the agent gave Applied.
	for _, reason := range []string{v1alpha1.ReasonPartiallyApplied, v1alpha1.ReasonSchedulerFallback} {
		ln = invalidLN(reason, 0, v1alpha1.SettingFallback, v1alpha1.SettingInvalid, v1alpha1.SettingApplied)
		if n := nodeOf(ln, false, nil); n.ApplyFailed == "" {
			t.Errorf("%s: a Fallback setting beside an Invalid one did not fail the node", reason)
		}
	}
}
