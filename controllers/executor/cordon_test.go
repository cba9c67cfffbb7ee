package executor

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// TestCordonPatches: the manager's cordon sets spec.unschedulable and its
// marker in one patch; its uncordon lifts only a cordon carrying the
// marker, the marker with it, and leaves a person's cordon alone.
func TestCordonPatches(t *testing.T) {
	want := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{v1alpha1.RebootCordonAnnotation: "gw-1a"}},
		"spec":     map[string]any{"unschedulable": true},
	}
	if got := cordonPatch("gw-1a"); !reflect.DeepEqual(got, want) {
		t.Errorf("cordonPatch = %v, want %v", got, want)
	}
	person := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}
	if got := uncordonPatch(person); got != nil {
		t.Errorf("uncordonPatch of a person's cordon = %v, want none", got)
	}
	ours := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.RebootCordonAnnotation: "gw-1a"}},
		Spec: corev1.NodeSpec{Unschedulable: true}}
	want = map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{v1alpha1.RebootCordonAnnotation: nil}},
		"spec":     map[string]any{"unschedulable": nil},
	}
	if got := uncordonPatch(ours); !reflect.DeepEqual(got, want) {
		t.Errorf("uncordonPatch of the manager's cordon = %v, want %v", got, want)
	}
}
