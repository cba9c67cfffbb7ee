package executor

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"latencytier.io/latencytier/controllers/planner"
)

// WithTaint is taints with t added (want) or removed, other taints kept in
// their order; nil when nothing changes.
func WithTaint(taints []corev1.Taint, t corev1.Taint, want bool) []corev1.Taint {
	if planner.HasTaint(taints, t) == want {
		return nil
	}
	out := make([]corev1.Taint, 0, len(taints)+1)
	for _, have := range taints {
		if have.Key == t.Key && have.Effect == t.Effect {
			continue
		}
		out = append(out, have)
	}
	if want {
		out = append(out, t)
	}
	return out
}

// SetNodeTaint adds or removes t on node n, leaving its other taints as
// they are. Node taints are a list a merge patch replaces whole, so the
// patch carries the resourceVersion it was computed from; on a conflict
// (someone else changed the node) it reads the node again from the API
// server and recomputes. It reports whether it wrote.
func (e *Executor) SetNodeTaint(ctx context.Context, n *corev1.Node, t corev1.Taint, want bool) (bool, error) {
	wrote := false
	cur := n
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if cur == nil {
			fresh := &corev1.Node{}
			if err := e.live().Get(ctx, types.NamespacedName{Name: n.Name}, fresh); err != nil {
				return err
			}
			cur = fresh
		}
		taints := WithTaint(cur.Spec.Taints, t, want)
		if taints == nil {
			return nil
		}
		patched := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
		if err := e.PatchNode(ctx, patched, map[string]any{
			"metadata": map[string]any{"resourceVersion": cur.ResourceVersion},
			"spec":     map[string]any{"taints": taints},
		}); err != nil {
			cur = nil
			return err
		}
		wrote = true
		return nil
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("patching taint %s of node %s: %w", t.Key, n.Name, err)
	}
	return wrote, nil
}
