package controllers

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
)

// TestUncordonSeesItsOwnCordonPastAStaleCache: a reboot starts with its
// record, then the cordon; a drain that times out (or a reboot abandoned)
// soon after may be planned on a cached Node that does not yet show the
// cordon. Uncordon must not take the cache's word that the cordon is not
// the manager's: the record is cleared right after, and a node left
// cordoned with no record is never uncordoned again (the flake of
// TestRebootDrainHonoursPDBAndTimesOut, "pdb-b still cordoned after its
// drain timed out"). A person's cordon (no marker) still stays.
func TestUncordonSeesItsOwnCordonPastAStaleCache(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ours := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "uncordon-stale-ours"}}
	theirs := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "uncordon-stale-theirs"}}
	for _, n := range []*corev1.Node{ours, theirs} {
		if err := k8s.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), n) })
	}
	stale := ours.DeepCopy() // as the cache held it before the cordon
	ex := executor.New(k8s, k8s)
	if err := ex.Cordon(ctx, ours, "rev-1"); err != nil {
		t.Fatal(err)
	}
	theirs.Spec.Unschedulable = true
	if err := k8s.Update(ctx, theirs); err != nil {
		t.Fatal(err)
	}

	wrote, err := ex.Uncordon(ctx, stale)
	if err != nil {
		t.Fatal(err)
	}
	got := &corev1.Node{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: ours.Name}, got); err != nil {
		t.Fatal(err)
	}
	if !wrote || got.Spec.Unschedulable || got.Annotations[v1alpha1.RebootCordonAnnotation] != "" {
		t.Errorf("the manager's cordon seen only by the API server: wrote %v, unschedulable %v, marker %q; want it lifted",
			wrote, got.Spec.Unschedulable, got.Annotations[v1alpha1.RebootCordonAnnotation])
	}

	wrote, err = ex.Uncordon(ctx, theirs.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Name: theirs.Name}, got); err != nil {
		t.Fatal(err)
	}
	if wrote || !got.Spec.Unschedulable {
		t.Errorf("a person's cordon: wrote %v, unschedulable %v; want it left alone", wrote, got.Spec.Unschedulable)
	}
}
