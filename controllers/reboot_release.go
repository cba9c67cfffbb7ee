package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Managed reboots of nodes that leave: a node that left the profile's
// selection (or whose LatencyNode another profile took over) is let go,
// uncordoned and its record cleared; a reboot already requested of it is
// taken back first, and the node stays cordoned until that request can no
// longer reboot it; a node released while its LatencyNode still holds a
// record is uncordoned before the record goes with the LatencyNode.

// withdrawGrace is how long after a reboot request was taken back a node
// whose agent has reported since, still Ready in the same boot, stays
// cordoned before it is let go: a reboot the agent had already asked of
// systemd before it read the withdrawal shows by then (the kubelet's
// graceful node shutdown reports NotReady on the way down, then a new
// boot id).
const withdrawGrace = time.Minute

// bootTimeoutOf is p's bootTimeout, the default when p is gone.
func bootTimeoutOf(p *v1alpha1.LatencyProfile) time.Duration {
	if p == nil {
		return defaultBootTimeout
	}
	return rebootLimitsOf(p).Boot
}

// withdrawn: rec is a reboot request taken back from a node no longer to
// be rebooted (it left the selection, or its spec no longer asks for the
// reboot): phase Draining again (the agent reboots only for Rebooting)
// and still the boot id of the request, which a Draining record that was
// never requested lacks. The node stays cordoned under it until
// requestSettled.
func withdrawn(rec *v1alpha1.NodeRebootSpec) bool {
	return rec != nil && rec.Phase == v1alpha1.RebootDraining && rec.BootID != ""
}

// requestSettled: the reboot request rec (standing, or withdrawn) can no
// longer start a reboot of n: the node booted anew since it was made (the
// reboot happened); or the agent reported ln's current generation, so it
// read the record as it is now, in the request's boot, and the node has
// stayed Ready withdrawGrace since rec.Since; or timeout passed since
// rec.Since (an agent that never reports).
func requestSettled(ln *v1alpha1.LatencyNode, n *corev1.Node, now time.Time, timeout time.Duration) bool {
	rec, b := ln.Spec.Reboot, ln.Status.Boot
	if n == nil || !now.Before(rec.Since.Add(timeout)) {
		return true
	}
	agentBoot, kubeletBoot := "", n.Status.NodeInfo.BootID
	if b != nil {
		agentBoot = b.BootID
	}
	if (agentBoot != "" && agentBoot != rec.BootID) || (kubeletBoot != "" && kubeletBoot != rec.BootID) {
		return true
	}
	return ln.Status.ObservedGeneration >= ln.Generation && readyStatus(n) == corev1.ConditionTrue &&
		!now.Before(rec.Since.Add(withdrawGrace))
}

// requestOutstanding: ln holds a reboot request (standing, or withdrawn)
// that may still reboot its node: the node must stay cordoned and its
// LatencyNode stay until it settles (the node controller waits before it
// releases the node).
func requestOutstanding(ln *v1alpha1.LatencyNode, n *corev1.Node, now time.Time, timeout time.Duration) bool {
	rec := ln.Spec.Reboot
	if rec == nil || (rec.Phase != v1alpha1.RebootRequested && !withdrawn(rec)) {
		return false
	}
	return !requestSettled(ln, n, now, timeout)
}

// recordOf: rec was written for a revision of profile (revisionName: the
// profile's name, "-" and hex digits; backSuffix after it for a reboot
// back). A LatencyNode taken over by another profile keeps the record of
// the one it left (a tuning write carries the record over: writeSpec);
// that reboot is not the new profile's to carry on, its node having left
// the selection of the profile it was for.
func recordOf(rec *v1alpha1.NodeRebootSpec, profile string) bool {
	if len(profile) > 253-9 {
		profile = profile[:253-9]
	}
	rest, ok := strings.CutPrefix(strings.TrimSuffix(rec.Revision, backSuffix), profile+"-")
	if !ok || rest == "" || len(rest) > 8 {
		return false
	}
	return strings.Trim(rest, "0123456789abcdef") == ""
}

// nextWithdrawn lets a node go once the request taken back from it has
// settled: rebooted anyway (its agent had read the request) or not
// rebooted and no longer able to. Selected again meanwhile or not, the
// request is not made again for the same record.
func nextWithdrawn(v rebootView) (rebootAct, string) {
	if requestSettled(v.LN, v.Node, v.Now, v.Limits.Boot) {
		return rebootFinish, "the reboot request taken back settled"
	}
	return rebootWait, "waiting until the reboot request taken back can no longer reboot the node"
}

// letGoOfReboot uncordons a node whose LatencyNode, about to be deleted,
// still holds a reboot record: the managed reboots cordoned it (they write
// the record before the cordon and clear it after the uncordon). The
// profile's pass that would let the node go may never come (the profile is
// gone) or come after the deletion (it lost the race to this one), and the
// node would stay cordoned for good. Only the manager's own cordon is
// lifted, the one carrying its marker (uncordonPatch): a person's stays.
func (r *nodeReconciler) letGoOfReboot(ctx context.Context, node *corev1.Node, ln *v1alpha1.LatencyNode) error {
	if ln.Spec.Reboot == nil || !node.Spec.Unschedulable {
		return nil
	}
	patch := uncordonPatch(node)
	if patch == nil {
		return nil
	}
	if err := r.patchNode(ctx, node, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("uncordoning node %s: %w", node.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Uncordoned the node its managed reboot had cordoned", "revision", ln.Spec.Reboot.Revision,
		"phase", ln.Spec.Reboot.Phase)
	return nil
}
