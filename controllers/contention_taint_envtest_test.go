package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// The contention taint against a real API server: the agent's part is
// played by patching each LatencyNode's status as the agent would
// (RunQueueContention True or False); the manager of the suite does the
// rest. After every change the taint must settle where the planner says,
// and never be on more nodes than the cap.

// contention is the RunQueueContention condition an agent reports.
func contention(st metav1.ConditionStatus) metav1.Condition {
	reason := v1alpha1.ReasonBelowThreshold
	if st == metav1.ConditionTrue {
		reason = v1alpha1.ReasonWaitBehindOthers
	}
	return metav1.Condition{Type: v1alpha1.NodeRunQueueContention, Status: st, Reason: reason, Message: "played by the test"}
}

// contendedAt reports node's RunQueueContention with a transition time of
// its own, so the test decides which node counts as contended longest.
func contendedAt(t *testing.T, node string, st metav1.ConditionStatus, at time.Time) {
	t.Helper()
	eventually(t, "contention on "+node, func() error {
		ln, err := getLN(node)
		if err != nil {
			return err
		}
		patched := ln.DeepCopy()
		patched.Status.ObservedGeneration = ln.Generation
		patched.Status.Profile = ln.Spec.Profile
		patched.Status.ProfileGeneration = ln.Spec.ProfileGeneration
		c := contention(st)
		c.ObservedGeneration, c.LastTransitionTime = ln.Generation, metav1.NewTime(at)
		meta.RemoveStatusCondition(&patched.Status.Conditions, c.Type)
		patched.Status.Conditions = append(patched.Status.Conditions, c)
		return k8s.Status().Patch(context.Background(), patched, client.MergeFromWithOptions(ln, client.MergeFromWithOptimisticLock{}))
	})
}

// patchContention merge-patches the profile's measurement.contention
// (nil: removes it).
func patchContention(t *testing.T, profile string, contention map[string]any) {
	t.Helper()
	var value any = contention
	if contention == nil {
		value = nil
	}
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"measurement": map[string]any{"contention": value}}})
	if err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: profile}}
	if err := k8s.Patch(context.Background(), p, client.RawPatch(types.MergePatchType, raw)); err != nil {
		t.Fatalf("patching %s's contention: %v", profile, err)
	}
}

// taintedAmong names the nodes of names that carry the contention taint,
// failing when one carries it other than valueless PreferNoSchedule.
func taintedAmong(t *testing.T, names []string) []string {
	t.Helper()
	var out []string
	for _, name := range names {
		for _, taint := range getNode(t, name).Spec.Taints {
			if taint.Key != v1alpha1.ContentionTaint {
				continue
			}
			if taint.Effect != corev1.TaintEffectPreferNoSchedule || taint.Value != "" {
				t.Fatalf("node %s carries the contention taint as %+v", name, taint)
			}
			out = append(out, name)
		}
	}
	return out
}

// expectTainted waits until exactly want of names carry the contention
// taint, and checks on every look that no more than limit do.
func expectTainted(t *testing.T, names []string, limit int, want ...string) {
	t.Helper()
	eventually(t, "contention taint on exactly ["+strings.Join(want, ",")+"]", func() error {
		got := taintedAmong(t, names)
		if len(got) > limit {
			t.Fatalf("contention taint on %v, over the cap %d", got, limit)
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("tainted %v", got)
		}
		return nil
	})
}

// expectContentionStatus waits for the profile's contention counts.
func expectContentionStatus(t *testing.T, profile string, contended, tainted, heldBack int32) {
	t.Helper()
	eventually(t, profile+" contention counts", func() error {
		st := getProfile(t, profile).Status
		if st.Contended != contended || st.ContentionTainted != tainted || st.ContentionHeldBack != heldBack {
			return fmt.Errorf("contended %d, tainted %d, held back %d; want %d, %d, %d",
				st.Contended, st.ContentionTainted, st.ContentionHeldBack, contended, tainted, heldBack)
		}
		return nil
	})
}

