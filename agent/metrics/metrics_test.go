package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/measure"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func throttling(ns, name string, optedIn bool, periods, throttled int64, d time.Duration) v1alpha1.PodThrottling {
	return v1alpha1.PodThrottling{Namespace: ns, Name: name, OptedIn: optedIn, Periods: periods, Throttled: throttled,
		ThrottledTime: &metav1.Duration{Duration: d}}
}

func hist(ns ...uint64) *measure.Hist {
	var h measure.Hist
	for _, v := range ns {
		h.Record(v, 1)
	}
	return &h
}

// TestCollectorCountsPodsWhileMeasured: window deltas add up to counters,
// and a pod that leaves the window (gone from the node) loses its series.
func TestCollectorCountsPodsWhileMeasured(t *testing.T) {
	c := New(host.New(t.TempDir()))
	c.Measured(&measure.Result{AllThrottling: []v1alpha1.PodThrottling{
		throttling("shop", "gw-0", true, 100, 2, 30*time.Millisecond),
		throttling("batch", "tar-0", false, 50, 25, time.Second),
	}})
	c.Measured(&measure.Result{AllThrottling: []v1alpha1.PodThrottling{
		throttling("shop", "gw-0", true, 100, 1, 20*time.Millisecond),
	}})
	want := `
# HELP latencytier_pod_cfs_periods_total CFS periods (nr_periods) of a measured or opted-in pod's cgroup.
# TYPE latencytier_pod_cfs_periods_total counter
latencytier_pod_cfs_periods_total{opted_in="true",pod_name="gw-0",pod_namespace="shop"} 200
# HELP latencytier_pod_throttled_periods_total CFS periods in which the pod was throttled (nr_throttled).
# TYPE latencytier_pod_throttled_periods_total counter
latencytier_pod_throttled_periods_total{opted_in="true",pod_name="gw-0",pod_namespace="shop"} 3
# HELP latencytier_pod_throttled_seconds_total Time the pod was throttled (throttled_time, throttled_usec).
# TYPE latencytier_pod_throttled_seconds_total counter
latencytier_pod_throttled_seconds_total{opted_in="true",pod_name="gw-0",pod_namespace="shop"} 0.05
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "latencytier_pod_cfs_periods_total",
		"latencytier_pod_throttled_periods_total", "latencytier_pod_throttled_seconds_total"); err != nil {
		t.Error(err)
	}
}

// TestCollectorCountsBursts: a pod granted a burst (opted_in false: its
// quota is kept) counts its bursts and the time it ran on them.
func TestCollectorCountsBursts(t *testing.T) {
	c := New(host.New(t.TempDir()))
	for _, n := range []int64{3, 4} {
		p := throttling("shop", "gw-0", false, 100, 0, 0)
		p.Burst, p.Bursts, p.BurstTime = true, n, &metav1.Duration{Duration: time.Duration(n) * 10 * time.Millisecond}
		c.Measured(&measure.Result{AllThrottling: []v1alpha1.PodThrottling{p}})
	}
	want := `
# HELP latencytier_pod_cfs_bursts_total CFS periods in which the pod ran beyond its quota on its burst (nr_bursts; cpuQuota.policy Burst).
# TYPE latencytier_pod_cfs_bursts_total counter
latencytier_pod_cfs_bursts_total{opted_in="false",pod_name="gw-0",pod_namespace="shop"} 7
# HELP latencytier_pod_burst_seconds_total Time the pod ran beyond its quota on its burst (burst_time, burst_usec).
# TYPE latencytier_pod_burst_seconds_total counter
latencytier_pod_burst_seconds_total{opted_in="false",pod_name="gw-0",pod_namespace="shop"} 0.07
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "latencytier_pod_cfs_bursts_total", "latencytier_pod_burst_seconds_total"); err != nil {
		t.Error(err)
	}
}

