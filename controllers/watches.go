package controllers

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"latencytier.io/latencytier/api/v1alpha1"
)

// What each controller watches beyond its own kind, and which events of it
// reach a reconcile: predicates and the maps from one kind to another.

// nodeChanged passes node events that matter to selection and reachability:
// creation, deletion, label/annotation or Ready changes, and informer resyncs
// (so a periodic resync re-checks every node). Status heartbeats are dropped.
func nodeChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		oldN, okOld := e.ObjectOld.(*corev1.Node)
		newN, okNew := e.ObjectNew.(*corev1.Node)
		if !okOld || !okNew || oldN.ResourceVersion == newN.ResourceVersion {
			return true
		}
		return !maps.Equal(oldN.Labels, newN.Labels) || !maps.Equal(oldN.Annotations, newN.Annotations) ||
			readyStatus(oldN) != readyStatus(newN)
	}}
}

// profileIntentChanged passes the profile events that can change which
// nodes a profile owns or what they apply: creation, deletion, a new
// generation (any spec change) and the start of deletion. Status-only
// updates — one per node report during a rollout, each of which would
// reconcile every node, O(N²) over a rollout — and resyncs are dropped: the
// nodes' own resyncs re-check every node. Labels, annotations and
// finalizers of a profile decide nothing about nodes.
func profileIntentChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return true
		}
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
}

// onlyCreate passes creation events (including the initial list) only.
func onlyCreate() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// allNodes maps a profile event to every node: any node may change hands.
func allNodes(c client.Client) handler.MapFunc {
	return enqueueAll(c, func() client.ObjectList { return &corev1.NodeList{} }, "nodes")
}

// allProfiles maps a node event to every profile: a node's labels decide
// matches and conflicts of all of them.
func allProfiles(c client.Client) handler.MapFunc {
	return enqueueAll(c, func() client.ObjectList { return &v1alpha1.LatencyProfileList{} }, "profiles")
}

// enqueueAll maps an event to a request for every object of newList's kind.
func enqueueAll(c client.Client, newList func() client.ObjectList, what string) handler.MapFunc {
	return func(ctx context.Context, _ client.Object) []reconcile.Request {
		list := newList()
		if err := c.List(ctx, list); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing "+what+" for an event failed")
			return nil
		}
		var reqs []reconcile.Request
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			if obj, ok := o.(client.Object); ok {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: obj.GetName()}})
			}
			return nil
		})
		return reqs
	}
}

// profilesOfLatencyNode maps a LatencyNode to the profile in its spec and
// the one its agent last reported.
func profilesOfLatencyNode(_ context.Context, obj client.Object) []reconcile.Request {
	ln, ok := obj.(*v1alpha1.LatencyNode)
	if !ok {
		return nil
	}
	var reqs []reconcile.Request
	for _, name := range []string{ln.Spec.Profile, ln.Status.Profile} {
		if name != "" && (len(reqs) == 0 || reqs[0].Name != name) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		}
	}
	return reqs
}
