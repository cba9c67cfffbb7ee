package rollout

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/planner"
	"latencytier.io/latencytier/controllers/profilestatus"
)

// latencyNodeOf is the LatencyNode, as the API holds it, that nodeOf
// reads back as n.
func latencyNodeOf(n Node, profile string) *v1alpha1.LatencyNode {
	ln := &v1alpha1.LatencyNode{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Generation: 1,
			Annotations: map[string]string{v1alpha1.RevisionSetAtAnnotation: n.SetAt.UTC().Format(time.RFC3339)}},
		Spec: v1alpha1.LatencyNodeSpec{Action: n.Action, Profile: profile, Revision: n.Revision},
	}
	ln.Status.ObservedGeneration = 1
	ln.Status.Baseline, ln.Status.Current = n.Baseline, n.Current
	return ln
}

// TestRolloutCountsNodesWhoseLatencyNodeIsNotThereYet feeds the rollout the
// view a profile reconcile gets while its nodes join: every selected Node is
// in the cache, but the node controller has created the LatencyNodes of only
// some of them. The decision must treat the rest as waiting nodes, not as
// absent ones: the canary is the first node by name whether or not its
// LatencyNode exists yet, and the nodes seen so far passing is not Complete
// (which would let the others take the revision without a gate).
func TestRolloutCountsNodesWhoseLatencyNodeIsNotThereYet(t *testing.T) {
	p := &v1alpha1.LatencyProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 2},
		Spec: v1alpha1.LatencyProfileSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pool": "p"}},
			Rollout:      policy(canaryCount(1)),
		},
	}
	target := planner.CurrentRevision(p)
	cands, _ := planner.CompileProfiles([]v1alpha1.LatencyProfile{*p})
	completeOn := func(n int32) *v1alpha1.RolloutStatus {
		l := last(v1alpha1.RolloutComplete, target, "", 2)
		l.Updated = n
		return l
	}
	cases := []struct {
		name    string
		last    *v1alpha1.RolloutStatus
		known   []Node // nodes a, b, c; those not here have no LatencyNode yet
		moves   []string
		phase   v1alpha1.RolloutPhase
		waiting int32
	}{
		{name: "the canary's LatencyNode is not there yet: nothing moves",
			known: []Node{baselined("b"), baselined("c")},
			phase: v1alpha1.RolloutBaselining, waiting: 3},
		{name: "the one node seen passed while the others join: not Complete",
			last:  last(v1alpha1.RolloutCanary, target, "", 2),
			known: []Node{passed("c", target)},
			phase: v1alpha1.RolloutBaselining, waiting: 2},
		{name: "all joined: the canary goes first, alone",
			known: []Node{baselined("a"), baselined("b"), baselined("c")},
			moves: []string{"a=Apply/" + target}, phase: v1alpha1.RolloutCanary, waiting: 2},
		{name: "a node joining a completed profile waits for its LatencyNode",
			last:  completeOn(2),
			known: []Node{passed("a", target), passed("b", target)},
			phase: v1alpha1.RolloutComplete, waiting: 1},
		{name: "then takes the revision straight after its baseline",
			last:  completeOn(2),
			known: []Node{passed("a", target), passed("b", target), baselined("c")},
			moves: []string{"c=Apply/" + target}, phase: v1alpha1.RolloutComplete},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := profilestatus.Input{Profile: p, Candidates: cands, LatencyNodes: map[string]*v1alpha1.LatencyNode{}, Now: rt0.Add(time.Minute)}
			for _, name := range []string{"c", "a", "b"} { // list order is not name order
				in.Nodes = append(in.Nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "p"}}})
			}
			for _, n := range tc.known {
				in.LatencyNodes[n.Name] = latencyNodeOf(n, p.Name)
			}
			nodes, _ := NodesOf(in)
			std := Gate{maxRatio: 1.2, maxThrottled: 0.05, minSamples: 100, budgetThrottle: -1}
			plan := Decide(Input{Policy: p.Spec.Rollout, Gate: std, Generation: 2, Target: target,
				Last: tc.last, Nodes: nodes, Now: in.Now})
			var got []string
			for _, m := range plan.Moves {
				got = append(got, fmt.Sprintf("%s=%s/%s", m.Node, m.Action, m.Revision))
			}
			if !reflect.DeepEqual(got, tc.moves) {
				t.Errorf("moves = %v, want %v", got, tc.moves)
			}
			st := plan.Status
			if st.Phase != tc.phase || st.Waiting != tc.waiting {
				t.Errorf("phase %s, waiting %d (%q); want %s, waiting %d", st.Phase, st.Waiting, st.Message, tc.phase, tc.waiting)
			}
			if tc.phase == v1alpha1.RolloutBaselining && !strings.Contains(st.Message, "baseline of a") {
				t.Errorf("message %q does not name the canary a", st.Message)
			}
		})
	}
}
