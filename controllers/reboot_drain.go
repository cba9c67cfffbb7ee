package controllers

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Managed reboots, the node's side: the cordon (spec.unschedulable and its
// marker annotation, nothing else of the Node) and the drain through the Eviction API.
//
// What a drain leaves on the node: DaemonSet pods (their controller puts
// them back at once; the agent is one), mirror pods (the kubelet's static
// pods, which the API cannot evict), pods that tolerate the tuning-pending
// taint (what the user marks node-critical, as the agent does) and pods
// that have finished (Succeeded, Failed). A pod already terminating is
// waited for, not evicted again.
//
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create

// mirrorPodAnnotation marks the kubelet's static pods.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// cordon cordons n for the managed reboot for revision: spec.unschedulable
// and the manager's marker (v1alpha1.RebootCordonAnnotation, the revision)
// in one patch, and nothing else. The agent reboots only a node cordoned
// with the marker for the revision its LatencyNode asks for.
func (r *rebooter) cordon(ctx context.Context, n *corev1.Node, revision string) error {
	if n == nil {
		return nil
	}
	return r.patchCordon(ctx, n.Name, cordonPatch(revision))
}

// uncordon lifts the manager's own cordon of n: only one that carries the
// marker (a person's cordon, without it, stays), the marker going with it.
func (r *rebooter) uncordon(ctx context.Context, n *corev1.Node) error {
	if n == nil {
		return nil
	}
	p := uncordonPatch(n)
	if p == nil {
		return nil
	}
	return r.patchCordon(ctx, n.Name, p)
}

func (r *rebooter) patchCordon(ctx context.Context, name string, patch map[string]any) error {
	raw, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	patched := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := r.Patch(ctx, patched, client.RawPatch(types.MergePatchType, raw)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("cordoning node %s (%v): %w", name, patch["spec"], err)
	}
	return nil
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

// drain evicts the pods a drain takes from n. It reports whether none is
// left, and the first pod whose eviction a PodDisruptionBudget refused.
func (r *rebooter) drain(ctx context.Context, n *corev1.Node) (bool, string, error) {
	var pods corev1.PodList
	if err := r.Live.List(ctx, &pods, client.MatchingFields{"spec.nodeName": n.Name}); err != nil {
		return false, "", fmt.Errorf("listing the pods of node %s: %w", n.Name, err)
	}
	left, blocked := 0, ""
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !drains(pod) {
			continue
		}
		left++
		if !pod.DeletionTimestamp.IsZero() {
			continue
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
		err := r.SubResource("eviction").Create(ctx, pod, ev)
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			if blocked == "" {
				blocked = pod.Namespace + "/" + pod.Name
			}
		default:
			return false, "", fmt.Errorf("evicting %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	return left == 0, blocked, nil
}

// drains: a drain evicts pod (see the top of this file for what stays).
func drains(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := pod.Annotations[mirrorPodAnnotation]; mirror {
		return false
	}
	if c := metav1.GetControllerOf(pod); c != nil && c.Kind == "DaemonSet" {
		return false
	}
	for _, t := range pod.Spec.Tolerations {
		if toleratesPending(t) {
			return false
		}
	}
	return true
}

// toleratesPending: t tolerates the tuning-pending taint (its key, or every
// key with operator Exists; its effect or every effect).
func toleratesPending(t corev1.Toleration) bool {
	if t.Effect != "" && t.Effect != pendingTaint.Effect {
		return false
	}
	if t.Key == "" {
		return t.Operator == corev1.TolerationOpExists
	}
	return t.Key == pendingTaint.Key && (t.Operator == corev1.TolerationOpExists || t.Value == pendingTaint.Value)
}
