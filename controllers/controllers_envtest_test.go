package controllers

import (
	"context"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"latencytier.io/latencytier/api/v1alpha1"
)

var (
	appliedTrue  = metav1.Condition{Type: v1alpha1.NodeApplied, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonApplied, Message: "all settings hold"}
	revertedTrue = metav1.Condition{Type: v1alpha1.NodeReverted, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRevertComplete, Message: "originals restored"}
)

func TestSelectionLabelsAndRelabel(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	createNode(t, "sel-1", map[string]string{"tier": "sel", "team": "payments"})
	createNode(t, "sel-web", map[string]string{"tier": "web"})
	p := createProfile(t, "sel", 0, map[string]string{"tier": "sel"})
	cleanup(t, []string{"sel-1", "sel-2", "sel-web"}, []string{"sel"})

	ln := expectApplying(t, "sel-1", "sel")
	if ln.Spec.ProfileGeneration != p.Generation || ln.Spec.Tuning.Scheduler == nil || *ln.Spec.Tuning.Scheduler.Autogroup != v1alpha1.Disabled {
		t.Fatalf("LatencyNode spec = %+v, want the profile's tuning and generation", ln.Spec)
	}
	n := getNode(t, "sel-1")
	if len(ln.OwnerReferences) != 1 || ln.OwnerReferences[0].Kind != "Node" || ln.OwnerReferences[0].UID != n.UID {
		t.Fatalf("owner references = %+v, want the Node", ln.OwnerReferences)
	}
	if n.Labels["team"] != "payments" || n.Annotations[v1alpha1.OwnedLabelsAnnotation] != v1alpha1.ProfileLabel {
		t.Fatalf("node metadata = %v / %v", n.Labels, n.Annotations)
	}

	// Not selected: untouched.
	if web := getNode(t, "sel-web"); web.Labels[v1alpha1.ProfileLabel] != "" {
		t.Fatalf("unselected node labelled: %v", web.Labels)
	}
	if err := gone(&v1alpha1.LatencyNode{}, "sel-web"); err != nil {
		t.Fatal(err)
	}

	// A node added later is picked up.
	createNode(t, "sel-2", map[string]string{"tier": "sel"})
	expectApplying(t, "sel-2", "sel")
	playAgent(t, "sel-1", appliedTrue)
	playAgent(t, "sel-2", appliedTrue)
	st := expectCondition(t, "sel", v1alpha1.ProfileReady, metav1.ConditionTrue, v1alpha1.ReasonAllNodesApplied)
	if st.Status.Matched != 2 || st.Status.Applied != 2 || st.Status.ObservedGeneration != st.Generation {
		t.Fatalf("status = %+v", st.Status)
	}

	// The profile's own spec, labels and annotations are never written.
	got := getProfile(t, "sel")
	if got.Generation != p.Generation || !reflect.DeepEqual(got.Labels, p.Labels) || !reflect.DeepEqual(got.Annotations, p.Annotations) {
		t.Fatalf("profile metadata changed: gen %d→%d labels %v annotations %v", p.Generation, got.Generation, got.Labels, got.Annotations)
	}
	if !reflect.DeepEqual(got.Finalizers, []string{v1alpha1.RevertFinalizer}) {
		t.Fatalf("finalizers = %v", got.Finalizers)
	}

	// Relabelled out: revert handshake, then label and LatencyNode go and
	// the foreign label stays.
	n = getNode(t, "sel-1")
	patch := client.MergeFrom(n.DeepCopy())
	n.Labels["tier"] = "web"
	if err := k8s.Patch(ctx, n, patch); err != nil {
		t.Fatal(err)
	}
	expectReverting(t, "sel-1")
	if getNode(t, "sel-1").Labels[v1alpha1.ProfileLabel] != "sel" {
		t.Fatalf("label removed before the agent reverted")
	}
	playAgent(t, "sel-1", revertedTrue)
	expectReleased(t, "sel-1")
	if n := getNode(t, "sel-1"); n.Labels["team"] != "payments" || n.Labels["tier"] != "web" {
		t.Fatalf("foreign labels touched: %v", n.Labels)
	}
	expectEvent(t, "sel", eventSelected)
	expectEvent(t, "sel", eventReverted)
}

func TestForeignProfileLabelIsLeftAlone(t *testing.T) {
	needSuite(t)
	createNode(t, "foreign-1", map[string]string{"tier": "foreign", v1alpha1.ProfileLabel: "hand-made"})
	createProfile(t, "foreign", 0, map[string]string{"tier": "foreign"})
	cleanup(t, []string{"foreign-1"}, []string{"foreign"})
	eventually(t, "LatencyNode created", func() error { _, err := getLN("foreign-1"); return err })
	n := getNode(t, "foreign-1")
	if n.Labels[v1alpha1.ProfileLabel] != "hand-made" || n.Annotations[v1alpha1.OwnedLabelsAnnotation] != "" {
		t.Fatalf("foreign label changed: %v %v", n.Labels, n.Annotations)
	}
}

