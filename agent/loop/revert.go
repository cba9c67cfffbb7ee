package loop

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/agent/snapshot"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// shutdownCheckTimeout bounds the API call the agent makes on its way out;
// it stays well inside the pod's termination grace period.
var shutdownCheckTimeout = 10 * time.Second

// revertIfGone restores the journal when the node's LatencyNode no longer
// exists. Any other answer (present, API unreachable, forbidden) keeps the
// tuning: an agent restart or upgrade must not untune a node.
func revertIfGone(ctx context.Context, c client.Reader, e *apply.Engine, nodeName string, log logr.Logger) bool {
	err := c.Get(ctx, client.ObjectKey{Name: nodeName}, &v1alpha1.LatencyNode{})
	if !apierrors.IsNotFound(err) {
		if err != nil {
			log.Info("Kept the node's tuning on shutdown: could not tell whether its LatencyNode exists", "error", err.Error())
		}
		return false
	}
	rep, err := e.Revert()
	if err != nil {
		log.Error(err, "Failed to revert on shutdown although the node's LatencyNode is gone")
		return false
	}
	if len(rep.Results) > 0 {
		log.Info("Reverted on shutdown: the node's LatencyNode is gone", "restores", rep.Written, "conflicts", len(rep.Conflicts()))
	}
	return true
}

func (r *Reconciler) revert(ctx context.Context, ln *v1alpha1.LatencyNode, node snapshot.Node) v1alpha1.LatencyNodeStatus {
	log := ctrl.LoggerFrom(ctx)
	staged := stagedArgs(r.Root, ln.Status.Boot) // before the revert removes them from the journal
	rep, err := r.Engine.Revert()
	r.driftSeen = nil
	if err != nil {
		log.Error(err, "Failed to revert the node's tuning")
	}
	if rep.Written > 0 {
		log.Info("Reverted tuning", "restores", rep.Written, "conflicts", len(rep.Conflicts()))
	}
	layout, _ := sysctl.Probe(r.Root, false)
	kf := facts.ReadOn(r.Root, node.Cmdline, layout.EEVDF, wasMounted(ln))
	pods, _ := r.pods(ctx, measurementOnly(ln.Spec))
	r.held(ln, node, measurementOnly(ln.Spec), pods, err == nil)
	st := revertStatus(ln.Status, revertInput{Node: ln, Report: rep, Err: err, Kernel: kf, Now: metav1.Now()})
	st.Isolation = nil // reverted: nothing of the profile's isolates the CPUs any more
	st.Boot = revertedBoot(r.Root, node.Cmdline, staged)
	return st
}

// revertOrphan restores a journal when the node has no LatencyNode: the
// profile is gone, so nothing may stay tuned.
func (r *Reconciler) revertOrphan(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx)
	rep, err := r.Engine.Revert()
	switch {
	case errors.Is(err, apply.ErrJournalCorrupt):
		log.Error(err, "Left a corrupt journal in place; nothing reverted")
	case err != nil:
		log.Error(err, "Failed to revert a journal without a LatencyNode")
	case len(rep.Results) > 0:
		log.Info("Reverted a journal for a spec this node no longer has", "restores", rep.Written, "conflicts", len(rep.Conflicts()))
	}
}
