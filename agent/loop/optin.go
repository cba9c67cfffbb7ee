package loop

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"latencytier.io/latencytier/agent/desired"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// byNamespace says t grants or measures pods by their namespace's labels:
// one of its namespaceSelectors is set.
func byNamespace(t v1alpha1.TuningSpec) bool {
	return (t.CPUQuota != nil && t.CPUQuota.NamespaceSelector != nil) ||
		(t.CPUs != nil && t.CPUs.NamespaceSelector != nil) ||
		(t.Realtime != nil && t.Realtime.NamespaceSelector != nil) ||
		(t.Measurement != nil && t.Measurement.NamespaceSelector != nil)
}

// eventActionOptIn is the events API action of a refused opt-in.
const eventActionOptIn = "OptIn"

// namespaceLabels are the labels of every Namespace, from the cache, when
// t grants by namespace (byNamespace); nil when it does not, for then no
// label decides anything. The agent watches Namespaces from the first
// such pass on (until it restarts), not before: an agent watches only
// what its node's spec needs, and a fleet without namespace grants holds
// one watch per agent fewer on the API server (issue 43: every watch
// holds goroutines each of its GC cycles scans; a cache List would start
// the informer on its own, so the gate is here).
func (r *Reconciler) namespaceLabels(ctx context.Context, t v1alpha1.TuningSpec) (map[string]map[string]string, error) {
	if !byNamespace(t) {
		return nil, nil
	}
	if !r.namespacesWatched && r.watchNamespaces != nil {
		if err := r.watchNamespaces(); err != nil {
			return nil, fmt.Errorf("watch namespaces: %w", err)
		}
		r.namespacesWatched = true
		ctrl.LoggerFrom(ctx).Info("Watching Namespaces: the spec grants by namespace labels")
	}
	var list corev1.NamespaceList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	out := make(map[string]map[string]string, len(list.Items))
	for _, ns := range list.Items {
		out[ns.Name] = ns.Labels
	}
	return out, nil
}

// reportRefusals tells the owner of each pod whose opt-in the profile
// refuses, with a Warning event on the pod, once per pod and cause (the
// profile field, or what of the pod's own decided it: its annotation,
// threads, cgroup.procs, CPUs) while the refusal lasts (a refusal that
// ends and comes back is told again). Status carries the same as a Refused
// setting on every pass.
func (r *Reconciler) reportRefusals(ctx context.Context, refusals []desired.Refusal) {
	seen := make(map[string]bool, len(refusals))
	for _, f := range refusals {
		key := f.Pod.UID + "/" + f.Field
		seen[key] = true
		if r.refused[key] {
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Refused a pod's opt-in", "pod", f.Pod.Namespace+"/"+f.Pod.Name,
			"field", f.Field, "reason", f.Reason)
		if r.Recorder != nil {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.Pod.Namespace, Name: f.Pod.Name, UID: types.UID(f.Pod.UID)}}
			r.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, f.Reason, eventActionOptIn, "%s", f.Result.Message)
		}
	}
	r.refused = seen
}
