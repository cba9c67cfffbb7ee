package loop

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"latencytier.io/latencytier/agent/podcgroup"
)

// pods are the pods of this node that have not finished, from the cache,
// with the labels of their namespaces, in a stable order.
func (r *Reconciler) pods(ctx context.Context) ([]podcgroup.Pod, error) {
	var list corev1.PodList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list pods on node %s: %w", r.NodeName, err)
	}
	nsLabels, err := r.namespaceLabels(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]podcgroup.Pod, 0, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.NodeName != r.NodeName || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, podcgroup.Pod{UID: string(p.UID), Namespace: p.Namespace, Name: p.Name,
			QOSClass: string(p.Status.QOSClass), Labels: p.Labels, Annotations: p.Annotations,
			ContainerIDs: containerIDs(p), NamespaceLabels: nsLabels[p.Namespace], Resizing: resizing(p)})
	}
	// The cache lists in no set order: sort, so knobs, the journal and
	// status come out the same on every pass.
	slices.SortFunc(out, func(a, b podcgroup.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name), strings.Compare(a.UID, b.UID))
	})
	return out, nil
}

// containerIDs are the IDs of the pod's started containers.
func containerIDs(p *corev1.Pod) []string {
	var ids []string
	for _, cs := range p.Status.ContainerStatuses {
		if cs.ContainerID != "" {
			ids = append(ids, cs.ContainerID)
		}
	}
	return ids
}

// resizing reports whether kubelet is resizing the pod in place: it has
// allocated new resources and is writing them (condition
// PodResizeInProgress), retrying after an error.
func resizing(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodResizeInProgress && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// podChanged passes pod events that can change the knobs: create, delete,
// labels, annotations, new container IDs (cgroups appear with them) and an
// in-place resize starting or ending (a burst yields to it).
func podChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Pod)
		n, ok2 := e.ObjectNew.(*corev1.Pod)
		if !ok1 || !ok2 {
			return true
		}
		return !equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
			!equality.Semantic.DeepEqual(o.Annotations, n.Annotations) ||
			!slices.Equal(containerIDs(o), containerIDs(n)) ||
			resizing(o) != resizing(n)
	}}
}
