package controllers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/planner"
	"latencytier.io/latencytier/controllers/profilestatus"
)

// TestNodeReportMetrics: the alerts LatencyTierAgentDown and
// LatencyTierNodeStatusStale (config/prometheus) read
// latencytier_node_selected, latencytier_node_last_report_timestamp_seconds
// and latencytier_profile_report_interval_seconds. Only the nodes the
// profile owns get series (not a node another profile wins, not a tie);
// a node it stops owning and a deleted profile lose them.
func TestNodeReportMetrics(t *testing.T) {
	gw := profile("node-metrics-gw", 10, map[string]string{"tier": "gw"})
	gw.Spec.Measurement = &v1alpha1.MeasurementSpec{Interval: &metav1.Duration{Duration: 2 * time.Minute}}
	other := profile("node-metrics-other", 20, map[string]string{"other": "yes"})
	tie := profile("node-metrics-tie", 10, map[string]string{"tie": "yes"})
	cands, _ := planner.CompileProfiles([]v1alpha1.LatencyProfile{gw, other, tie})
	node := func(name string, labels ...string) corev1.Node {
		l := map[string]string{}
		for _, k := range labels {
			l[k] = map[string]string{"tier": "gw", "other": "yes", "tie": "yes"}[k]
		}
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	}
	reported := time.Unix(1_800_000_000, 0)
	in := profilestatus.Input{Profile: &gw, Candidates: cands,
		Nodes: []corev1.Node{node("nm-1", "tier"), node("nm-2", "tier"), node("nm-won-elsewhere", "tier", "other"), node("nm-tied", "tier", "tie")},
		LatencyNodes: map[string]*v1alpha1.LatencyNode{
			"nm-1": {Status: v1alpha1.LatencyNodeStatus{Latency: &v1alpha1.LatencyStatus{MeasuredAt: &metav1.Time{Time: reported}}}},
		}}
	recordProfileReports(&gw, nodeReports(in))

	want := func(metric string, lbls map[string]string, v float64) {
		t.Helper()
		if got, ok := gauge(t, metric, lbls); !ok || got != v {
			t.Errorf("%s%v = %v (present %v), want %v", metric, lbls, got, ok, v)
		}
	}
	absent := func(metric string, lbls map[string]string) {
		t.Helper()
		if got, ok := gauge(t, metric, lbls); ok {
			t.Errorf("%s%v = %v, want no series", metric, lbls, got)
		}
	}
	want("latencytier_node_selected", map[string]string{"node": "nm-1", "profile": gw.Name}, 1)
	want("latencytier_node_selected", map[string]string{"node": "nm-2", "profile": gw.Name}, 1)
	absent("latencytier_node_selected", map[string]string{"node": "nm-won-elsewhere"})
	absent("latencytier_node_selected", map[string]string{"node": "nm-tied"})
	want("latencytier_node_last_report_timestamp_seconds", map[string]string{"node": "nm-1", "profile": gw.Name}, 1_800_000_000)
	absent("latencytier_node_last_report_timestamp_seconds", map[string]string{"node": "nm-2"}) // no report yet
	want("latencytier_profile_report_interval_seconds", map[string]string{"profile": gw.Name}, 120)

	// nm-2 leaves the profile; measurement is switched off.
	in.Nodes = in.Nodes[:1]
	gw.Spec.Measurement = &v1alpha1.MeasurementSpec{Source: v1alpha1.MeasurementDisabled}
	recordProfileReports(&gw, nodeReports(in))
	want("latencytier_node_selected", map[string]string{"node": "nm-1", "profile": gw.Name}, 1)
	absent("latencytier_node_selected", map[string]string{"node": "nm-2"})
	absent("latencytier_node_last_report_timestamp_seconds", map[string]string{"node": "nm-1"})
	absent("latencytier_profile_report_interval_seconds", map[string]string{"profile": gw.Name})

	forgetProfileMetrics(gw.Name)
	absent("latencytier_node_selected", map[string]string{"profile": gw.Name})
}

// TestRolloutFailedNodesMetric: LatencyTierRolloutRegressed reads
// latencytier_profile_rollout_failed_nodes, the nodes still holding the
// failed revision; it is 0 once the rollback moved them back although the
// Regressed verdicts stay on record.
func TestRolloutFailedNodesMetric(t *testing.T) {
	const p = "rollout-failed-metric"
	recordProfileMetrics(p, nil, v1alpha1.LatencyProfileStatus{Rollout: &v1alpha1.RolloutStatus{
		Phase: v1alpha1.RolloutCanary, Failed: 1, Regressed: 1}})
	if got, ok := gauge(t, "latencytier_profile_rollout_failed_nodes", map[string]string{"profile": p}); !ok || got != 1 {
		t.Errorf("during the regression: %v (present %v), want 1", got, ok)
	}
	recordProfileMetrics(p, nil, v1alpha1.LatencyProfileStatus{Rollout: &v1alpha1.RolloutStatus{
		Phase: v1alpha1.RolloutRolledBack, RolledBack: 1, Waiting: 3, Regressed: 1}})
	if got, ok := gauge(t, "latencytier_profile_rollout_failed_nodes", map[string]string{"profile": p}); !ok || got != 0 {
		t.Errorf("after the rollback: %v (present %v), want 0", got, ok)
	}
	forgetProfileMetrics(p)
	if _, ok := gauge(t, "latencytier_profile_rollout_failed_nodes", map[string]string{"profile": p}); ok {
		t.Error("series of a deleted profile still exported")
	}
}
