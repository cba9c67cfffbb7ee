package executor

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Cordon cordons n for the managed reboot for revision: spec.unschedulable
// and the manager's marker (v1alpha1.RebootCordonAnnotation, the revision)
// in one patch, and nothing else. The agent reboots only a node cordoned
// with the marker for the revision its LatencyNode asks for. A nil n (the
// node is gone) is nothing to cordon.
func (e *Executor) Cordon(ctx context.Context, n *corev1.Node, revision string) error {
	if n == nil {
		return nil
	}
	return e.patchCordon(ctx, n.Name, cordonPatch(revision))
}

// Uncordon lifts the manager's own cordon of n: only one that carries the
// marker (a person's cordon, without it, stays), the marker going with it.
// It reports whether it wrote (nil n: the node is gone).
//
// A cached n without the marker is read again from the API server before
// it is believed: a reboot writes its record and then its cordon, so a
// pass that ends it soon after (a drain timed out, a deselection) can be
// planned on a Node the cache holds from before the cordon. Taking that
// copy's word would clear the record and leave the node cordoned for good.
func (e *Executor) Uncordon(ctx context.Context, n *corev1.Node) (bool, error) {
	if n == nil {
		return false, nil
	}
	p := uncordonPatch(n)
	if p == nil {
		fresh := &corev1.Node{}
		if err := e.live().Get(ctx, types.NamespacedName{Name: n.Name}, fresh); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if p = uncordonPatch(fresh); p == nil {
			return false, nil
		}
	}
	return true, e.patchCordon(ctx, n.Name, p)
}

// cordonPatch is the merge patch of the manager's cordon for revision.
func cordonPatch(revision string) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{v1alpha1.RebootCordonAnnotation: revision}},
		"spec":     map[string]any{"unschedulable": true},
	}
}

// uncordonPatch is the merge patch lifting the manager's cordon of n, nil
// when n carries no marker: its cordon (if any) is not the manager's.
func uncordonPatch(n *corev1.Node) map[string]any {
	if _, ours := n.Annotations[v1alpha1.RebootCordonAnnotation]; !ours {
		return nil
	}
	return map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{v1alpha1.RebootCordonAnnotation: nil}},
		"spec":     map[string]any{"unschedulable": nil},
	}
}
