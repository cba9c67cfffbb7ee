package loop

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"latencytier.io/latencytier/agent/podcgroup"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Pod sources: where the agent learns which pods run on its node
// (--pod-source, chart value agent.podSource).
const (
	// PodSourceRuntime reads them from the container runtime through the
	// agent's NRI plugin (agent/nri.Pods): the runtime knows only this
	// node's pods, so the agent's role grants no right on pods.
	PodSourceRuntime = "Runtime"
	// PodSourceAPIServer reads them from the API server (an informer with
	// field selector spec.nodeName), for runtimes without NRI: the role
	// grants list and watch on every pod, which RBAC cannot confine to a
	// node.
	PodSourceAPIServer = "APIServer"
)

// PodSource is where the agent learns its node's pods that have not
// finished, without their namespaces' labels (the agent reads those from
// the API server) and in any order.
type PodSource interface {
	Pods(ctx context.Context) ([]podcgroup.Pod, error)
}

// RuntimePods is the Runtime pod source (agent/nri.Pods): pods as the
// runtime reports them, and a signal after every change that can change a
// pass, which enqueues one as a pod event does in APIServer mode. Its Pods
// answers nri.ErrPodsUnknown when the runtime has not told them.
type RuntimePods interface {
	PodSource
	Changed() <-chan struct{}
}

// APIServerPods is the APIServer pod source: the node's pods from the
// manager's pod informer (field selector spec.nodeName, set in Run).
type APIServerPods struct {
	Reader   client.Reader
	NodeName string
}

// Pods lists the informer's pods of the node, leaving out finished ones.
func (a APIServerPods) Pods(ctx context.Context) ([]podcgroup.Pod, error) {
	var list corev1.PodList
	if err := a.Reader.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list pods on node %s: %w", a.NodeName, err)
	}
	out := make([]podcgroup.Pod, 0, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.NodeName != a.NodeName || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		out = append(out, podcgroup.Pod{UID: string(p.UID), Namespace: p.Namespace, Name: p.Name,
			QOSClass: string(p.Status.QOSClass), Labels: p.Labels, Annotations: p.Annotations,
			ContainerIDs: containerIDs(p), Resizing: resizing(p)})
	}
	return out, nil
}

// podSource is the Reconciler's pod source: Pods, or the API server's
// through Client.
func (r *Reconciler) podSource() PodSource {
	if r.Pods != nil {
		return r.Pods
	}
	return APIServerPods{Reader: r.Client, NodeName: r.NodeName}
}

// pods are the pods of this node that have not finished, from the pod
// source, with the labels of their namespaces when t grants by them
// (namespaceLabels), in a stable order.
func (r *Reconciler) pods(ctx context.Context, t v1alpha1.TuningSpec) ([]podcgroup.Pod, error) {
	out, err := r.podSource().Pods(ctx)
	if err != nil {
		return nil, err
	}
	nsLabels, err := r.namespaceLabels(ctx, t)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].NamespaceLabels = nsLabels[out[i].Namespace]
	}
	// Neither source lists in a set order: sort, so knobs, the journal
	// and status come out the same on every pass.
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
