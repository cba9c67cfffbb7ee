package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/planner"
)

// Which nodes concern a profile, and which profiles a node, answered from
// the cache through field indexes so that one event costs work in
// proportion to what it touches, not to the size of the fleet.

// Field indexes of the manager's cache.
const (
	// indexNodeProfileLabel indexes Nodes by their profile label's value.
	indexNodeProfileLabel = "latencytier.profileLabel"
	// indexLatencyNodeProfile indexes LatencyNodes by spec.profile and
	// status.profile: the profile that asks for the node and the one its
	// agent last reported.
	indexLatencyNodeProfile = "latencytier.profile"
	// indexNodeContentionTaint indexes the Nodes carrying the contention
	// taint under indexTrue.
	indexNodeContentionTaint = "latencytier.contentionTaint"
	indexTrue                = "true"
)

// addIndexes registers the field indexes with the manager's cache.
func addIndexes(ctx context.Context, idx client.FieldIndexer) error {
	err := idx.IndexField(ctx, &corev1.Node{}, indexNodeProfileLabel, func(o client.Object) []string {
		if v := o.GetLabels()[v1alpha1.ProfileLabel]; v != "" {
			return []string{v}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("indexing nodes by profile label: %w", err)
	}
	err = idx.IndexField(ctx, &corev1.Node{}, indexNodeContentionTaint, func(o client.Object) []string {
		if n, ok := o.(*corev1.Node); ok && hasTaint(n.Spec.Taints, planner.ContentionTaint) {
			return []string{indexTrue}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("indexing nodes by the contention taint: %w", err)
	}
	err = idx.IndexField(ctx, &v1alpha1.LatencyNode{}, indexLatencyNodeProfile, func(o client.Object) []string {
		ln, ok := o.(*v1alpha1.LatencyNode)
		if !ok {
			return nil
		}
		return profileNames(ln)
	})
	if err != nil {
		return fmt.Errorf("indexing LatencyNodes by profile: %w", err)
	}
	return nil
}

// profileNames are the distinct non-empty profiles of ln's spec and status.
func profileNames(ln *v1alpha1.LatencyNode) []string {
	var out []string
	for _, name := range []string{ln.Spec.Profile, ln.Status.Profile} {
		if name != "" && (len(out) == 0 || out[0] != name) {
			out = append(out, name)
		}
	}
	return out
}

// profilesOfNode maps a node event to the profiles it concerns: those whose
// nodeSelector matches the node, the one its label names and those its
// LatencyNode names. An update maps the old and the new node both, so a
// profile the node leaves hears of it too. Profiles are few; the lookup of
// the LatencyNode is by name.
func profilesOfNode(c client.Reader) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		names := map[string]bool{}
		if v := obj.GetLabels()[v1alpha1.ProfileLabel]; v != "" {
			names[v] = true
		}
		var profiles v1alpha1.LatencyProfileList
		if err := c.List(ctx, &profiles, client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing profiles for a node event failed")
			return nil
		}
		set := planner.Selectable(obj.GetLabels())
		for i := range profiles.Items {
			sel, err := metav1.LabelSelectorAsSelector(&profiles.Items[i].Spec.NodeSelector)
			if err == nil && sel.Matches(set) {
				names[profiles.Items[i].Name] = true
			}
		}
		ln := &v1alpha1.LatencyNode{}
		if err := c.Get(ctx, types.NamespacedName{Name: obj.GetName()}, ln, client.UnsafeDisableDeepCopy); err == nil {
			for _, n := range profileNames(ln) {
				names[n] = true
			}
		}
		return requestsFor(names)
	}
}

// nodeNamesOf names every node that concerns profile p: those its
// nodeSelector matches, those labelled for it and those whose LatencyNode
// names it.
func nodeNamesOf(ctx context.Context, c client.Reader, p *v1alpha1.LatencyProfile) (map[string]bool, error) {
	names, err := nodeNamesNaming(ctx, c, p.Name)
	if err != nil {
		return nil, err
	}
	nodes, err := selectedNodes(ctx, c, p)
	if err != nil {
		return nil, err
	}
	for i := range nodes {
		names[nodes[i].Name] = true
	}
	return names, nil
}

// nodeNamesNaming names the nodes labelled for profile and those whose
// LatencyNode names it: all that concern a profile that is gone.
func nodeNamesNaming(ctx context.Context, c client.Reader, profile string) (map[string]bool, error) {
	names := map[string]bool{}
	var labelled corev1.NodeList
	if err := c.List(ctx, &labelled, client.MatchingFields{indexNodeProfileLabel: profile}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodes labelled for the profile: %w", err)
	}
	for i := range labelled.Items {
		names[labelled.Items[i].Name] = true
	}
	lns, err := latencyNodesOf(ctx, c, profile)
	if err != nil {
		return nil, err
	}
	for name := range lns {
		names[name] = true
	}
	return names, nil
}

// profilesSharingNodes maps a change of a profile's intent to the profiles
// whose selection it may move: itself, and every profile that selects,
// labels or holds one of the nodes it concerns (for an update, before and
// after the change). A profile deleted or narrowed hands its nodes to the
// next profile down, whose pass decides them (planner.Decider).
func profilesSharingNodes(c client.Reader) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		p, ok := obj.(*v1alpha1.LatencyProfile)
		if !ok {
			return nil
		}
		nodes, err := nodeNamesOf(ctx, c, p)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Finding the nodes of a profile failed", "profile", p.Name)
			return nil
		}
		var profiles v1alpha1.LatencyProfileList
		if err := c.List(ctx, &profiles, client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing profiles for a profile event failed")
			return nil
		}
		names := map[string]bool{p.Name: true}
		for name := range nodes {
			for _, other := range profilesOfNodeNamed(ctx, c, name, profiles.Items) {
				names[other] = true
			}
		}
		return requestsFor(names)
	}
}

