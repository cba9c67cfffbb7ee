package loop

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// An in-place resize starting or ending is a pod event the agent acts on:
// a pod's burst yields to kubelet's quota writes while it lasts.
func TestResizeInProgressIsAPodChange(t *testing.T) {
	plain := &corev1.Pod{}
	inProgress := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue, Reason: corev1.PodReasonError},
	}}}
	pending := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred},
	}}}
	if r, pl, pe := resizing(inProgress), resizing(plain), resizing(pending); !r || pl || pe {
		t.Fatalf("resizing: in progress %v, plain %v, pending %v; want only the one kubelet is actuating", r, pl, pe)
	}
	p := podChanged()
	if !p.Update(event.UpdateEvent{ObjectOld: plain, ObjectNew: inProgress}) || !p.Update(event.UpdateEvent{ObjectOld: inProgress, ObjectNew: plain}) {
		t.Error("a resize starting or ending is not passed")
	}
	if p.Update(event.UpdateEvent{ObjectOld: plain, ObjectNew: pending}) {
		t.Error("a pending resize (nothing written yet) is passed")
	}
}
