package planner

import (
	corev1 "k8s.io/api/core/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// The tuning-ready gate's decision (issue 26; the gate writes it in
// controllers/taint.go): whether a node carries the NoSchedule taint
// v1alpha1.TuningPendingTaint.

// PendingTaint is the taint the gate keeps.
var PendingTaint = corev1.Taint{Key: v1alpha1.TuningPendingTaint, Effect: corev1.TaintEffectNoSchedule}

// WantsPendingTaint: the node is selected (its LatencyNode applies or
// measures a profile) and not tuned in its running boot, or not Ready. The
// taint goes on while the node is NotReady (the kubelet's graceful node
// shutdown reports it before an orderly reboot; the node lifecycle
// controller reports a silent node Unknown), so a node that reboots
// unplanned comes back Ready already tainted instead of the manager racing
// the scheduler once the new boot id shows. The taint comes
// off only once the agent reported the LatencyNode's current generation
// Applied in this boot; once off it stays off while the node is Applied in
// the same boot, so a later spec write (a rollout move, a reboot record)
// does not churn it. The node's own taint is the gate's memory: a
// restarted manager reads it back.
func WantsPendingTaint(n *corev1.Node, ln *v1alpha1.LatencyNode) bool {
	if ln == nil || !ln.DeletionTimestamp.IsZero() || ln.Spec.Profile == "" || ln.Spec.Action == v1alpha1.ActionRevert {
		return false
	}
	if !AppliedThisBoot(n, ln) || NotReady(n) {
		return true
	}
	return HasTaint(n.Spec.Taints, PendingTaint) && ln.Status.ObservedGeneration < ln.Generation
}

// HasTaint reports whether taints holds key with effect.
func HasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	for _, have := range taints {
		if have.Key == t.Key && have.Effect == t.Effect {
			return true
		}
	}
	return false
}
