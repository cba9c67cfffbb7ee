package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Managed reboots, the node's side: the cordon (spec.unschedulable and its
// marker annotation, nothing else of the Node) and the drain through the Eviction API.
//
// The drain follows kubectl drain's rules (issue 40): it leaves DaemonSet
// pods (their controller puts them back at once; the agent is one), mirror
// pods (the kubelet's static pods, which the API cannot evict) and pods
// that have finished (Succeeded, Failed), and evicts every other pod
// through the Eviction API, so every PodDisruptionBudget is asked; no
// toleration exempts a pod. A pod no controller owns (nothing recreates
// it) or with an emptyDir volume (its data goes) blocks the drain, named
// in an event and status.reboots.message, unless spec.reboot.drain
// accepts it (force, deleteEmptyDirData). A pod already terminating is
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
	return patchCordon(ctx, r.Client, n.Name, cordonPatch(revision))
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
	return patchCordon(ctx, r.Client, n.Name, p)
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

// drainResult is one look at a draining node.
type drainResult struct {
	// Drained: no pod the drain takes is left.
	Drained bool
	// PDB is the first pod whose eviction a PodDisruptionBudget refused.
	PDB string
	// Refused are the pods the drain will not evict, with why
	// ("work/db (no controller)"), in the order listed.
	Refused []string
}

// drain evicts the pods a drain takes from n, under the profile's opts.
func (r *rebooter) drain(ctx context.Context, n *corev1.Node, opts v1alpha1.DrainSpec) (drainResult, error) {
	var pods corev1.PodList
	if err := r.Live.List(ctx, &pods, client.MatchingFields{"spec.nodeName": n.Name}); err != nil {
		return drainResult{}, fmt.Errorf("listing the pods of node %s: %w", n.Name, err)
	}
	left := 0
	var res drainResult
	for i := range pods.Items {
		pod := &pods.Items[i]
		act, why := drainAct(pod, opts)
		if act == drainSkip {
			continue
		}
		left++
		if act == drainRefuse {
			res.Refused = append(res.Refused, fmt.Sprintf("%s/%s (%s)", pod.Namespace, pod.Name, why))
			continue
		}
		if !pod.DeletionTimestamp.IsZero() {
			continue
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
		err := r.SubResource("eviction").Create(ctx, pod, ev)
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			if res.PDB == "" {
				res.PDB = pod.Namespace + "/" + pod.Name
			}
		default:
			return drainResult{}, fmt.Errorf("evicting %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	res.Drained = left == 0
	return res, nil
}

// drainAction is what a drain does with one pod.
type drainAction int

const (
	drainEvict  drainAction = iota // evict through the Eviction API
	drainSkip                      // stays: DaemonSet, mirror or finished
	drainRefuse                    // blocks the drain until opts accept it
)

// drainAct is what the drain does with pod under opts, and why a refused
// pod is refused.
func drainAct(pod *corev1.Pod, opts v1alpha1.DrainSpec) (drainAction, string) {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return drainSkip, ""
	}
	if _, mirror := pod.Annotations[mirrorPodAnnotation]; mirror {
		return drainSkip, ""
	}
	c := metav1.GetControllerOf(pod)
	if c != nil && c.Kind == "DaemonSet" {
		return drainSkip, ""
	}
	if !pod.DeletionTimestamp.IsZero() {
		return drainEvict, "" // on its way out: waited for
	}
	if c == nil && !opts.Force {
		return drainRefuse, "no controller; spec.reboot.drain.force evicts it"
	}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil && !opts.DeleteEmptyDirData {
			return drainRefuse, "emptyDir volume " + v.Name + "; spec.reboot.drain.deleteEmptyDirData evicts it"
		}
	}
	return drainEvict, ""
}

// drainOptionsOf are p's spec.reboot.drain (none set: the zero value).
func drainOptionsOf(p *v1alpha1.LatencyProfile) v1alpha1.DrainSpec {
	if s := p.Spec.Reboot; s != nil && s.Drain != nil {
		return *s.Drain
	}
	return v1alpha1.DrainSpec{}
}
