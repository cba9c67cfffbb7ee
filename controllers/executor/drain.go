package executor

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

// Managed reboots, the node's side: the drain through the Eviction API
// (the cordon, spec.unschedulable and its marker, is cordon.go's).
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

// MirrorPodAnnotation marks the kubelet's static pods.
const MirrorPodAnnotation = "kubernetes.io/config.mirror"

// DrainResult is one look at a draining node.
type DrainResult struct {
	// Drained: no pod the drain takes is left.
	Drained bool
	// PDB is the first pod whose eviction a PodDisruptionBudget refused.
	PDB string
	// Refused are the pods the drain will not evict, with why
	// ("work/db (no controller)"), in the order listed.
	Refused []string
}

// Drain evicts the pods a drain takes from n, under the profile's opts:
// the one writer of evictions.
func (e *Executor) Drain(ctx context.Context, n *corev1.Node, opts v1alpha1.DrainSpec) (DrainResult, error) {
	var pods corev1.PodList
	if err := e.live().List(ctx, &pods, client.MatchingFields{"spec.nodeName": n.Name}); err != nil {
		return DrainResult{}, fmt.Errorf("listing the pods of node %s: %w", n.Name, err)
	}
	left := 0
	var res DrainResult
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
		err := e.Client.SubResource("eviction").Create(ctx, pod, ev)
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			if res.PDB == "" {
				res.PDB = pod.Namespace + "/" + pod.Name
			}
		default:
			return DrainResult{}, fmt.Errorf("evicting %s/%s: %w", pod.Namespace, pod.Name, err)
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
	if _, mirror := pod.Annotations[MirrorPodAnnotation]; mirror {
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
