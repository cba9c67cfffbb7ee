package executor

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/planner"
)

func TestWithTaintKeepsOtherTaints(t *testing.T) {
	a := corev1.Taint{Key: "a", Effect: corev1.TaintEffectNoExecute}
	b := corev1.Taint{Key: "b", Value: "x", Effect: corev1.TaintEffectNoSchedule}
	// Our key with another effect is not ours: left alone.
	other := corev1.Taint{Key: v1alpha1.TuningPendingTaint, Effect: corev1.TaintEffectPreferNoSchedule}
	if got := WithTaint([]corev1.Taint{a, b}, planner.PendingTaint, true); !slices.Equal(got, []corev1.Taint{a, b, planner.PendingTaint}) {
		t.Errorf("add: %v", got)
	}
	if got := WithTaint([]corev1.Taint{a, planner.PendingTaint, other, b}, planner.PendingTaint, false); !slices.Equal(got, []corev1.Taint{a, other, b}) {
		t.Errorf("remove: %v", got)
	}
	if got := WithTaint([]corev1.Taint{a, planner.PendingTaint}, planner.PendingTaint, true); got != nil {
		t.Errorf("already there: %v, want no change", got)
	}
	if got := WithTaint([]corev1.Taint{a}, planner.PendingTaint, false); got != nil {
		t.Errorf("already gone: %v, want no change", got)
	}
	if got := WithTaint([]corev1.Taint{planner.PendingTaint}, planner.PendingTaint, false); got == nil || len(got) != 0 {
		t.Errorf("last taint removed: %#v, want an empty list (a change)", got)
	}
}
