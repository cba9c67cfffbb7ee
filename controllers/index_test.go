package controllers

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"latencytier.io/latencytier/api/v1alpha1"
)

// builderIndexer registers the manager's field indexes (addIndexes) with
// a fake client's builder.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, f client.IndexerFunc) error {
	i.b.WithIndex(obj, field, f)
	return nil
}

// TestProfileEventReachesTheProfilesSharingItsNodes: a change of a
// profile's intent (here its deletion or a narrowed selector) reaches the
// profiles whose selection it moves, since only the node's deciding
// profile's pass writes it (planner.Decider): the next profile down takes
// the nodes of a deleted profile over. A profile with no node in common
// is not reconciled.
func TestProfileEventReachesTheProfilesSharingItsNodes(t *testing.T) {
	prof := func(name string, priority int32, tier string) *v1alpha1.LatencyProfile {
		return &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.LatencyProfileSpec{Priority: priority,
				NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": tier}}}}
	}
	high, low, web := prof("high", 5, "rt"), prof("low", 1, "rt"), prof("web", 0, "web")
	n1 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"tier": "rt", v1alpha1.ProfileLabel: "high"}}}
	w1 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: map[string]string{"tier": "web"}}}
	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: v1alpha1.LatencyNodeSpec{Profile: "high"}}
	b := fake.NewClientBuilder().WithScheme(NewScheme()).WithObjects(high, low, web, n1, w1, ln)
	if err := addIndexes(context.Background(), builderIndexer{b}); err != nil {
		t.Fatal(err)
	}
	c := b.Build()
	mapped := func(p *v1alpha1.LatencyProfile) []string {
		var out []string
		for _, req := range profilesSharingNodes(c)(context.Background(), p) {
			out = append(out, req.Name)
		}
		slices.Sort(out)
		return out
	}
	if got, want := mapped(high), []string{"high", "low"}; !slices.Equal(got, want) {
		t.Errorf("high changed: reconciled %v, want %v", got, want)
	}
	// Narrowed to select nothing: its node, still labelled and held by
	// it, concerns the profile that selects it now.
	narrowed := high.DeepCopy()
	narrowed.Spec.NodeSelector.MatchLabels = map[string]string{"tier": "none"}
	if got, want := mapped(narrowed), []string{"high", "low"}; !slices.Equal(got, want) {
		t.Errorf("high narrowed: reconciled %v, want %v", got, want)
	}
	if got, want := mapped(web), []string{"web"}; !slices.Equal(got, want) {
		t.Errorf("web changed: reconciled %v, want %v", got, want)
	}
}