// TestContentionTaintOptInCapAndClear: four nodes, three contended. No
// taint without the opt-in; with it (default 25%: one node) the longest
// contended is tainted, the other two are held back and said so (status,
// event); the taint moves when its node's condition clears, grows with the
// cap, and comes off every node when the opt-in is removed.
func TestContentionTaintOptInCapAndClear(t *testing.T) {
	needSuite(t)
	names := []string{"ctaint-a", "ctaint-b", "ctaint-c", "ctaint-d"}
	for _, n := range names {
		createNode(t, n, map[string]string{"tier": "ctaint"})
	}
	createProfile(t, "ctaint", 0, map[string]string{"tier": "ctaint"})
	cleanup(t, names, []string{"ctaint"})
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, n := range names {
		expectApplying(t, n, "ctaint")
		playAgent(t, n, metav1.Condition{Type: v1alpha1.NodeApplied, Status: metav1.ConditionTrue, Reason: "Applied", Message: "ok"})
		st := metav1.ConditionTrue
		if n == "ctaint-d" {
			st = metav1.ConditionFalse
		}
		// b is contended longest, then a and c at the same time (by name).
		at := t0.Add(time.Minute)
		if n == "ctaint-b" {
			at = t0
		}
		contendedAt(t, n, st, at)
	}
	// Without the opt-in: counted, never tainted.
	expectContentionStatus(t, "ctaint", 3, 0, 0)
	patchContention(t, "ctaint", map[string]any{"taint": "None"})
	expectContentionStatus(t, "ctaint", 3, 0, 0)
	if got := taintedAmong(t, names); len(got) > 0 {
		t.Fatalf("tainted without the opt-in: %v", got)
	}

	// Opt in at the default 25% of four nodes: one. It is the manager's
	// setting, not the nodes': no new revision (a profile with a rollout
	// would roll nothing out), and the nodes' tuning does not carry it.
	before, err := getLN("ctaint-a")
	if err != nil {
		t.Fatal(err)
	}
	patchContention(t, "ctaint", map[string]any{"taint": "PreferNoSchedule"})
	expectTainted(t, names, 1, "ctaint-b")
	expectContentionStatus(t, "ctaint", 3, 1, 2)
	expectEvent(t, "ctaint", eventContentionCapped)
	after, err := getLN("ctaint-a")
	if err != nil {
		t.Fatal(err)
	}
	if after.Spec.Revision != before.Spec.Revision {
		t.Fatalf("the opt-in made a new revision: %s -> %s", before.Spec.Revision, after.Spec.Revision)
	}
	if m := after.Spec.Tuning.Measurement; m == nil || m.Contention == nil || m.Contention.Taint != "" || m.Contention.MaxTaintedPercent != 0 {
		t.Fatalf("the node's tuning carries the manager's taint settings (or lost contention): %+v", m)
	}

	// b's condition clears: the taint goes to a (same time as c, by name).
	contendedAt(t, "ctaint-b", metav1.ConditionFalse, time.Now())
	expectTainted(t, names, 1, "ctaint-a")
	expectContentionStatus(t, "ctaint", 2, 1, 1)

	// Half the nodes: a and c.
	patchContention(t, "ctaint", map[string]any{"taint": "PreferNoSchedule", "maxTaintedPercent": 50})
	expectTainted(t, names, 2, "ctaint-a", "ctaint-c")
	expectContentionStatus(t, "ctaint", 2, 2, 0)

	// Back to None: every taint comes off.
	patchContention(t, "ctaint", map[string]any{"taint": "None", "maxTaintedPercent": nil})
	expectTainted(t, names, 2)
	expectContentionStatus(t, "ctaint", 2, 0, 0)
}

// TestContentionTaintOffWhenNodeLeavesOrProfileGoes: the taint comes off a
// node that leaves the profile (while it is still being reverted and
// keeps the profile's label), and off every node when the profile is
// deleted.
func TestContentionTaintOffWhenNodeLeavesOrProfileGoes(t *testing.T) {
	needSuite(t)
	names := []string{"ctaintgo-a", "ctaintgo-b"}
	for _, n := range names {
		createNode(t, n, map[string]string{"tier": "ctaintgo"})
	}
	createProfile(t, "ctaintgo", 0, map[string]string{"tier": "ctaintgo"})
	cleanup(t, names, []string{"ctaintgo"})
	patchContention(t, "ctaintgo", map[string]any{"taint": "PreferNoSchedule", "maxTaintedPercent": 100})
	for _, n := range names {
		expectApplying(t, n, "ctaintgo")
		playAgent(t, n, metav1.Condition{Type: v1alpha1.NodeApplied, Status: metav1.ConditionTrue, Reason: "Applied", Message: "ok"},
			contention(metav1.ConditionTrue))
	}
	expectTainted(t, names, 2, names...)

	// a leaves: its selector label goes; it is reverted, its agent has
	// not answered yet, so it keeps the profile label.
	if err := mergePatchNode(k8s, "ctaintgo-a", map[string]any{"metadata": map[string]any{"labels": map[string]any{"tier": nil}}}); err != nil {
		t.Fatal(err)
	}
	expectReverting(t, "ctaintgo-a")
	expectTainted(t, names, 2, "ctaintgo-b")
	if got := getNode(t, "ctaintgo-a").Labels[v1alpha1.ProfileLabel]; got != "ctaintgo" {
		t.Logf("node a's profile label is %q already (the revert finished early)", got)
	}

	// The profile goes: b's taint comes off while the deletion waits for
	// the nodes' reverts.
	if err := k8s.Delete(context.Background(), &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "ctaintgo"}}); err != nil {
		t.Fatal(err)
	}
	expectTainted(t, names, 2)
}