// TestCollectorSettingStatesAndReasserts: the current state is 1, earlier
// ones 0; re-asserts count; a setting gone from status loses both.
func TestCollectorSettingStatesAndReasserts(t *testing.T) {
	c := New(host.New(t.TempDir()))
	set := func(states ...v1alpha1.SettingState) {
		st := v1alpha1.LatencyNodeStatus{}
		ids := []string{"scheduler/autogroup", "irq/24"}
		for i, s := range states {
			st.Settings = append(st.Settings, v1alpha1.SettingResult{Setting: ids[i], State: s})
		}
		c.Observed(v1alpha1.LatencyNodeSpec{Profile: "gateway"}, st)
	}
	set(v1alpha1.SettingFailed, v1alpha1.SettingApplied)
	c.Reasserted([]string{"irq/24"})
	c.Reasserted([]string{"irq/24"})
	set(v1alpha1.SettingApplied, v1alpha1.SettingApplied)
	want := `
# HELP latencytier_setting_state 1 for each state a setting is in (a pod's settings of one kind count as one), 0 for the states it was in before.
# TYPE latencytier_setting_state gauge
latencytier_setting_state{setting="irq/24",state="Applied"} 1
latencytier_setting_state{setting="scheduler/autogroup",state="Applied"} 1
latencytier_setting_state{setting="scheduler/autogroup",state="Failed"} 0
# HELP latencytier_drift_reasserts_total Times the agent found a setting (a pod's settings of one kind count as one) changed by something else and wrote it back.
# TYPE latencytier_drift_reasserts_total counter
latencytier_drift_reasserts_total{setting="irq/24"} 2
`
	names := []string{"latencytier_setting_state", "latencytier_drift_reasserts_total"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	set(v1alpha1.SettingApplied) // irq/24 left the spec
	want = `
# HELP latencytier_setting_state 1 for each state a setting is in (a pod's settings of one kind count as one), 0 for the states it was in before.
# TYPE latencytier_setting_state gauge
latencytier_setting_state{setting="scheduler/autogroup",state="Applied"} 1
latencytier_setting_state{setting="scheduler/autogroup",state="Failed"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

// TestCollectorBudgetJournalAndClasses: the budget, WithinBudget and
// RunQueueContention carry the profile; the journal's entries are counted on each scrape; class
// labels are lower case, as the alert rules select them.
func TestCollectorBudgetJournalAndClasses(t *testing.T) {
	root := host.New(t.TempDir())
	c := New(root)
	spec := v1alpha1.LatencyNodeSpec{Profile: "gateway", Tuning: v1alpha1.TuningSpec{
		LatencyBudget: &v1alpha1.LatencyBudget{RunQueueP99: &metav1.Duration{Duration: 100 * time.Microsecond}}}}
	c.Observed(spec, v1alpha1.LatencyNodeStatus{Conditions: []metav1.Condition{
		{Type: v1alpha1.NodeWithinBudget, Status: metav1.ConditionFalse},
		{Type: v1alpha1.NodeRunQueueContention, Status: metav1.ConditionTrue}}})
	c.Measured(&measure.Result{Hists: map[string]*measure.Hist{
		measure.ClassNode: hist(1500, 3000), measure.ClassIsolated: hist(3000)}})
	j := journal.New("boot")
	j.Record("scheduler/autogroup", "/proc/sys/kernel/sched_autogroup_enabled", "1", "1", "0")
	j.Record("irq/24", "/proc/irq/24/smp_affinity_list", "0-3", "0-3", "0")
	if err := journal.Save(root, j); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP latencytier_node_runqueue_p99_budget_seconds The profile's latencyBudget.runQueueP99 for this node.
# TYPE latencytier_node_runqueue_p99_budget_seconds gauge
latencytier_node_runqueue_p99_budget_seconds{profile="gateway"} 0.0001
# HELP latencytier_node_within_budget 1 while the node's WithinBudget condition is True, 0 while False.
# TYPE latencytier_node_within_budget gauge
latencytier_node_within_budget{profile="gateway"} 0
# HELP latencytier_node_runqueue_contention 1 while the node's RunQueueContention condition is True (a measured pod waits behind others), 0 while False.
# TYPE latencytier_node_runqueue_contention gauge
latencytier_node_runqueue_contention{profile="gateway"} 1
# HELP latencytier_journal_entries Originals held in the journal (what a revert restores).
# TYPE latencytier_journal_entries gauge
latencytier_journal_entries 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "latencytier_node_runqueue_p99_budget_seconds",
		"latencytier_node_within_budget", "latencytier_node_runqueue_contention", "latencytier_journal_entries"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "latencytier_node_runqueue_latency_seconds"); n != 2 {
		t.Errorf("%d run-queue histograms, want node and isolated", n)
	}
	if lint, err := testutil.CollectAndLint(c); err != nil || len(lint) > 0 {
		t.Errorf("promlint: %v %v", lint, err)
	}
}

// TestCollectorCountsAttributedWaits: each measured pod's wait by class
// accumulates across windows, classes are the only new label (offender
// names never are), and a pod no longer attributed loses its series.
func TestCollectorCountsAttributedWaits(t *testing.T) {
	c := New(host.New(t.TempDir()))
	pod := func(ns, name string, by map[measure.OffenderClass]time.Duration) measure.PodAttribution {
		return measure.PodAttribution{Namespace: ns, Name: name, ByClass: by,
			Offenders: []measure.Offender{{Class: measure.OffenderPod, Name: "batch/tenant-named-this", Wait: time.Second}}}
	}
	c.Measured(&measure.Result{Attribution: []measure.PodAttribution{
		pod("shop", "gw-0", map[measure.OffenderClass]time.Duration{measure.OffenderPod: 300 * time.Millisecond, measure.OffenderIdle: 100 * time.Millisecond}),
		pod("shop", "gw-1", map[measure.OffenderClass]time.Duration{measure.OffenderKernelThread: time.Second}),
	}})
	c.Measured(&measure.Result{Attribution: []measure.PodAttribution{
		pod("shop", "gw-0", map[measure.OffenderClass]time.Duration{measure.OffenderPod: 200 * time.Millisecond}),
	}})
	want := `
# HELP latencytier_pod_runqueue_wait_seconds_total Run-queue wait of a measured pod's tasks, by what ran on its CPU meanwhile (class: SamePod, MeasuredPod, Pod, SystemService, KernelThread, Interrupt, Idle, SelfThrottling, Unattributed, Other). Offender names are in the LatencyNode's status, never labels.
# TYPE latencytier_pod_runqueue_wait_seconds_total counter
latencytier_pod_runqueue_wait_seconds_total{class="Idle",pod_name="gw-0",pod_namespace="shop"} 0.1
latencytier_pod_runqueue_wait_seconds_total{class="Pod",pod_name="gw-0",pod_namespace="shop"} 0.5
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "latencytier_pod_runqueue_wait_seconds_total"); err != nil {
		t.Error(err)
	}
}

