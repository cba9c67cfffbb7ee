package controllers

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"latencytier.io/latencytier/controllers/planner"
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

// notResync drops the periodic resync of an object (an update to the very
// version the informer already had). A profile's own resync re-checks it:
// its nodes' resyncs need not, once per node.
func notResync() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld == nil || e.ObjectNew == nil || e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion()
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

// notOwnStatus passes the profile events its reconcile acts on: all but
// the manager's own status write coming back (the version g recorded for
// it), which ran one more full pass over every node of the profile (at
// 1000 nodes ~0.2 s of CPU) after every status write. A status written by
// anyone else passes, so it is put right at once; so do a finalizer added
// (the reconcile stops after adding it), a new spec, deletion, metadata
// and resyncs.
func notOwnStatus(g *statusGate) predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		if o == nil || n == nil || o.GetResourceVersion() == n.GetResourceVersion() {
			return true
		}
		statusOnly := o.GetGeneration() == n.GetGeneration() &&
			o.GetDeletionTimestamp().IsZero() == n.GetDeletionTimestamp().IsZero() &&
			slices.Equal(o.GetFinalizers(), n.GetFinalizers()) &&
			maps.Equal(o.GetLabels(), n.GetLabels()) && maps.Equal(o.GetAnnotations(), n.GetAnnotations())
		return !statusOnly || !g.ownWrite(n.GetName(), n.GetResourceVersion())
	}}
}

var readyStatus = planner.ReadyStatus
