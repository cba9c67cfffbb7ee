package controllers

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// eventAgentHostPID is the event recorded when the agent DaemonSet gains or
// loses hostPID (a profile grants realtime, or none does any more), with
// its actions.
const (
	eventAgentHostPID   = "AgentHostPID"
	eventActionGrant    = "Grant"
	eventActionWithdraw = "Withdraw"
)

// daemonSetReconciler keeps the agent DaemonSet as renderAgentDaemonSet
// renders it: it creates it once a LatencyProfile exists, puts it back when
// someone edits or deletes it, and grants or withdraws hostPID as profiles
// grant realtime and agents report real-time threads to restore.
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
	var profiles v1alpha1.LatencyProfileList
	if err := r.List(ctx, &profiles); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing profiles: %w", err)
	}
	// Read only: no copy of every node's status out of the cache.
	var nodes v1alpha1.LatencyNodeList
	if err := r.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing LatencyNodes: %w", err)
	}
	granting := hostPIDReasons(realtimeGranted(profiles.Items), threadsHeld(nodes.Items))
	desired := renderAgentDaemonSet(r.Agent, len(granting) > 0)
	actual := &appsv1.DaemonSet{}
	err := r.Get(ctx, r.key(), actual)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, r.create(ctx, desired, granting)
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
	hostPID := desired.Spec.Template.Spec.HostPID
	if actual.Spec.Template.Spec.HostPID != hostPID {
		r.hostPIDChanged(ctx, repaired, granting)
		// Whether anything besides hostPID differed.
		actual = actual.DeepCopy()
		actual.Spec.Template.Spec.HostPID = hostPID
		if !daemonSetDrifted(desired, actual) {
			return ctrl.Result{}, nil
		}
	}
	ctrl.LoggerFrom(ctx).Info("Repaired agent DaemonSet")
	r.Recorder.Eventf(repaired, nil, corev1.EventTypeWarning, eventAgentRepaired, eventActionRepair,
		"Agent DaemonSet differed from what the controller renders; put back")
	return ctrl.Result{}, nil
}

// hostPIDChanged logs and records that the agent now shares the host's pid
// namespace, or no longer does, and which profiles decided it.
func (r *daemonSetReconciler) hostPIDChanged(ctx context.Context, ds *appsv1.DaemonSet, granting []string) {
	if len(granting) == 0 {
		ctrl.LoggerFrom(ctx).Info("Withdrew hostPID from the agent DaemonSet: no profile grants realtime, no thread to restore")
		r.Recorder.Eventf(ds, nil, corev1.EventTypeNormal, eventAgentHostPID, eventActionWithdraw,
			"Withdrew hostPID from the agent: no LatencyProfile grants realtime and no agent holds real-time threads")
		return
	}
	ctrl.LoggerFrom(ctx).Info("Granted hostPID to the agent DaemonSet: realtime granted or real-time threads to restore", "by", granting)
	r.Recorder.Eventf(ds, nil, corev1.EventTypeNormal, eventAgentHostPID, eventActionGrant,
		"Granted hostPID to the agent (sched_setattr names threads in the caller's pid namespace): %s", boundedNames(granting))
}

// hostPIDReasons names what calls for hostPID: profiles granting realtime
// and nodes whose agent still holds thread policies.
func hostPIDReasons(profiles, nodes []string) []string {
	out := make([]string, 0, len(profiles)+len(nodes))
	for _, p := range profiles {
		out = append(out, "LatencyProfile "+p+" grants realtime")
	}
	for _, n := range nodes {
		out = append(out, "node "+n+" has real-time threads to restore")
	}
	return out
}

func (r *daemonSetReconciler) create(ctx context.Context, ds *appsv1.DaemonSet, granting []string) error {
	if err := r.Create(ctx, ds); err != nil {
		return ignoreStale(ctx, fmt.Errorf("creating agent DaemonSet: %w", err))
	}
	ctrl.LoggerFrom(ctx).Info("Created agent DaemonSet", "image", r.Agent.Image,
		"hostPID", ds.Spec.Template.Spec.HostPID, "hostPIDBy", granting)
	return nil
}

// boundedNames joins up to three names, counting the rest, so an event
// message stays short whatever the number of profiles.
func boundedNames(names []string) string {
	const most = 3
	if len(names) <= most {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
}
