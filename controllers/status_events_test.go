package controllers

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

func TestStatusEvents(t *testing.T) {
	before := v1alpha1.LatencyProfileStatus{}
	after := v1alpha1.LatencyProfileStatus{Conflicted: 1, Degraded: 2, Applied: 3, WaitingFor: []string{"a"}}
	meta.SetStatusCondition(&after.Conditions, metav1.Condition{Type: v1alpha1.ProfileReady, Status: metav1.ConditionTrue, Reason: "AllNodesApplied"})
	var reasons []string
	for _, e := range statusEvents(before, after) {
		reasons = append(reasons, e.reason)
	}
	want := []string{eventNodeConflict, eventDegraded, eventApplied, eventWaiting}
	if !reflect.DeepEqual(reasons, want) {
		t.Fatalf("events = %v, want %v", reasons, want)
	}
	if got := statusEvents(after, after); len(got) != 0 {
		t.Fatalf("unchanged status produced events %v", got)
	}
	// More contended nodes held back from the contention taint: a
	// warning naming how many and the cap; fewer: none.
	capped := v1alpha1.LatencyProfileStatus{Matched: 8, Contended: 5, ContentionTainted: 2, ContentionHeldBack: 3}
	got := statusEvents(v1alpha1.LatencyProfileStatus{Matched: 8, Contended: 3, ContentionTainted: 2, ContentionHeldBack: 1}, capped)
	if len(got) != 1 || got[0].reason != eventContentionCapped || got[0].typ != corev1.EventTypeWarning ||
		!strings.Contains(got[0].note, "3 contended node(s) held back") || !strings.Contains(got[0].note, "allows 2 of the profile's 8 node(s)") {
		t.Fatalf("held back events = %+v", got)
	}
	if got := statusEvents(capped, v1alpha1.LatencyProfileStatus{Matched: 8, Contended: 2, ContentionTainted: 2}); len(got) != 0 {
		t.Fatalf("fewer held back produced events %v", got)
	}
}