// TestContentionTaintStrayComesOff: a node carrying the contention taint
// that no profile owns (the manager was down when it left, or a profile
// that no longer exists is named on it) loses it.
func TestContentionTaintStrayComesOff(t *testing.T) {
	needSuite(t)
	stray := corev1.Taint{Key: v1alpha1.ContentionTaint, Effect: corev1.TaintEffectPreferNoSchedule}
	unlabelled := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ctaintstray-a"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{stray}}}
	gone := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ctaintstray-b", Labels: map[string]string{v1alpha1.ProfileLabel: "ctaintstray-gone"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{stray}}}
	for _, n := range []*corev1.Node{unlabelled, gone} {
		if err := k8s.Create(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	names := []string{unlabelled.Name, gone.Name}
	cleanup(t, names, nil)
	expectTainted(t, names, 2)
}

// countingReader counts what a reconciler reads through it: the
// LatencyNodes it gets and the Nodes its lists return.
type countingReader struct {
	client.Reader
	latencyNodeGets, nodesListed atomic.Int64
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1alpha1.LatencyNode); ok {
		c.latencyNodeGets.Add(1)
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

func (c *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := c.Reader.List(ctx, list, opts...)
	if nl, ok := list.(*corev1.NodeList); ok {
		c.nodesListed.Add(int64(len(nl.Items)))
	}
	return err
}

// TestContentionTaintWithoutOptInReadsOnlyTaintedNodes: a profile without
// the opt-in (the default) plans every taint off, which needs only the
// nodes that carry it. The pass read every node of the profile and each
// one's LatencyNode, on each of their events: at 3000 nodes, 56 % of the
// manager's CPU during the create (hack/scale, docs/fleet-scale.md). One
// of five nodes carries a stray taint; a pass of the profile reads at
// most that node and no LatencyNode, and the taint comes off.
func TestContentionTaintWithoutOptInReadsOnlyTaintedNodes(t *testing.T) {
	needSuite(t)
	names := []string{"ctcost-a", "ctcost-b", "ctcost-c", "ctcost-d", "ctcost-e"}
	for _, n := range names {
		createNode(t, n, map[string]string{"tier": "ctcost"})
	}
	createProfile(t, "ctcost", 0, map[string]string{"tier": "ctcost"})
	cleanup(t, names, []string{"ctcost"})
	for _, n := range names {
		expectApplying(t, n, "ctcost")
	}
	eventually(t, "stray taint on ctcost-a", func() error {
		n := getNode(t, "ctcost-a")
		patched := n.DeepCopy()
		patched.Spec.Taints = append(patched.Spec.Taints, corev1.Taint{Key: v1alpha1.ContentionTaint, Effect: corev1.TaintEffectPreferNoSchedule})
		return k8s.Patch(context.Background(), patched, client.MergeFromWithOptions(n, client.MergeFromWithOptimisticLock{}))
	})
	reader := &countingReader{Reader: freshCache(t)}
	r := &contentionTaintReconciler{Client: k8s, Cache: reader, Live: k8s}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "ctcost"}}); err != nil {
		t.Fatal(err)
	}
	if got, listed := reader.latencyNodeGets.Load(), reader.nodesListed.Load(); got != 0 || listed > 1 {
		t.Fatalf("a pass without the opt-in read %d LatencyNodes and listed %d nodes; want none and at most the tainted one", got, listed)
	}
	expectTainted(t, names, 1)
}