func TestPriorityAndConflict(t *testing.T) {
	needSuite(t)
	createNode(t, "prio-1", map[string]string{"pool": "prio", "zone": "prio-z"})
	createNode(t, "prio-2", map[string]string{"pool": "prio"})
	createProfile(t, "prio-low", 1, map[string]string{"pool": "prio"})
	createProfile(t, "prio-high", 5, map[string]string{"zone": "prio-z"})
	cleanup(t, []string{"prio-1", "prio-2"}, []string{"prio-low", "prio-high", "prio-tie"})

	expectApplying(t, "prio-1", "prio-high")
	expectApplying(t, "prio-2", "prio-low")

	// An equal-priority profile on prio-1: neither gets it, both say so.
	createProfile(t, "prio-tie", 5, map[string]string{"pool": "prio"})
	expectReverting(t, "prio-1")
	for _, p := range []string{"prio-high", "prio-tie"} {
		st := expectCondition(t, p, v1alpha1.ProfileDegraded, metav1.ConditionTrue, v1alpha1.ReasonNodeConflict)
		if st.Status.Conflicted != 1 {
			t.Fatalf("%s conflicted = %d", p, st.Status.Conflicted)
		}
		expectEvent(t, p, eventNodeConflict)
	}
	// prio-2 now goes to prio-tie (5 beats 1).
	expectApplying(t, "prio-2", "prio-tie")
	playAgent(t, "prio-1", revertedTrue)
	expectReleased(t, "prio-1")

	// The overlap goes: prio-1 returns to prio-high on its own.
	if err := k8s.Delete(context.Background(), &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "prio-tie"}}); err != nil {
		t.Fatal(err)
	}
	expectApplying(t, "prio-1", "prio-high")
	expectApplying(t, "prio-2", "prio-low")
	expectCondition(t, "prio-high", v1alpha1.ProfileDegraded, metav1.ConditionFalse, v1alpha1.ReasonAsExpected)
	eventually(t, "prio-tie gone", func() error { return gone(&v1alpha1.LatencyProfile{}, "prio-tie") })
}

func TestDeletionWaitsForRevert(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	createNode(t, "del-1", map[string]string{"tier": "del"})
	createNode(t, "del-2", map[string]string{"tier": "del"})
	createProfile(t, "del", 0, map[string]string{"tier": "del"})
	cleanup(t, []string{"del-1", "del-2"}, []string{"del"})
	expectApplying(t, "del-1", "del")
	expectApplying(t, "del-2", "del")
	eventually(t, "finalizer", func() error {
		if len(getProfile(t, "del").Finalizers) == 0 {
			return errString("no finalizer yet")
		}
		return nil
	})

	if err := k8s.Delete(ctx, &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "del"}}); err != nil {
		t.Fatal(err)
	}
	expectReverting(t, "del-1")
	expectReverting(t, "del-2")
	eventually(t, "waitingFor both", func() error {
		if got := getProfile(t, "del").Status.WaitingFor; !reflect.DeepEqual(got, []string{"del-1", "del-2"}) {
			return errString("waitingFor = " + joinNames(got))
		}
		return nil
	})
	expectEvent(t, "del", eventWaiting)
	playAgent(t, "del-1", revertedTrue)
	expectReleased(t, "del-1")
	eventually(t, "waitingFor del-2", func() error {
		if got := getProfile(t, "del").Status.WaitingFor; !reflect.DeepEqual(got, []string{"del-2"}) {
			return errString("waitingFor = " + joinNames(got))
		}
		return nil
	})
	playAgent(t, "del-2", revertedTrue)
	expectReleased(t, "del-2")
	eventually(t, "profile gone", func() error { return gone(&v1alpha1.LatencyProfile{}, "del") })
}

func TestDeletionWithNodeGoneOrUnreachable(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	createNode(t, "gone-1", map[string]string{"tier": "gone"})
	createNode(t, "gone-2", map[string]string{"tier": "gone"})
	createProfile(t, "gone", 0, map[string]string{"tier": "gone"})
	cleanup(t, []string{"gone-1", "gone-2"}, []string{"gone"})
	expectApplying(t, "gone-1", "gone")
	expectApplying(t, "gone-2", "gone")

	// gone-2 went NotReady an hour ago (longer than the unreachable timeout).
	n := getNode(t, "gone-2")
	n.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown",
		LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour)), LastHeartbeatTime: metav1.NewTime(time.Now().Add(-time.Hour)),
	}}
	if err := k8s.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	eventually(t, "gone-2 Unreachable in status", func() error {
		for _, l := range getProfile(t, "gone").Status.Nodes {
			if l.Name == "gone-2" && l.State == v1alpha1.NodeStateUnreachable {
				return nil
			}
		}
		return errString("not Unreachable")
	})
	// gone-1 is deleted outright (envtest has no garbage collector: the
	// controller removes its LatencyNode itself).
	if err := k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gone-1"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "gone-1 LatencyNode removed", func() error { return gone(&v1alpha1.LatencyNode{}, "gone-1") })

	if err := k8s.Delete(ctx, &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}); err != nil {
		t.Fatal(err)
	}
	expectReleased(t, "gone-2")
	eventually(t, "profile gone without any agent", func() error { return gone(&v1alpha1.LatencyProfile{}, "gone") })
}