// The agent's summarised IRQ line (irq/24-25, count 2) keeps one state
// series per IRQ, as the per-IRQ lines had.
func TestCollectorSummarisedIRQsKeepPerIRQSeries(t *testing.T) {
	c := New(host.New(t.TempDir()))
	c.Observed(v1alpha1.LatencyNodeSpec{Profile: "gateway"}, v1alpha1.LatencyNodeStatus{Settings: []v1alpha1.SettingResult{
		{Setting: "irq/24-25", State: v1alpha1.SettingApplied, Count: 2}, {Setting: "irq/36", State: v1alpha1.SettingImmovable}}})
	want := `
# HELP latencytier_setting_state 1 for each state a setting is in (a pod's settings of one kind count as one), 0 for the states it was in before.
# TYPE latencytier_setting_state gauge
latencytier_setting_state{setting="irq/24",state="Applied"} 1
latencytier_setting_state{setting="irq/25",state="Applied"} 1
latencytier_setting_state{setting="irq/36",state="Immovable"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "latencytier_setting_state"); err != nil {
		t.Error(err)
	}
}

// TestCollectorPodBudgetVerdicts: one series per judged pod, 1 Within, 0
// Outside, none while Unknown; a pod the next window no longer judges
// loses its series.
func TestCollectorPodBudgetVerdicts(t *testing.T) {
	c := New(host.New(t.TempDir()))
	c.Measured(&measure.Result{PodBudgets: []v1alpha1.PodBudgetResult{
		{Namespace: "shop", Name: "web-0", Budget: "web", Verdict: v1alpha1.PodOutsideBudget},
		{Namespace: "shop", Name: "web-1", Budget: "web", Verdict: v1alpha1.PodBudgetUnknown},
		{Namespace: "shop", Name: "batch-0", Budget: "rest", Verdict: v1alpha1.PodWithinBudget},
	}})
	want := `
# HELP latencytier_pod_within_budget 1 while a measured pod's verdict against its measurement.budgets entry (budget) is Within, 0 while Outside; absent while Unknown.
# TYPE latencytier_pod_within_budget gauge
latencytier_pod_within_budget{budget="rest",pod_name="batch-0",pod_namespace="shop"} 1
latencytier_pod_within_budget{budget="web",pod_name="web-0",pod_namespace="shop"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "latencytier_pod_within_budget"); err != nil {
		t.Error(err)
	}
	c.Measured(&measure.Result{PodBudgets: []v1alpha1.PodBudgetResult{
		{Namespace: "shop", Name: "batch-0", Budget: "rest", Verdict: v1alpha1.PodWithinBudget},
	}})
	want = `
# HELP latencytier_pod_within_budget 1 while a measured pod's verdict against its measurement.budgets entry (budget) is Within, 0 while Outside; absent while Unknown.
# TYPE latencytier_pod_within_budget gauge
latencytier_pod_within_budget{budget="rest",pod_name="batch-0",pod_namespace="shop"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "latencytier_pod_within_budget"); err != nil {
		t.Error(err)
	}
}

// TestCollectorPodRunQueueP99: one series per pod with a wait in the
// window, its p99 in seconds; a pod without a wait has no series (its p99
// is unknown, not 0), and a pod the next window does not trace loses its.
func TestCollectorPodRunQueueP99(t *testing.T) {
	c := New(host.New(t.TempDir()))
	c.Measured(&measure.Result{PodRunQueue: map[string]measure.PodRunQueue{
		"shop/web-0":  {Samples: 651, P99: 3770 * time.Microsecond},
		"shop/web-1":  {Samples: 0},
		"batch/job-0": {Samples: 820, P99: 304 * time.Microsecond},
	}})
	want := `
# HELP latencytier_pod_runqueue_p99_seconds A measured pod's own run-queue latency p99 in the latest window (at least one wait, a histogram of its own in the tracer); absent otherwise, and on the schedstat fallback.
# TYPE latencytier_pod_runqueue_p99_seconds gauge
latencytier_pod_runqueue_p99_seconds{pod_name="job-0",pod_namespace="batch"} 0.000304
latencytier_pod_runqueue_p99_seconds{pod_name="web-0",pod_namespace="shop"} 0.00377
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "latencytier_pod_runqueue_p99_seconds"); err != nil {
		t.Error(err)
	}
	c.Measured(&measure.Result{PodRunQueue: map[string]measure.PodRunQueue{
		"batch/job-0": {Samples: 12, P99: 2 * time.Millisecond},
	}})
	want = `
# HELP latencytier_pod_runqueue_p99_seconds A measured pod's own run-queue latency p99 in the latest window (at least one wait, a histogram of its own in the tracer); absent otherwise, and on the schedstat fallback.
# TYPE latencytier_pod_runqueue_p99_seconds gauge
latencytier_pod_runqueue_p99_seconds{pod_name="job-0",pod_namespace="batch"} 0.002
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "latencytier_pod_runqueue_p99_seconds"); err != nil {
		t.Error(err)
	}
}
