package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

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
	e.spare("fin")
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

// TestRebootBackRequestedThenDeselected: a node whose reboot back (after a
// regressed rollout's rollback) has been requested (phase Rebooting)
// leaves the profile's selection. Two timings of its agent:
//
//   - late: the agent's pass read the request before the node left and
//     reboots for it after the manager reacted (the real agent asks
//     systemd from what its pass read): the node must still be cordoned
//     then, come back without the arguments, and be released uncordoned
//     and untainted;
//   - not late: the agent had not acted on the request when the manager
//     reacted; it must not reboot afterwards (a node that left is not
//     rebooted by us), and the node is released uncordoned and untainted,
//     the arguments out of the bootloader (the running kernel keeps them
//     until someone else reboots it).
//
// Either way at most one request for the reboot back, and the agent asked
// to reboot only a cordoned node.
func TestRebootBackRequestedThenDeselected(t *testing.T) {
	for _, late := range []bool{true, false} {
		t.Run(fmt.Sprintf("late=%v", late), func(t *testing.T) {
			t.Parallel()
			rebootBackRequestedThenDeselected(t, late)
		})
	}
}

func rebootBackRequestedThenDeselected(t *testing.T, late bool) {
	e := startRebootEnv(t, 1)
	const node = "wd-a"
	e.nodes("wd", node)
	e.spare("wd")
	e.sim.set(func(s *standIn) { s.late[node] = late })
	// The agent does not reboot back until the node left.
	_, r2 := e.regressedRollout("wd", node, true)
	back := backRevision(r2)
	if got := e.sim.rebootCount(node, r2); got != 1 {
		t.Fatalf("%s rebooted %d times for %s, want 1", node, got, r2)
	}
	e.until(node+" asked to reboot back", func() error {
		ln := e.ln(node)
		if rec := ln.Spec.Reboot; rec == nil || rec.Phase != v1alpha1.RebootRequested || rec.Revision != back {
			return fmt.Errorf("record %+v", rec)
		}
		e.sim.mu.Lock()
		defer e.sim.mu.Unlock()
		if late && e.sim.seen[node] == nil {
			return fmt.Errorf("the agent has not read the request yet")
		}
		return nil
	})
	ctx := context.Background()
	e.until(node+" deselected", func() error {
		n := e.node(node)
		delete(n.Labels, "tier")
		return e.c.Update(ctx, n)
	})
	e.until("the manager reacted", func() error {
		ln := e.ln(node)
		if ln == nil {
			return nil
		}
		if ln.Spec.Action != v1alpha1.ActionRevert || (ln.Spec.Reboot != nil && ln.Spec.Reboot.Phase == v1alpha1.RebootRequested) {
			return fmt.Errorf("action %s, record %+v", ln.Spec.Action, ln.Spec.Reboot)
		}
		return nil
	})
	time.Sleep(time.Second) // what the manager does next, before the agent goes on
	e.sim.set(func(s *standIn) { s.holdFor = map[string]bool{} })
	if !late {
		// No reboot comes: the node is let go once its agent has read
		// the request taken back and the grace for a reboot already on
		// its way has passed.
		e.clock.advance(withdrawGrace + time.Second)
	}
	if late {
		e.until(node+" rebooted for the request its agent read", func() error {
			if e.sim.rebootCount(node, back) == 0 {
				return fmt.Errorf("not yet")
			}
			return nil
		})
	}
	e.released(node)
	want := 0
	if late {
		want = 1
	}
	if got := e.sim.rebootCount(node, back); got != want {
		t.Errorf("%s rebooted back %d times, want %d", node, got, want)
	}
	e.sim.mu.Lock()
	staged, booted := e.sim.staged[node], e.sim.booted[node]
	e.sim.mu.Unlock()
	if staged || booted != !late {
		t.Errorf("arguments staged %v, in the running kernel %v (want %v)", staged, booted, !late)
	}
	// Released, it stays so: no record, no cordon comes back.
	time.Sleep(2 * time.Second)
	if n := e.node(node); n.Spec.Unschedulable || e.ln(node) != nil {
		t.Errorf("after release: unschedulable %v, LatencyNode %v", n.Spec.Unschedulable, e.ln(node) != nil)
	}
	e.sim.check(1)
}

// TestRebootTakenOverByAnotherProfileIsLetGo: a node Draining for one
// profile's reboot (a PodDisruptionBudget holds the drain) is taken by
// another profile without boot parameters. Its LatencyNode keeps the
// record through the takeover (a tuning write carries it over). The old
// profile's pass usually lets the node go first; here it never comes (the
// old profile went while the manager was down, its finalizer removed, and
// the new one selects the node from the start), as when the takeover write
// wins that race. The new profile must not carry on the old one's reboot
// (drain the node, ask for a reboot its agent has nothing to stage for,
// pause its own reboots when that times out): the node is let go,
// uncordoned, and tuned by the new profile.
func TestRebootTakenOverByAnotherProfileIsLetGo(t *testing.T) {
	e := startRebootEnv(t, 1)
	e.nodes("tk", "tk-a")
	e.spare("tk")
	e.pod("db-tk-a", "tk-a", nil)
	e.blockingPDB("db-tk-a")
	e.rebootProfile("tk", nil)
	e.phaseIs("tk-a", v1alpha1.RebootDraining)
	e.expectEvent(eventRebootBlocked)
	rev := e.ln("tk-a").Spec.Revision
	e.stop()
	ctx := context.Background()
	if err := e.c.Delete(ctx, &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "tk"}}); err != nil {
		t.Fatal(err)
	}
	e.until("finalizer removed by hand", func() error {
		p := e.profile("tk")
		p.Finalizers = nil
		return e.c.Update(ctx, p)
	})
	e.until("profile gone", func() error { return gone(&v1alpha1.LatencyProfile{}, "tk") })
	next := &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "tk-next"},
		Spec: v1alpha1.LatencyProfileSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "tk"}},
			TuningSpec:   v1alpha1.TuningSpec{Scheduler: &v1alpha1.SchedulerSpec{Autogroup: ptr.To(v1alpha1.Disabled)}},
		}}
	if err := e.c.Create(ctx, next); err != nil {
		t.Fatal(err)
	}
	e.startManager(1)
	e.until("tk-a taken over, let go and tuned", func() error {
		ln, n := e.ln("tk-a"), e.node("tk-a")
		if ln == nil || ln.Spec.Profile != "tk-next" || ln.Spec.Reboot != nil || n.Spec.Unschedulable ||
			hasTaint(n.Spec.Taints, pendingTaint) {
			var rec *v1alpha1.NodeRebootSpec
			if ln != nil {
				rec = ln.Spec.Reboot
			}
			return fmt.Errorf("LatencyNode present %v, record %+v, unschedulable %v, taints %v", ln != nil, rec,
				n.Spec.Unschedulable, n.Spec.Taints)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if ln, n := e.ln("tk-a"), e.node("tk-a"); ln.Spec.Reboot != nil || n.Spec.Unschedulable {
		t.Errorf("tk-a cordoned again: record %+v", ln.Spec.Reboot)
	}
	if st := e.profile("tk-next").Status.Reboots; st != nil && st.Paused {
		t.Errorf("tk-next's reboots paused: %s", st.Message)
	}
	if got := e.sim.rebootCount("tk-a", rev); got != 0 {
		t.Errorf("tk-a rebooted %d times for %s", got, rev)
	}
	if !e.podExists("db-tk-a") {
		t.Error("db-tk-a evicted despite its budget")
	}
	e.sim.check(1)
}
