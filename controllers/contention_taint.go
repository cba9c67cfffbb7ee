package controllers

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
	"latencytier.io/latencytier/controllers/planner"
	"latencytier.io/latencytier/controllers/profilestatus"
)

// The contention taint (issue 45): a profile that opts in with
// measurement.contention.taint PreferNoSchedule has its contended nodes
// (RunQueueContention True) tainted v1alpha1.ContentionTaint, at most
// maxTaintedPercent of its nodes at once. The planner decides
// (planner.PlanContentionTaints); this reconciler reads, asks it and
// writes through executor.SetNodeTaint, the tuning-pending taint's own path, and
// writes nothing else: the profile's status pass reports the plan
// (status.contentionTainted, contentionHeldBack) and its event.
//
// One reconcile per profile, so the cap is decided by one pass at a time
// over all of a profile's nodes. The request's name is the profile's, as
// the nodes' label latencytier.io/profile names it; a node carrying the
// taint without that label is reconciled under the name "" (no profile's
// name is empty), and a label naming a profile that no longer exists
// under that name: both plan with no opt-in, so the taint comes off.
type contentionTaintReconciler struct {
	client.Client
	// Cache reads profiles, nodes and LatencyNodes (through the cache's
	// indexes); Live reads a node afresh after a conflicting write.
	Cache, Live client.Reader
}

// Reconcile plans and writes the contention taint of one profile's nodes.
func (r *contentionTaintReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var profiles v1alpha1.LatencyProfileList
	if err := r.Cache.List(ctx, &profiles); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing profiles: %w", err)
	}
	var contention *v1alpha1.ContentionSpec
	if p := findProfile(profiles.Items, req.Name); p != nil {
		contention = profilestatus.ContentionOf(p)
	}
	if !contention.TaintsOnContention() {
		// No opt-in: the plan is every taint off, decided without
		// reading a LatencyNode, from the few nodes that carry the taint.
		// Reading all of the profile's nodes and their LatencyNodes on
		// each of their events cost the manager a pass over the fleet per
		// node that applied: 56 % of its CPU in a 3000-node create.
		nodes, err := r.taintedOf(ctx, req.Name)
		if err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.untaintAll(ctx, nodes)
	}
	nodes, err := r.nodesOf(ctx, req.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	// The profile's selection is the nodes it wins, as its status counts
	// them: a node that still carries its label while it is reverted
	// after leaving it is not, and loses the taint with the rest of the
	// strays (planned with no opt-in).
	cands, _ := planner.CompileProfiles(profiles.Items)
	var owned, strays []planner.ContentionNode
	byName := make(map[string]*corev1.Node, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		byName[n.Name] = n
		cn := planner.ContentionNode{Name: n.Name, Tainted: hasTaint(n.Spec.Taints, planner.ContentionTaint)}
		if req.Name == "" || planner.ResolveNode(n.Labels, cands).Winner != req.Name {
			strays = append(strays, cn)
			continue
		}
		ln := &v1alpha1.LatencyNode{}
		if err := r.Cache.Get(ctx, types.NamespacedName{Name: n.Name}, ln, client.UnsafeDisableDeepCopy); apierrors.IsNotFound(err) {
			ln = nil
		} else if err != nil {
			return ctrl.Result{}, fmt.Errorf("getting LatencyNode: %w", err)
		}
		cn.Contended, cn.Since = planner.ContendedFor(ln, req.Name)
		owned = append(owned, cn)
	}
	plan := planner.PlanContentionTaints(contention, owned)
	plan.Untaint = append(plan.Untaint, planner.PlanContentionTaints(nil, strays).Untaint...)
	return ctrl.Result{}, r.write(ctx, plan, byName)
}

