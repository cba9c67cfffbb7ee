package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"latencytier.io/latencytier/api/v1alpha1"
)

func TestProfileIntentChanged(t *testing.T) {
	base := v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 3, ResourceVersion: "10"}}
	now := metav1.Now()
	tests := []profileUpdate{
		{"resync", func(*v1alpha1.LatencyProfile) {}, false},
		{"status only", func(p *v1alpha1.LatencyProfile) { p.ResourceVersion = "11"; p.Status.Matched = 7 }, false},
		{"labels only", func(p *v1alpha1.LatencyProfile) { p.ResourceVersion = "11"; p.Labels = map[string]string{"a": "b"} }, false},
		{"spec", func(p *v1alpha1.LatencyProfile) { p.ResourceVersion = "11"; p.Generation = 4 }, true},
		{"deletion started", func(p *v1alpha1.LatencyProfile) { p.ResourceVersion = "11"; p.DeletionTimestamp = &now }, true},
	}
	pred := profileIntentChanged()
	checkProfileUpdates(t, pred, base, tests)
	if !pred.Create(event.CreateEvent{Object: base.DeepCopy()}) || !pred.Delete(event.DeleteEvent{Object: base.DeepCopy()}) {
		t.Error("creation and deletion must pass")
	}
}

// TestProfileOwnStatusRunsNoPass: the profile reconciler's own status
// write coming back must not reconcile the profile again (one more pass
// over all its nodes after every write); a status someone else wrote, and
// what the reconcile acts on, must.
func TestProfileOwnStatusRunsNoPass(t *testing.T) {
	base := v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 3, ResourceVersion: "10"}}
	now := metav1.Now()
	g := newStatusGate(time.Second, nil)
	g.wroteVersion("p", "11")
	tests := []profileUpdate{
		{"its own status write", func(p *v1alpha1.LatencyProfile) { p.ResourceVersion = "11"; p.Status.Matched = 7 }, false},
		{"a status someone else wrote", func(p *v1alpha1.LatencyProfile) { p.ResourceVersion = "12"; p.Status.Matched = 7 }, true},
		{"resync", func(*v1alpha1.LatencyProfile) {}, true},
		{"finalizer added", func(p *v1alpha1.LatencyProfile) {
			p.ResourceVersion = "11"
			p.Finalizers = []string{v1alpha1.RevertFinalizer}
		}, true},
		{"spec", func(p *v1alpha1.LatencyProfile) { p.ResourceVersion = "11"; p.Generation = 4 }, true},
		{"deletion started", func(p *v1alpha1.LatencyProfile) { p.ResourceVersion = "11"; p.DeletionTimestamp = &now }, true},
	}
	checkProfileUpdates(t, notOwnStatus(g), base, tests)
}

// profileUpdate is an update of a profile and whether a predicate passes it.
type profileUpdate struct {
	name   string
	change func(p *v1alpha1.LatencyProfile)
	want   bool
}

// checkProfileUpdates runs pred on base → base changed by each case.
func checkProfileUpdates(t *testing.T, pred predicate.Predicate, base v1alpha1.LatencyProfile, tests []profileUpdate) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newP := base.DeepCopy()
			tt.change(newP)
			if got := pred.Update(event.UpdateEvent{ObjectOld: base.DeepCopy(), ObjectNew: newP}); got != tt.want {
				t.Errorf("Update = %v, want %v", got, tt.want)
			}
		})
	}
}
