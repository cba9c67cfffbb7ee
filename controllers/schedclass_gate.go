package controllers

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/featuregate"
)

// The scheduler class gate: spec.scheduler.class Tier (latencytier's own
// sched_ext scheduler) is experimental, and a manager without
// --feature-gates=TierScheduler=true acts on such a profile as if it did
// not ask for the class. Both reconcilers take the profile through
// gatedProfile before anything is derived from it, so the revision, every
// LatencyNode spec (direct or through a rollout) and the reboots all see
// the same tuning: turning the gate on later makes a new revision, which
// the rollout judges like any other change. The admission policy
// latencytier-tier-scheduler-gate (config/admission) refuses the profile
// outright while the gate is off; this is the manager's own half, for a
// cluster without that policy or a profile that predates it.

// tierRefused reports whether the manager, under gates, leaves p's class
// out: p asks for Tier and the TierScheduler gate is off.
func tierRefused(p *v1alpha1.LatencyProfile, gates featuregate.Gates) bool {
	return asksTier(p) && !gates.Enabled(featuregate.TierScheduler)
}

func asksTier(p *v1alpha1.LatencyProfile) bool {
	s := p.Spec.Scheduler
	return s != nil && s.Class != nil && *s.Class == v1alpha1.SchedulerClassTier
}

// gatedProfile is p as the manager acts on it: p itself, or a copy without
// spec.scheduler.class when tierRefused (without spec.scheduler when the
// class was all it set, so the tuning and its revision are those of the
// profile that never asked). p is never changed: it may be the cache's.
func gatedProfile(p *v1alpha1.LatencyProfile, gates featuregate.Gates) *v1alpha1.LatencyProfile {
	if p == nil || !tierRefused(p, gates) {
		return p
	}
	out := p.DeepCopy()
	out.Spec.Scheduler.Class = nil
	if *out.Spec.Scheduler == (v1alpha1.SchedulerSpec{}) {
		out.Spec.Scheduler = nil
	}
	return out
}

// setSchedulerClassCondition sets p's SchedulerClassAccepted (removed
// when p does not ask for Tier) and reports whether it turned False.
func setSchedulerClassCondition(conds *[]metav1.Condition, p *v1alpha1.LatencyProfile, gates featuregate.Gates, now metav1.Time) bool {
	if !asksTier(p) {
		meta.RemoveStatusCondition(conds, v1alpha1.ProfileSchedulerClassAccepted)
		return false
	}
	was := meta.FindStatusCondition(*conds, v1alpha1.ProfileSchedulerClassAccepted)
	c := metav1.Condition{Type: v1alpha1.ProfileSchedulerClassAccepted, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonFeatureGateEnabled, ObservedGeneration: p.Generation, LastTransitionTime: now,
		Message: fmt.Sprintf("the manager's %s feature gate is on: nodes are given scheduler.class Tier (experimental, docs/sched_ext.md)", featuregate.TierScheduler)}
	if tierRefused(p, gates) {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonFeatureGateDisabled, tierRefusedMessage
	}
	meta.SetStatusCondition(conds, c)
	return c.Status == metav1.ConditionFalse && (was == nil || was.Status != metav1.ConditionFalse)
}

// tierRefusedMessage says why and how to turn the gate on.
var tierRefusedMessage = fmt.Sprintf("scheduler.class Tier is experimental and the manager's %s feature gate is off: no node is given the class, "+
	"the rest of the profile applies; start the manager with --%s=%s=true (Helm: featureGates.%s=true) to allow it",
	featuregate.TierScheduler, featuregate.Flag, featuregate.TierScheduler, featuregate.TierScheduler)

// eventSchedulerClassRefused is the event of a profile whose class the
// gate left out.
const eventSchedulerClassRefused = "SchedulerClassRefused"