// profilesOfNodeNamed are the profiles among profiles that select node
// name, the one its label names and those its LatencyNode names.
func profilesOfNodeNamed(ctx context.Context, c client.Reader, name string, profiles []v1alpha1.LatencyProfile) []string {
	var out []string
	key := types.NamespacedName{Name: name}
	n := &corev1.Node{}
	if err := c.Get(ctx, key, n, client.UnsafeDisableDeepCopy); err == nil {
		if v := n.Labels[v1alpha1.ProfileLabel]; v != "" {
			out = append(out, v)
		}
		set := planner.Selectable(n.Labels)
		for i := range profiles {
			sel, err := metav1.LabelSelectorAsSelector(&profiles[i].Spec.NodeSelector)
			if err == nil && sel.Matches(set) {
				out = append(out, profiles[i].Name)
			}
		}
	}
	ln := &v1alpha1.LatencyNode{}
	if err := c.Get(ctx, key, ln, client.UnsafeDisableDeepCopy); err == nil {
		out = append(out, profileNames(ln)...)
	}
	return out
}

// selectedNodes are the nodes p's nodeSelector matches, as shared, uncopied
// cache objects the caller must not modify; none when the selector is
// invalid.
func selectedNodes(ctx context.Context, c client.Reader, p *v1alpha1.LatencyProfile) ([]corev1.Node, error) {
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.NodeSelector)
	if err != nil {
		return nil, nil
	}
	var all corev1.NodeList
	if err := c.List(ctx, &all, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	return filterNodes(all.Items, sel), nil
}

// filterNodes keeps the nodes whose selectable labels match sel.
func filterNodes(nodes []corev1.Node, sel labels.Selector) []corev1.Node {
	var out []corev1.Node
	for i := range nodes {
		if sel.Matches(planner.Selectable(nodes[i].Labels)) {
			out = append(out, nodes[i])
		}
	}
	return out
}

// latencyNodesOf are the LatencyNodes whose spec or status names profile,
// by node name, as shared, uncopied cache objects the caller must not
// modify (write a copy; replace the map's entry with what was written):
// copying 1000 of them on every status pass was a fifth of the manager's
// CPU during a change at 1000 nodes.
func latencyNodesOf(ctx context.Context, c client.Reader, profile string) (map[string]*v1alpha1.LatencyNode, error) {
	var lns v1alpha1.LatencyNodeList
	if err := c.List(ctx, &lns, client.MatchingFields{indexLatencyNodeProfile: profile}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing LatencyNodes of the profile: %w", err)
	}
	out := make(map[string]*v1alpha1.LatencyNode, len(lns.Items))
	for i := range lns.Items {
		out[lns.Items[i].Name] = &lns.Items[i]
	}
	return out, nil
}

// requestsFor is one request per name.
func requestsFor(names map[string]bool) []reconcile.Request {
	reqs := make([]reconcile.Request, 0, len(names))
	for name := range names {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
	return reqs
}
