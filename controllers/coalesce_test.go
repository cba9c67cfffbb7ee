package controllers

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"latencytier.io/latencytier/api/v1alpha1"
)

func TestStatusGateSpacesWritesPerProfile(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	g := newStatusGate(2*time.Second, func() time.Time { return now })
	if d := g.wait("a"); d != 0 {
		t.Fatalf("first write of a waits %s", d)
	}
	g.wrote("a")
	steps := []struct {
		at      time.Duration
		profile string
		want    time.Duration
	}{
		{0, "a", 2 * time.Second},
		{500 * time.Millisecond, "a", 1500 * time.Millisecond},
		{500 * time.Millisecond, "b", 0}, // another profile has its own gate
		{2 * time.Second, "a", 0},
		{-time.Hour, "a", 0}, // a clock stepped back does not close the gate for an hour
	}
	for _, s := range steps {
		now = t0.Add(s.at)
		if got := g.wait(s.profile); got != s.want {
			t.Errorf("at +%s, %s waits %s, want %s", s.at, s.profile, got, s.want)
		}
	}
	now = t0
	g.forget("a")
	if d := g.wait("a"); d != 0 {
		t.Errorf("a forgotten profile waits %s", d)
	}
	var none *statusGate
	none.wrote("a")
	if d := none.wait("a"); d != 0 {
		t.Errorf("a nil gate waits %s", d)
	}
}

// TestCurrentStatusClosesTheGate: a reconcile that finds the profile's
// status current (the reports changed nothing it shows) closes the gate as
// a write does, so the reports that follow within the interval wait for it
// instead of each reconciling the whole profile at once.
func TestCurrentStatusClosesTheGate(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &profileReconciler{Gate: newStatusGate(2*time.Second, func() time.Time { return now })}
	p := &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "quiet"},
		Status: v1alpha1.LatencyProfileStatus{ObservedGeneration: 1, Matched: 3}}
	if wait, err := r.patchStatus(context.Background(), p, *p.Status.DeepCopy(), false); err != nil || wait != 0 {
		t.Fatalf("patchStatus of a current status = %s, %v", wait, err)
	}
	if d := r.Gate.wait("quiet"); d != 2*time.Second {
		t.Fatalf("the next report waits %s after a reconcile that found the status current, want 2s", d)
	}
}

// TestLatencyNodeReportsWaitForTheGate: while a profile's gate is closed,
// an agent's report, a new LatencyNode (1000 of them as a fleet comes up)
// and a new spec the manager wrote (1000 in a change) are queued for when
// it opens, once; a LatencyNode deleted is not.
func TestLatencyNodeReportsWaitForTheGate(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := newStatusGate(time.Hour, func() time.Time { return now })
	g.wrote("p")
	h := latencyNodeToProfiles(g)
	ln := func(gen int64) *v1alpha1.LatencyNode {
		return &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "n", Generation: gen},
			Spec: v1alpha1.LatencyNodeSpec{Profile: "p"}}
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	ctx := context.Background()
	h.Create(ctx, event.CreateEvent{Object: ln(1)}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: ln(1), ObjectNew: ln(1)}, q)
	if q.Len() != 0 {
		t.Fatalf("%d reconciles queued at once for a create and a report behind a closed gate, want 0", q.Len())
	}
	h.Update(ctx, event.UpdateEvent{ObjectOld: ln(1), ObjectNew: ln(2)}, q)
	if q.Len() != 0 {
		t.Fatalf("%d reconciles queued at once for a spec change behind a closed gate, want 0", q.Len())
	}
	h.Delete(ctx, event.DeleteEvent{Object: ln(2)}, q)
	if q.Len() != 1 {
		t.Fatalf("%d reconciles queued for a deleted LatencyNode, want 1 at once", q.Len())
	}
}

func TestStatusUrgent(t *testing.T) {
	p := &v1alpha1.LatencyProfile{Status: v1alpha1.LatencyProfileStatus{ObservedGeneration: 3, Matched: 4}}
	reports := p.Status
	reports.Matched = 5
	newGen := reports
	newGen.ObservedGeneration = 4
	rollout := reports
	rollout.Rollout = &v1alpha1.RolloutStatus{Phase: v1alpha1.RolloutProgressing}
	progressing := p.DeepCopy()
	progressing.Status.Rollout = &v1alpha1.RolloutStatus{Phase: v1alpha1.RolloutProgressing, Revision: "r1", Updated: 10}
	counted := progressing.Status
	counted.Rollout = &v1alpha1.RolloutStatus{Phase: v1alpha1.RolloutProgressing, Revision: "r1", Updated: 11, Improved: 3}
	complete := progressing.Status
	complete.Rollout = &v1alpha1.RolloutStatus{Phase: v1alpha1.RolloutComplete, Revision: "r1", Updated: 11}
	deleting := p.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	for _, tc := range []struct {
		name string
		p    *v1alpha1.LatencyProfile
		st   v1alpha1.LatencyProfileStatus
		want bool
	}{
		{"node reports only", p, reports, false},
		{"a new generation", p, newGen, true},
		{"the rollout moved", p, rollout, true},
		{"the rollout's counts only", progressing, counted, false},
		{"the rollout completed", progressing, complete, true},
		{"a deletion", deleting, reports, true},
	} {
		if got := statusUrgent(tc.p, tc.st); got != tc.want {
			t.Errorf("%s: urgent = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTrimNodeKeepsWhatTheManagerReads(t *testing.T) {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Unix(5, 0)}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{ProviderID: "x"},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure}, ready},
			Images:     []corev1.ContainerImage{{Names: []string{"img"}}},
			Addresses:  []corev1.NodeAddress{{Address: "10.0.0.1"}},
		},
	}
	out, err := trimNode(n)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Node)
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}},
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("trimmed node = %+v, want %+v", got, want)
	}
	if readyStatus(got) != corev1.ConditionFalse {
		t.Errorf("trimmed node lost its Ready condition")
	}
}