// write carries plan out, off first: a node the plan frees makes room
// under the cap before another is tainted. Each list is one batch of the
// executor's.
func (r *contentionTaintReconciler) write(ctx context.Context, plan planner.ContentionPlan, byName map[string]*corev1.Node) error {
	log := ctrl.LoggerFrom(ctx)
	exec := executor.New(r.Client, r.Live)
	for _, step := range []struct {
		names []string
		want  bool
	}{{plan.Untaint, false}, {plan.Taint, true}} {
		nodes := make([]*corev1.Node, len(step.names))
		for i, name := range step.names {
			nodes[i] = byName[name]
		}
		wrote, err := exec.SetTaints(ctx, nodes, planner.ContentionTaint, step.want)
		for i, name := range step.names {
			switch {
			case wrote[i] && step.want:
				log.Info("Added the contention taint", "node", name, "cap", plan.Cap, "heldBack", plan.HeldBack)
			case wrote[i]:
				log.Info("Removed the contention taint", "node", name)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// untaintAll takes the contention taint off nodes, the plan of a profile
// without the opt-in (planner.PlanContentionTaints with none).
func (r *contentionTaintReconciler) untaintAll(ctx context.Context, nodes []corev1.Node) error {
	byName := make(map[string]*corev1.Node, len(nodes))
	cns := make([]planner.ContentionNode, 0, len(nodes))
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
		cns = append(cns, planner.ContentionNode{Name: nodes[i].Name, Tainted: true})
	}
	return r.write(ctx, planner.PlanContentionTaints(nil, cns), byName)
}

// nodesOf lists the nodes profile owns (its label names it), or for ""
// the nodes carrying the contention taint without a profile label. The
// nodes are the cache's own, read and never changed (the executor
// patches a node of its own).
func (r *contentionTaintReconciler) nodesOf(ctx context.Context, profile string) ([]corev1.Node, error) {
	if profile == "" {
		return r.taintedOf(ctx, "")
	}
	var list corev1.NodeList
	if err := r.Cache.List(ctx, &list, client.MatchingFields{indexNodeProfileLabel: profile}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodes of profile: %w", err)
	}
	return list.Items, nil
}

// taintedOf lists the nodes carrying the contention taint whose profile
// label is profile ("": none), from the cache's taint index: few, whatever
// the size of the fleet.
func (r *contentionTaintReconciler) taintedOf(ctx context.Context, profile string) ([]corev1.Node, error) {
	var list corev1.NodeList
	if err := r.Cache.List(ctx, &list, client.MatchingFields{indexNodeContentionTaint: indexTrue}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodes with the contention taint: %w", err)
	}
	var out []corev1.Node
	for _, n := range list.Items {
		if n.Labels[v1alpha1.ProfileLabel] == profile {
			out = append(out, n)
		}
	}
	return out, nil
}

// contentionRequestOfNode maps a node to the contention taint's request:
// its profile label's value, or "" for a node that carries the taint
// without one; nothing for an unlabelled node without the taint. An update
// maps the old node and the new (controller-runtime enqueues both), so a
// profile a node leaves hears of it.
func contentionRequestOfNode(_ context.Context, obj client.Object) []reconcile.Request {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil
	}
	name := n.Labels[v1alpha1.ProfileLabel]
	if name == "" && !hasTaint(n.Spec.Taints, planner.ContentionTaint) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
}

// contentionRequestOfLatencyNode maps a LatencyNode to the profiles its
// spec and status name.
func contentionRequestOfLatencyNode(_ context.Context, obj client.Object) []reconcile.Request {
	ln, ok := obj.(*v1alpha1.LatencyNode)
	if !ok {
		return nil
	}
	var out []reconcile.Request
	for _, name := range profileNames(ln) {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	}
	return out
}

// contentionNodeChanged passes the node events the taint acts on: all but
// an update that changes neither the node's labels (the profile label,
// and the labels profiles select by) nor the taint.
func contentionNodeChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, okO := e.ObjectOld.(*corev1.Node)
		n, okN := e.ObjectNew.(*corev1.Node)
		if !okO || !okN {
			return true
		}
		return contentionTaintChanged(o, n) || !maps.Equal(o.Labels, n.Labels)
	}}
}

// contentionTaintChanged reports whether the contention taint came or went
// between o and n.
func contentionTaintChanged(o, n *corev1.Node) bool {
	return hasTaint(o.Spec.Taints, planner.ContentionTaint) != hasTaint(n.Spec.Taints, planner.ContentionTaint)
}

// contentionLatencyNodeChanged passes the LatencyNode events that can move
// the taint: all but a report that changes neither the profiles it names
// nor its RunQueueContention condition's status or transition time.
func contentionLatencyNodeChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, okO := e.ObjectOld.(*v1alpha1.LatencyNode)
		n, okN := e.ObjectNew.(*v1alpha1.LatencyNode)
		if !okO || !okN {
			return true
		}
		return contentionKey(o) != contentionKey(n)
	}}
}

// contentionKey is what of a LatencyNode the taint reads.
func contentionKey(ln *v1alpha1.LatencyNode) string {
	status, at := "", time.Time{}
	if c := meta.FindStatusCondition(ln.Status.Conditions, v1alpha1.NodeRunQueueContention); c != nil {
		status, at = string(c.Status), c.LastTransitionTime.Time
	}
	return fmt.Sprintf("%s/%s/%s/%d", ln.Spec.Profile, ln.Status.Profile, status, at.UnixNano())
}

// contentionProfileChanged passes the profile events the taint acts on:
// creation, deletion, the start of deletion and a spec change (its
// measurement.contention, or a selection that may take nodes away);
// status writes are dropped.
func contentionProfileChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, okO := e.ObjectOld.(*v1alpha1.LatencyProfile)
		n, okN := e.ObjectNew.(*v1alpha1.LatencyProfile)
		if !okO || !okN {
			return true
		}
		return o.Generation != n.Generation || o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
	}}
}

// setupContentionTaints registers the contention taint's controller.
func setupContentionTaints(mgr ctrl.Manager) error {
	r := &contentionTaintReconciler{Client: mgr.GetClient(), Cache: mgr.GetCache(), Live: mgr.GetAPIReader()}
	err := ctrl.NewControllerManagedBy(mgr).Named("contentiontaint").
		For(&v1alpha1.LatencyProfile{}, builder.WithPredicates(contentionProfileChanged())).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(contentionRequestOfNode), builder.WithPredicates(contentionNodeChanged())).
		Watches(&v1alpha1.LatencyNode{}, handler.EnqueueRequestsFromMapFunc(contentionRequestOfLatencyNode),
			builder.WithPredicates(contentionLatencyNodeChanged())).
		Complete(retryStale(r))
	if err != nil {
		return fmt.Errorf("setting up contention taint controller: %w", err)
	}
	return nil
}