func TestSteadyStateMakesNoWrites(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	nodes := []string{"steady-1", "steady-2", "steady-3"}
	for _, n := range nodes {
		createNode(t, n, map[string]string{"tier": "steady"})
	}
	createProfile(t, "steady", 0, map[string]string{"tier": "steady"})
	cleanup(t, nodes, []string{"steady"})
	for _, n := range nodes {
		expectApplying(t, n, "steady")
		playAgent(t, n, appliedTrue)
	}
	expectCondition(t, "steady", v1alpha1.ProfileReady, metav1.ConditionTrue, v1alpha1.ReasonAllNodesApplied)
	settle(t)

	before := resourceVersions(t, ctx)
	w0, r0 := writes.Load(), reads.Load()
	waitForReconciles(t, 3, nodes, []string{"steady"})
	w1, r1 := writes.Load(), reads.Load()
	after := resourceVersions(t, ctx)
	if w1 != w0 {
		t.Fatalf("steady state made %d API writes over three reconciles of each object (and %d reads)", w1-w0, r1-r0)
	}
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("resourceVersions changed at steady state:\n%v\n%v", before, after)
	}
	t.Logf("three reconciles of each object: %d reads from the cache, 0 writes", r1-r0)
}

// settle waits until the manager has made no write for two sync periods.
func settle(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	last := writes.Load()
	for time.Now().Before(deadline) {
		time.Sleep(2 * testSyncPeriod)
		cur := writes.Load()
		if cur == last {
			return
		}
		last = cur
	}
	t.Fatalf("the manager never stopped writing")
}

// resourceVersions of every object the controller writes.
func resourceVersions(t testing.TB, ctx context.Context) map[string]string {
	t.Helper()
	out := map[string]string{}
	var nodes corev1.NodeList
	var lns v1alpha1.LatencyNodeList
	var ps v1alpha1.LatencyProfileList
	for _, l := range []client.ObjectList{&nodes, &lns, &ps} {
		if err := k8s.List(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range nodes.Items {
		out["node/"+o.Name] = o.ResourceVersion
	}
	for _, o := range lns.Items {
		out["ln/"+o.Name] = o.ResourceVersion
	}
	for _, o := range ps.Items {
		out["lp/"+o.Name] = o.ResourceVersion
	}
	return out
}

type errString string

func (e errString) Error() string { return string(e) }

func joinNames(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return "[" + out + "]"
}

// TestDeletionHeldByAnotherFinalizerMakesNoWrites: once the revert finalizer
// is gone, a profile kept by someone else's finalizer is left alone; the
// controller does not patch it again on every resync.
func TestDeletionHeldByAnotherFinalizerMakesNoWrites(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	const hold = "example.com/hold"
	p := createProfile(t, "held", 0, map[string]string{"tier": "held-none"})
	eventually(t, "revert finalizer added", func() error {
		if !controllerutil.ContainsFinalizer(getProfile(t, "held"), v1alpha1.RevertFinalizer) {
			return errString("no finalizer yet")
		}
		return nil
	})
	patched := getProfile(t, "held")
	before := patched.DeepCopy()
	controllerutil.AddFinalizer(patched, hold)
	if err := k8s.Patch(ctx, patched, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cur := &v1alpha1.LatencyProfile{}
		if k8s.Get(ctx, client.ObjectKeyFromObject(p), cur) != nil {
			return
		}
		orig := cur.DeepCopy()
		controllerutil.RemoveFinalizer(cur, hold)
		_ = k8s.Patch(ctx, cur, client.MergeFrom(orig))
		eventually(t, "profile held gone", func() error { return gone(&v1alpha1.LatencyProfile{}, "held") })
	})
	if err := k8s.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "revert finalizer removed", func() error {
		if controllerutil.ContainsFinalizer(getProfile(t, "held"), v1alpha1.RevertFinalizer) {
			return errString("still there")
		}
		return nil
	})
	settle(t)
	w0 := writes.Load()
	waitForReconciles(t, 3, nil, []string{"held"})
	if w := writes.Load() - w0; w != 0 {
		t.Fatalf("the controller made %d API writes over three reconciles of a profile another finalizer holds", w)
	}
}
