package profilestatus

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// profileConditions are Ready, Progressing and Degraded for st, stamped with
// now: the caller's meta.SetStatusCondition keeps that time only for a
// condition whose status changed.
func profileConditions(p *v1alpha1.LatencyProfile, st *v1alpha1.LatencyProfileStatus, t lineTally, now time.Time) []metav1.Condition {
	gen := p.Generation
	cond := func(typ string, ok bool, reason, msg string) metav1.Condition {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now)}
	}
	deleting := !p.DeletionTimestamp.IsZero()
	return []metav1.Condition{
		readyCondition(cond, deleting, st, t),
		progressingCondition(cond, deleting, st.Rollout, t),
		degradedCondition(cond, st),
	}
}

type condFunc func(typ string, ok bool, reason, msg string) metav1.Condition

func readyCondition(cond condFunc, deleting bool, st *v1alpha1.LatencyProfileStatus, t lineTally) metav1.Condition {
	r := v1alpha1.ProfileReady
	switch {
	case deleting:
		return cond(r, false, v1alpha1.ReasonReverting, fmt.Sprintf("profile deleted; %d node(s) still reverting", t.reverting))
	case st.Matched == 0:
		return cond(r, false, v1alpha1.ReasonNoNodesMatched, "nodeSelector matches no node this profile can own")
	case st.Degraded > 0 && st.Stale == st.Degraded:
		return cond(r, false, v1alpha1.ReasonStaleReports, fmt.Sprintf("%d of %d node(s) stale", st.Stale, st.Matched))
	case st.Degraded > 0:
		return cond(r, false, v1alpha1.ReasonNodesDegraded, fmt.Sprintf("%d of %d node(s) degraded", st.Degraded, st.Matched))
	case st.Conflicted > 0:
		return cond(r, false, v1alpha1.ReasonNodeConflict, fmt.Sprintf("%d node(s) selected with equal priority by another profile", st.Conflicted))
	case rolledBack(st.Rollout):
		// Whatever the nodes report: the pass that rolls back writes this
		// status before it moves them, so they may all still hold the
		// revision that regressed. None will keep it.
		return cond(r, false, string(st.Rollout.Phase), "the rollout rolled back: "+st.Rollout.Message)
	case int(st.Applied) < t.won && stopped(st.Rollout):
		return cond(r, false, string(st.Rollout.Phase), fmt.Sprintf("%d of %d node(s) hold this revision; the rollout stopped: %s",
			st.Applied, t.won, st.Rollout.Message))
	case int(st.Applied) < t.won:
		return cond(r, false, v1alpha1.ReasonApplying, fmt.Sprintf("%d of %d node(s) applied", st.Applied, t.won))
	default:
		return cond(r, true, v1alpha1.ReasonAllNodesApplied, fmt.Sprintf("%d node(s) applied", st.Applied))
	}
}

// rolledBack says the rollout of the spec's revision ended by moving its
// nodes back: no node keeps that revision until the spec changes.
func rolledBack(r *v1alpha1.RolloutStatus) bool {
	return r != nil && r.Phase == v1alpha1.RolloutRolledBack
}

// stopped says a rollout stands still until the spec (or paused) changes:
// rolled back, or paused. Its nodes wait by decision, not in progress.
func stopped(r *v1alpha1.RolloutStatus) bool {
	return r != nil && (r.Phase == v1alpha1.RolloutRolledBack || r.Phase == v1alpha1.RolloutPaused)
}

func progressingCondition(cond condFunc, deleting bool, rollout *v1alpha1.RolloutStatus, t lineTally) metav1.Condition {
	r := v1alpha1.ProfileProgressing
	switch {
	case deleting || t.reverting > 0:
		return cond(r, true, v1alpha1.ReasonReverting, fmt.Sprintf("%d node(s) reverting", t.reverting))
	case stopped(rollout):
		return cond(r, false, string(rollout.Phase), "the rollout stopped: "+rollout.Message)
	case t.pending > 0:
		return cond(r, true, v1alpha1.ReasonApplying, fmt.Sprintf("%d node(s) pending", t.pending))
	default:
		return cond(r, false, v1alpha1.ReasonAsExpected, "no node is changing")
	}
}

func degradedCondition(cond condFunc, st *v1alpha1.LatencyProfileStatus) metav1.Condition {
	r := v1alpha1.ProfileDegraded
	switch {
	case st.Degraded > 0 && st.Stale == st.Degraded:
		return cond(r, true, v1alpha1.ReasonStaleReports, staleMessage(st.Stale))
	case st.Degraded > 0 && st.Stale > 0:
		return cond(r, true, v1alpha1.ReasonNodesDegraded, fmt.Sprintf("%d node(s) failed, drifted, unreachable or stale; %s",
			st.Degraded, staleMessage(st.Stale)))
	case st.Degraded > 0:
		return cond(r, true, v1alpha1.ReasonNodesDegraded, fmt.Sprintf("%d node(s) failed, drifted or unreachable", st.Degraded))
	case st.Conflicted > 0:
		return cond(r, true, v1alpha1.ReasonNodeConflict, fmt.Sprintf("%d node(s) selected with equal priority by another profile get no profile", st.Conflicted))
	case st.OutsideBudget > 0:
		return cond(r, true, v1alpha1.ReasonOutsideBudget, fmt.Sprintf("%d node(s) outside the latency budget", st.OutsideBudget))
	default:
		return cond(r, false, v1alpha1.ReasonAsExpected, "no node is degraded")
	}
}

func staleMessage(n int32) string {
	return fmt.Sprintf("%d node(s) stale: their agent has not reported for more than two heartbeat intervals", n)
}
