package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Metrics on the manager's metrics endpoint, registered with
// controller-runtime's registry next to its own controller metrics.
var (
	profileNodes = gaugeVec("latencytier_profile_nodes",
		"Nodes of a LatencyProfile by state (Applied, Pending, Degraded, Drifted, Conflicted, Reverting, Reverted, Unreachable).",
		"profile", "state")
	profileWorstP99 = gaugeVec("latencytier_profile_worst_runqueue_p99_seconds",
		"Highest p99 run-queue latency reported by a node of the LatencyProfile.",
		"profile")
	profileRolloutNodes = gaugeVec("latencytier_profile_rollout_nodes",
		"Nodes of a LatencyProfile's rollout by their latest verdict (Improved, Unchanged, Regressed, Inconclusive).",
		"profile", "verdict")

	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "latencytier_reconcile_errors_total",
		Help: "Reconciles that returned an error, by controller.",
	}, []string{"controller"})
)

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

func init() {
	metrics.Registry.MustRegister(profileNodes, profileWorstP99, profileRolloutNodes, reconcileErrors)
}

var allNodeStates = []v1alpha1.ProfileNodeState{
	v1alpha1.NodeStatePending, v1alpha1.NodeStateApplied, v1alpha1.NodeStateDegraded,
	v1alpha1.NodeStateDrifted, v1alpha1.NodeStateConflicted, v1alpha1.NodeStateReverting,
	v1alpha1.NodeStateReverted, v1alpha1.NodeStateUnreachable,
}

// recordProfileMetrics sets the gauges of one profile from its status. The
// per-state counts come from the full node list, not the capped status list.
func recordProfileMetrics(profile string, counts map[v1alpha1.ProfileNodeState]int, st v1alpha1.LatencyProfileStatus) {
	for _, s := range allNodeStates {
		profileNodes.WithLabelValues(profile, string(s)).Set(float64(counts[s]))
	}
	if r := st.Rollout; r != nil {
		for verdict, n := range map[string]int32{v1alpha1.VerdictImproved: r.Improved, v1alpha1.VerdictUnchanged: r.Unchanged,
			v1alpha1.VerdictRegressed: r.Regressed, v1alpha1.VerdictInconclusive: r.Inconclusive} {
			profileRolloutNodes.WithLabelValues(profile, verdict).Set(float64(n))
		}
	} else {
		profileRolloutNodes.DeletePartialMatch(prometheus.Labels{"profile": profile})
	}
	if st.WorstRunQueueP99 == nil {
		profileWorstP99.DeleteLabelValues(profile)
		return
	}
	profileWorstP99.WithLabelValues(profile).Set(st.WorstRunQueueP99.Seconds())
}

// forgetProfileMetrics drops the series of a profile that is gone.
func forgetProfileMetrics(profile string) {
	profileNodes.DeletePartialMatch(prometheus.Labels{"profile": profile})
	profileRolloutNodes.DeletePartialMatch(prometheus.Labels{"profile": profile})
	profileWorstP99.DeleteLabelValues(profile)
}
