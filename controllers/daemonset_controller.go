package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// daemonSetReconciler keeps the agent DaemonSet as renderAgentDaemonSet
// renders it: it creates it once a LatencyProfile exists and puts it back
// when someone edits or deletes it.
type daemonSetReconciler struct {
	client.Client
	Recorder events.EventRecorder
	Agent    agentOptions
}

// key is the one object this reconciler manages.
func (r *daemonSetReconciler) key() client.ObjectKey {
	return client.ObjectKey{Namespace: r.Agent.Namespace, Name: agentDaemonSetName}
}

// Reconcile creates or repairs the agent DaemonSet.
func (r *daemonSetReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	desired := renderAgentDaemonSet(r.Agent)
	actual := &appsv1.DaemonSet{}
	err := r.Get(ctx, r.key(), actual)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, r.create(ctx, desired)
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("getting agent DaemonSet: %w", err)
	}
	if !daemonSetDrifted(desired, actual) {
		return ctrl.Result{}, nil
	}
	repaired := repairedDaemonSet(desired, actual)
	if err := r.Patch(ctx, repaired, client.MergeFromWithOptions(actual, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, ignoreStale(ctx, fmt.Errorf("repairing agent DaemonSet: %w", err))
	}
	ctrl.LoggerFrom(ctx).Info("Repaired agent DaemonSet")
	r.Recorder.Eventf(repaired, nil, corev1.EventTypeWarning, eventAgentRepaired, eventActionRepair,
		"Agent DaemonSet differed from what the controller renders; put back")
	return ctrl.Result{}, nil
}

func (r *daemonSetReconciler) create(ctx context.Context, ds *appsv1.DaemonSet) error {
	if err := r.Create(ctx, ds); err != nil {
		return ignoreStale(ctx, fmt.Errorf("creating agent DaemonSet: %w", err))
	}
	ctrl.LoggerFrom(ctx).Info("Created agent DaemonSet", "image", r.Agent.Image)
	return nil
}
