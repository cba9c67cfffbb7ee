package controllers

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/profilestatus"
)

// Metrics on the manager's metrics endpoint, registered with
// controller-runtime's registry next to its own controller metrics.
var (
	profileNodes = gaugeVec("latencytier_profile_nodes",
		"Nodes of a LatencyProfile by state (Applied, Pending, Degraded, Drifted, Conflicted, Reverting, Reverted, Unreachable, Stale); state=\"Stale\" counts the nodes whose agent has been silent for more than two heartbeat intervals.",
		"profile", "state")
	profileWorstP99 = gaugeVec("latencytier_profile_worst_runqueue_p99_seconds",
		"Highest p99 run-queue latency reported by a node of the LatencyProfile.",
		"profile")
	profileRolloutNodes = gaugeVec("latencytier_profile_rollout_nodes",
		"Nodes of a LatencyProfile's rollout by their latest verdict (Improved, Unchanged, Regressed, Inconclusive).",
		"profile", "verdict")

	profileRolloutFailed = gaugeVec("latencytier_profile_rollout_failed_nodes",
		"Nodes that hold the LatencyProfile's rollout revision and failed it (regressed, failed to apply or timed out); a rollback that moved them back makes it 0.",
		"profile")
	profileReportInterval = gaugeVec("latencytier_profile_report_interval_seconds",
		"The longest an agent of the LatencyProfile stays silent between two status reports: the longest status.heartbeatInterval its nodes report, else (agents without heartbeats) measurement.interval; absent when it measures nothing and no node reports a heartbeat.",
		"profile")

	// Per node: bounded by the fleet, one series per node a profile owns.
	nodeSelected = gaugeVec("latencytier_node_selected",
		"1 for each node the LatencyProfile owns (selects and wins): its agent should run there.",
		"node", "profile")
	nodeLastReport = gaugeVec("latencytier_node_last_report_timestamp_seconds",
		"When the agent of a node the LatencyProfile owns last wrote its status (status.reportedAt; from agents without it, the end of the latest measurement window, status.latency.measuredAt, when the profile measures); absent before its first report.",
		"node", "profile")
)

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

func init() {
	metrics.Registry.MustRegister(profileNodes, profileWorstP99, profileRolloutNodes, profileRolloutFailed,
		profileReportInterval, nodeSelected, nodeLastReport)
}

var allNodeStates = []v1alpha1.ProfileNodeState{
	v1alpha1.NodeStatePending, v1alpha1.NodeStateApplied, v1alpha1.NodeStateDegraded,
	v1alpha1.NodeStateDrifted, v1alpha1.NodeStateConflicted, v1alpha1.NodeStateReverting,
	v1alpha1.NodeStateReverted, v1alpha1.NodeStateUnreachable, v1alpha1.NodeStateStale,
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
		profileRolloutFailed.WithLabelValues(profile).Set(float64(r.Failed))
	} else {
		profileRolloutNodes.DeletePartialMatch(prometheus.Labels{"profile": profile})
		profileRolloutFailed.DeleteLabelValues(profile)
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
	profileRolloutFailed.DeleteLabelValues(profile)
	profileWorstP99.DeleteLabelValues(profile)
	profileReportInterval.DeleteLabelValues(profile)
	recordNodeMetrics(profile, nil)
}

// agentMeasureInterval is the agent's measurement interval when the
// profile names none (agent/loop's defaultMeasureInterval).
const agentMeasureInterval = 30 * time.Second

// nodeReport is a node a profile owns and when its agent last reported.
type nodeReport struct {
	node       string
	lastReport *time.Time // nil: no report, or the profile measures nothing
	heartbeat  time.Duration
}

// nodeReports lists the nodes in.Profile owns (as status and the rollout
// count them: it wins them, no tie) and their agents' latest reports.
func nodeReports(in profilestatus.Input) []nodeReport {
	name := in.Profile.Name
	measured := !unmeasured(in.Profile)
	var out []nodeReport
	for i := range in.Nodes {
		node := &in.Nodes[i]
		if in.Resolution(node).Winner != name {
			continue
		}
		r := nodeReport{node: node.Name}
		ln := in.LatencyNodes[node.Name]
		switch {
		case ln == nil:
		case ln.Status.ReportedAt != nil:
			t := ln.Status.ReportedAt.Time
			r.lastReport = &t
		case measured && ln.Status.Latency != nil && ln.Status.Latency.MeasuredAt != nil:
			t := ln.Status.Latency.MeasuredAt.Time
			r.lastReport = &t
		}
		if ln != nil && ln.Status.HeartbeatInterval != nil {
			r.heartbeat = ln.Status.HeartbeatInterval.Duration
		}
		out = append(out, r)
	}
	return out
}

// reportInterval is how often p's agents report, false when they measure
// nothing.
func reportInterval(p *v1alpha1.LatencyProfile) (time.Duration, bool) {
	if unmeasured(p) {
		return 0, false
	}
	if m := p.Spec.Measurement; m != nil && m.Interval != nil && m.Interval.Duration > 0 {
		return m.Interval.Duration, true
	}
	return agentMeasureInterval, true
}

// longestHeartbeat is the longest heartbeatInterval the reports carry (0:
// none, agents that report every measurement window).
func longestHeartbeat(reports []nodeReport) time.Duration {
	var hb time.Duration
	for _, r := range reports {
		hb = max(hb, r.heartbeat)
	}
	return hb
}

// recordProfileReports sets the report interval and the per-node series
// of one pass of profile p.
func recordProfileReports(p *v1alpha1.LatencyProfile, reports []nodeReport) {
	d, ok := reportInterval(p)
	if hb := longestHeartbeat(reports); hb > 0 {
		// Agents with heartbeats write only on change and every heartbeat.
		d, ok = hb, true
	}
	if ok {
		profileReportInterval.WithLabelValues(p.Name).Set(d.Seconds())
	} else {
		profileReportInterval.DeleteLabelValues(p.Name)
	}
	recordNodeMetrics(p.Name, reports)
}

// nodeSeries remembers which nodes hold series of each profile, so a pass
// drops exactly the nodes the profile no longer owns (deleting and
// re-adding all would show a scrape between the two no nodes at all).
var nodeSeries = struct {
	sync.Mutex
	byProfile map[string]map[string]bool
}{byProfile: map[string]map[string]bool{}}

// recordNodeMetrics sets profile's per-node series to reports (none: the
// profile is gone).
func recordNodeMetrics(profile string, reports []nodeReport) {
	nodeSeries.Lock()
	defer nodeSeries.Unlock()
	now := make(map[string]bool, len(reports))
	for _, r := range reports {
		now[r.node] = true
		nodeSelected.WithLabelValues(r.node, profile).Set(1)
		if r.lastReport != nil {
			nodeLastReport.WithLabelValues(r.node, profile).Set(float64(r.lastReport.Unix()))
		} else {
			nodeLastReport.DeleteLabelValues(r.node, profile)
		}
	}
	for node := range nodeSeries.byProfile[profile] {
		if !now[node] {
			nodeSelected.DeleteLabelValues(node, profile)
			nodeLastReport.DeleteLabelValues(node, profile)
		}
	}
	if len(now) == 0 {
		delete(nodeSeries.byProfile, profile)
		return
	}
	nodeSeries.byProfile[profile] = now
}
