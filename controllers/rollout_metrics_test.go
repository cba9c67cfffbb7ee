package controllers

import (
	"testing"

	"latencytier.io/latencytier/api/v1alpha1"
)

// TestRolloutVerdictMetrics: the alert LatencyTierRolloutRegressed
// (config/prometheus) reads latencytier_profile_rollout_nodes.
func TestRolloutVerdictMetrics(t *testing.T) {
	const profile = "rollout-metrics"
	st := v1alpha1.LatencyProfileStatus{Rollout: &v1alpha1.RolloutStatus{Improved: 2, Regressed: 1}}
	recordProfileMetrics(profile, nil, st)
	for verdict, want := range map[string]float64{"Improved": 2, "Unchanged": 0, "Regressed": 1, "Inconclusive": 0} {
		if got, ok := gauge(t, "latencytier_profile_rollout_nodes", map[string]string{"profile": profile, "verdict": verdict}); !ok || got != want {
			t.Errorf("verdict %s: got %v (present %v), want %v", verdict, got, ok, want)
		}
	}
	forgetProfileMetrics(profile)
	if _, ok := gauge(t, "latencytier_profile_rollout_nodes", map[string]string{"profile": profile}); ok {
		t.Error("series of a deleted profile still exported")
	}
}
