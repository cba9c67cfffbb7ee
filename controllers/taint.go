package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
	"latencytier.io/latencytier/controllers/planner"
)

// The tuning-ready gate (issue 26): a node a profile owns carries the
// NoSchedule taint v1alpha1.TuningPendingTaint from the moment it is
// selected (or joins, or boots anew) until its agent reports the profile
// Applied for the LatencyNode's current generation in the node's current
// boot. The tier's pods do not tolerate it, so they land only on tuned
// nodes. The manager patches that one taint and nothing else of the
// node's taints (the admission policy latencytier-manager-node-labels holds
// it to that).

// The gate's decision (planner/taint.go); these names keep its code as it
// reads.
var (
	pendingTaint      = planner.PendingTaint
	wantsPendingTaint = planner.WantsPendingTaint
	hasTaint          = planner.HasTaint
)

// The node facts live with the planner's decisions (planner/node.go);
// these names keep the gate's code as it reads.
var (
	appliedThisBoot = planner.AppliedThisBoot
	refusedInvalid  = planner.RefusedInvalid
	notReady        = planner.NotReady
	tunedThisBoot   = planner.TunedThisBoot
)

// taintReconciler keeps the tuning-ready gate of one node.
type taintReconciler struct {
	client.Client
	// Cache reads the node and its LatencyNode; Live reads a node afresh
	// after a conflicting write.
	Cache, Live client.Reader
	// Recorder records the taint lifted over settings refused as Invalid
	// (nil: no events).
	Recorder events.EventRecorder
}

// Event of the gate: the taint lifted with settings the kernel refused.
const (
	eventTaintLiftedDegraded = "TaintLiftedWithInvalidSettings"
	eventActionTaint         = "Untaint"
)

// Reconcile sets or clears the node's pending taint.
func (r *taintReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	n := &corev1.Node{}
	if err := r.Cache.Get(ctx, req.NamespacedName, n); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ln := &v1alpha1.LatencyNode{}
	if err := r.Cache.Get(ctx, req.NamespacedName, ln); apierrors.IsNotFound(err) {
		ln = nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("getting LatencyNode: %w", err)
	}
	if ln == nil && n.Labels[v1alpha1.ProfileLabel] != "" {
		// Selected a moment ago (the selection wrote the taint with the
		// label) with its LatencyNode not created yet, or deselected
		// with the label not removed yet: the LatencyNode's creation or
		// the label's removal decides, so lift nothing and add nothing.
		return ctrl.Result{}, nil
	}
	want := wantsPendingTaint(n, ln)
	wrote, err := executor.New(r.Client, r.Live).SetNodeTaint(ctx, n, pendingTaint, want)
	if err != nil {
		return ctrl.Result{}, err
	}
	if wrote {
		ctrl.LoggerFrom(ctx).Info("Patched the tuning-pending taint", "present", want)
	}
	if invalid := refusedInvalid(orEmpty(ln)); wrote && !want && len(invalid) > 0 && r.Recorder != nil {
		r.Recorder.Eventf(ln, nil, corev1.EventTypeWarning, eventTaintLiftedDegraded, eventActionTaint,
			"Lifted the tuning-pending taint of node %s: every setting applied but %s, which the kernel refused as Invalid (the profile stays Degraded)",
			n.Name, names(invalid))
	}
	return ctrl.Result{}, nil
}

// taintInputsChanged passes the node events the gate acts on: creation,
// deletion, resyncs and a change of taints, boot id, readiness or profile
// label.
func taintInputsChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, okO := e.ObjectOld.(*corev1.Node)
		n, okN := e.ObjectNew.(*corev1.Node)
		if !okO || !okN || o.ResourceVersion == n.ResourceVersion {
			return true
		}
		return hasTaint(o.Spec.Taints, pendingTaint) != hasTaint(n.Spec.Taints, pendingTaint) ||
			o.Status.NodeInfo.BootID != n.Status.NodeInfo.BootID || notReady(o) != notReady(n) ||
			o.Labels[v1alpha1.ProfileLabel] != n.Labels[v1alpha1.ProfileLabel]
	}}
}

// latencyNodeGateChanged passes the LatencyNode events that can move the
// gate: all but a report that changes neither the generation observed,
// the Applied condition nor the boot id.
func latencyNodeGateChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, okO := e.ObjectOld.(*v1alpha1.LatencyNode)
		n, okN := e.ObjectNew.(*v1alpha1.LatencyNode)
		if !okO || !okN {
			return true
		}
		return gateKey(o) != gateKey(n)
	}}
}

// gateKey is what of a LatencyNode the gate reads.
func gateKey(ln *v1alpha1.LatencyNode) string {
	applied := ""
	if c := meta.FindStatusCondition(ln.Status.Conditions, v1alpha1.NodeApplied); c != nil {
		applied = string(c.Status)
	}
	boot := ""
	if ln.Status.Boot != nil {
		boot = ln.Status.Boot.BootID
	}
	return fmt.Sprintf("%d/%d/%s/%v/%s/%s/%s/%v", ln.Generation, ln.Status.ObservedGeneration, applied,
		refusedInvalid(ln), boot, ln.Spec.Action, ln.Spec.Profile, ln.DeletionTimestamp.IsZero())
}

// orEmpty is ln, or an empty LatencyNode for nil.
func orEmpty(ln *v1alpha1.LatencyNode) *v1alpha1.LatencyNode {
	if ln == nil {
		return &v1alpha1.LatencyNode{}
	}
	return ln
}

// setupTaints registers the tuning-ready gate's controller: one reconcile
// per node, on its node's and its LatencyNode's events (same name).
func setupTaints(mgr ctrl.Manager, rec events.EventRecorder) error {
	r := &taintReconciler{Client: mgr.GetClient(), Cache: mgr.GetCache(), Live: mgr.GetAPIReader(), Recorder: rec}
	err := ctrl.NewControllerManagedBy(mgr).Named("taint").
		For(&corev1.Node{}, builder.WithPredicates(taintInputsChanged())).
		Watches(&v1alpha1.LatencyNode{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(latencyNodeGateChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up taint controller: %w", err)
	}
	return nil
}
