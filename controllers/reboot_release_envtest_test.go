package controllers

import (
	"context"
	"fmt"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Managed reboots of nodes that leave the selection, against a real API
// server (the stand-in and the helpers are reboot_envtest_test.go's).

// blockingPDB makes pod (in namespace work, labelled app=pod) impossible to
// evict: a PodDisruptionBudget with no disruption allowed, its status
// written as the disruption controller (not running here) would.
func (e *rebootEnv) blockingPDB(pod string) {
	e.t.Helper()
	ctx := context.Background()
	b := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: "work"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": pod}}}}
	if err := e.c.Create(ctx, b); err != nil {
		e.t.Fatal(err)
	}
	e.until("PDB status written", func() error {
		cur := &policyv1.PodDisruptionBudget{}
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(b), cur); err != nil {
			return err
		}
		cur.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: cur.Generation, CurrentHealthy: 1, DesiredHealthy: 2, ExpectedPods: 1}
		return e.c.Status().Update(ctx, cur)
	})
}

// released waits until node is released (no LatencyNode, no profile
// label) and then until it is uncordoned and without the tuning-pending
// taint.
func (e *rebootEnv) released(node string) {
	e.t.Helper()
	e.until(node+" released", func() error {
		if e.ln(node) != nil || e.node(node).Labels[v1alpha1.ProfileLabel] != "" {
			return fmt.Errorf("LatencyNode %v, labels %v", e.ln(node) != nil, e.node(node).Labels)
		}
		return nil
	})
	e.until(node+" uncordoned and untainted", func() error {
		if n := e.node(node); n.Spec.Unschedulable || hasTaint(n.Spec.Taints, pendingTaint) {
			return fmt.Errorf("unschedulable %v, taints %v", n.Spec.Unschedulable, n.Spec.Taints)
		}
		return nil
	})
}

// TestReleasedNodeWithRebootRecordIsUncordoned: the node controller
// releases a node (its revert done, the LatencyNode deleted) whose
// LatencyNode still holds a reboot record, that is, a node the managed
// reboots cordoned and have not let go. Here the record is Draining (a
// PodDisruptionBudget holds the drain) when the profile goes while the
// manager is down (a person removed its finalizer), so no pass of the
// profile's reboots ever comes to let the node go; the same holds when the
// node controller's finish wins the race against that pass. The node must
// not stay cordoned: the record is the only sign that the cordon is ours,
// and it goes with the LatencyNode.
func TestReleasedNodeWithRebootRecordIsUncordoned(t *testing.T) {
	e := startRebootEnv(t, 1)
	e.nodes("fin", "fin-a")
	e.pod("db-fin-a", "fin-a", nil)
	e.blockingPDB("db-fin-a")
	e.rebootProfile("fin", nil)
	e.phaseIs("fin-a", v1alpha1.RebootDraining)
	e.expectEvent(eventRebootBlocked)
	rev := e.ln("fin-a").Spec.Revision
	e.stop()
	ctx := context.Background()
	if !e.node("fin-a").Spec.Unschedulable {
		t.Fatal("fin-a Draining but not cordoned")
	}
	if err := e.c.Delete(ctx, &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "fin"}}); err != nil {
		t.Fatal(err)
	}
	e.until("finalizer removed by hand", func() error {
		p := e.profile("fin")
		p.Finalizers = nil
		return e.c.Update(ctx, p)
	})
	e.until("profile gone", func() error {
		return gone(&v1alpha1.LatencyProfile{}, "fin")
	})
	e.startManager(1)
	e.released("fin-a")
	if e.sim.rebootCount("fin-a", rev) != 0 {
		t.Error("fin-a rebooted")
	}
	if !e.podExists("db-fin-a") {
		t.Error("db-fin-a evicted despite its budget")
	}
	e.sim.check(1)
}
