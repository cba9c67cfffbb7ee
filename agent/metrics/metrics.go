// Package metrics is the node agent's Prometheus metrics (docs/metrics.md):
// run-queue latency histograms per CPU class, CFS throttling counters and
// attributed run-queue wait per measured pod, setting states, drift
// re-asserts, the latency budget, run-queue contention and the journal's
// size. A Collector is told what the agent did and measured
// (loop.Observer) and renders it on every scrape; the agent's
// controller-runtime metrics server serves it, over HTTPS to tokens the API
// server authenticates and authorizes (internal/metricsauth). Series carry no node
// label: the scraper adds it from the pod's node (config/prometheus).
package metrics

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/irq"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/measure"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

var (
	runQueueDesc = prometheus.NewDesc("latencytier_node_runqueue_latency_seconds",
		"Run-queue latency (wakeup to on CPU) of every measured wakeup since the agent started, by CPU class (node: every CPU).",
		[]string{"class"}, nil)
	budgetDesc = prometheus.NewDesc("latencytier_node_runqueue_p99_budget_seconds",
		"The profile's latencyBudget.runQueueP99 for this node.", []string{"profile"}, nil)
	withinDesc = prometheus.NewDesc("latencytier_node_within_budget",
		"1 while the node's WithinBudget condition is True, 0 while False.", []string{"profile"}, nil)
	contentionDesc = prometheus.NewDesc("latencytier_node_runqueue_contention",
		"1 while the node's RunQueueContention condition is True (a measured pod waits behind others), 0 while False.", []string{"profile"}, nil)
	// podLabels name the measured pod with labels no scraper sets: the
	// Prometheus Operator (and any kubernetes_sd relabelling) sets
	// namespace and pod to the scraped pod's, the agent's own, and would
	// rename ours to exported_namespace / exported_pod.
	podLabels   = []string{"pod_namespace", "pod_name", "opted_in"}
	periodsDesc = prometheus.NewDesc("latencytier_pod_cfs_periods_total",
		"CFS periods (nr_periods) of a measured or opted-in pod's cgroup.", podLabels, nil)
	throttledDesc = prometheus.NewDesc("latencytier_pod_throttled_periods_total",
		"CFS periods in which the pod was throttled (nr_throttled).", podLabels, nil)
	throttledSecDesc = prometheus.NewDesc("latencytier_pod_throttled_seconds_total",
		"Time the pod was throttled (throttled_time, throttled_usec).", podLabels, nil)
	burstsDesc = prometheus.NewDesc("latencytier_pod_cfs_bursts_total",
		"CFS periods in which the pod ran beyond its quota on its burst (nr_bursts; cpuQuota.policy Burst).", podLabels, nil)
	burstSecDesc = prometheus.NewDesc("latencytier_pod_burst_seconds_total",
		"Time the pod ran beyond its quota on its burst (burst_time, burst_usec).", podLabels, nil)
	waitDesc = prometheus.NewDesc("latencytier_pod_runqueue_wait_seconds_total",
		"Run-queue wait of a measured pod's tasks, by what ran on its CPU meanwhile (class: SamePod, MeasuredPod, Pod, SystemService, KernelThread, Interrupt, Idle, SelfThrottling, Unattributed, Other). Offender names are in the LatencyNode's status, never labels.",
		[]string{"pod_namespace", "pod_name", "class"}, nil)
	podBudgetDesc = prometheus.NewDesc("latencytier_pod_within_budget",
		"1 while a measured pod's verdict against its measurement.budgets entry (budget) is Within, 0 while Outside; absent while Unknown.",
		[]string{"pod_namespace", "pod_name", "budget"}, nil)
	podP99Desc = prometheus.NewDesc("latencytier_pod_runqueue_p99_seconds",
		"A measured pod's own run-queue latency p99 in the latest window (at least one wait, a histogram of its own in the tracer); absent otherwise, and on the schedstat fallback.",
		[]string{"pod_namespace", "pod_name"}, nil)
	stateDesc = prometheus.NewDesc("latencytier_setting_state",
		"1 for each state a setting is in (a pod's settings of one kind count as one), 0 for the states it was in before.",
		[]string{"setting", "state"}, nil)
	reassertDesc = prometheus.NewDesc("latencytier_drift_reasserts_total",
		"Times the agent found a setting (a pod's settings of one kind count as one) changed by something else and wrote it back.",
		[]string{"setting"}, nil)
	journalDesc = prometheus.NewDesc("latencytier_journal_entries",
		"Originals held in the journal (what a revert restores).", nil, nil)
)

// podKey names a pod's series.
type podKey struct {
	namespace, name string
	optedIn         bool
}

// waitKey names a pod's attributed wait of one class.
type waitKey struct {
	namespace, name string
	class           measure.OffenderClass
}

// podCounters are a pod's throttling since the agent first measured it.
type podCounters struct {
	periods, throttled, bursts int64
	seconds, burstSeconds      float64
}

// Collector holds the agent's metrics between scrapes. Every label set is
// bounded by what the node holds now: classes by the profile's CPU lists,
// pods by the pods measured in the latest window, settings by the latest
// status; series of what is gone are dropped.
type Collector struct {
	root *host.Root

	mu    sync.Mutex
	hists map[string]*measure.Hist
	pods  map[podKey]*podCounters
	// waits are each measured pod's attributed run-queue wait by class,
	// since the agent first measured it: pods × classes series, no more.
	waits     map[waitKey]time.Duration
	profile   string
	budget    *metav1.Duration
	within    metav1.ConditionStatus
	contended metav1.ConditionStatus
	// podBudgets are the latest window's verdicts: one series per
	// measured pod a budget matches, no more.
	podBudgets []v1alpha1.PodBudgetResult
	// podP99 is the latest window's p99 by pod (namespace, name): one
	// series per pod with a histogram of its own (at most bpf.PodSlots-1).
	podP99    map[[2]string]time.Duration
	states    map[string]map[v1alpha1.SettingState]bool // seriesKey → state → current
	reasserts map[string]uint64                         // seriesKey → count
}

// New returns a Collector that reads the journal under root on each scrape.
func New(root *host.Root) *Collector {
	return &Collector{root: root, hists: map[string]*measure.Hist{}, pods: map[podKey]*podCounters{}, waits: map[waitKey]time.Duration{},
		states: map[string]map[v1alpha1.SettingState]bool{}, reasserts: map[string]uint64{}}
}

// Measured adds one window: its histograms to the running ones, each pod's
// throttling to its counters. Pods the window no longer measures (gone from
// the node, or without a quota and not opted in) lose their series.
func (c *Collector) Measured(res *measure.Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for class, h := range res.Hists {
		if c.hists[class] == nil {
			c.hists[class] = &measure.Hist{}
		}
		c.hists[class].Add(h)
	}
	seen := make(map[podKey]bool, len(res.AllThrottling))
	for _, p := range res.AllThrottling {
		k := podKey{p.Namespace, p.Name, p.OptedIn}
		seen[k] = true
		pc := c.pods[k]
		if pc == nil {
			pc = &podCounters{}
			c.pods[k] = pc
		}
		// Deltas are never negative unless a cgroup was recreated under
		// the same pod: skip those rather than let a counter go down.
		pc.periods += max(p.Periods, 0)
		pc.throttled += max(p.Throttled, 0)
		if p.ThrottledTime != nil && p.ThrottledTime.Duration > 0 {
			pc.seconds += p.ThrottledTime.Seconds()
		}
		pc.bursts += max(p.Bursts, 0)
		if p.BurstTime != nil && p.BurstTime.Duration > 0 {
			pc.burstSeconds += p.BurstTime.Seconds()
		}
	}
	for k := range c.pods {
		if !seen[k] {
			delete(c.pods, k)
		}
	}
	c.addWaits(res.Attribution)
	c.podBudgets = res.PodBudgets
	c.podP99 = podP99(res.PodRunQueue)
}

// podP99 keys the window's per-pod p99 by namespace and name, leaving out
// pods without a wait (their p99 is not 0, it is unknown).
func podP99(rq map[string]measure.PodRunQueue) map[[2]string]time.Duration {
	out := make(map[[2]string]time.Duration, len(rq))
	for key, r := range rq {
		ns, name, ok := strings.Cut(key, "/")
		if !ok || r.Samples <= 0 {
			continue
		}
		out[[2]string{ns, name}] = r.P99
	}
	return out
}

// addWaits adds a window's attributed waits; pods no longer attributed
// (gone, or no longer measured) lose their series.
func (c *Collector) addWaits(att []measure.PodAttribution) {
	measured := map[[2]string]bool{}
	for _, a := range att {
		measured[[2]string{a.Namespace, a.Name}] = true
		for class, d := range a.ByClass {
			if d > 0 {
				c.waits[waitKey{a.Namespace, a.Name, class}] += d
			}
		}
	}
	for k := range c.waits {
		if !measured[[2]string{k.namespace, k.name}] {
			delete(c.waits, k)
		}
	}
}

// conditionGauge is 1 for a True condition, 0 for False, nothing while
// Unknown or absent.
func conditionGauge(ch chan<- prometheus.Metric, d *prometheus.Desc, status metav1.ConditionStatus, profile string) {
	switch status {
	case metav1.ConditionTrue:
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, 1, profile)
	case metav1.ConditionFalse:
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, 0, profile)
	}
}

// Observed takes a pass's status: setting states, the budget and the
// WithinBudget and RunQueueContention conditions. Settings no longer in status lose their series.
// Settings sharing a seriesKey (a pod's threads, containers, incarnations)
// are one series per state: 1 while any of them is in it.
func (c *Collector) Observed(spec v1alpha1.LatencyNodeSpec, st v1alpha1.LatencyNodeStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.profile = spec.Profile
	c.budget = nil
	if b := spec.Tuning.LatencyBudget; b != nil && b.RunQueueP99 != nil {
		c.budget = b.RunQueueP99.DeepCopy()
	}
	c.within, c.contended = "", ""
	if cond := meta.FindStatusCondition(st.Conditions, v1alpha1.NodeWithinBudget); cond != nil {
		c.within = cond.Status
	}
	if cond := meta.FindStatusCondition(st.Conditions, v1alpha1.NodeRunQueueContention); cond != nil {
		c.contended = cond.Status
	}
	now := make(map[string]bool, len(st.Settings))
	for _, s := range perSetting(st.Settings) {
		key := seriesKey(s.Setting)
		states := c.states[key]
		if states == nil {
			states = map[v1alpha1.SettingState]bool{}
			c.states[key] = states
		}
		if !now[key] {
			now[key] = true
			for k := range states {
				states[k] = false
			}
		}
		states[s.State] = true
	}
	for id := range c.states {
		if !now[id] {
			delete(c.states, id)
			delete(c.reasserts, id)
		}
	}
}

// perSetting expands the agent's summarised IRQ lines (count > 1) back
// into one line per IRQ they list, so the state series stay one per IRQ.
// A summary cut to the setting's length ("…+N") yields the IRQs it names.
func perSetting(rs []v1alpha1.SettingResult) []v1alpha1.SettingResult {
	out := make([]v1alpha1.SettingResult, 0, len(rs))
	for _, s := range rs {
		ns, ok := irq.SummaryNumbers(s.Setting)
		if s.Count <= 1 || !ok {
			out = append(out, s)
			continue
		}
		for _, n := range ns {
			one := s
			one.Setting, one.Count = irq.ID(n), 0
			out = append(out, one)
		}
	}
	return out
}

// Reasserted counts one re-assert of each setting.
func (c *Collector) Reasserted(settings []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range settings {
		c.reasserts[seriesKey(id)]++
	}
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{runQueueDesc, budgetDesc, withinDesc, contentionDesc, periodsDesc, throttledDesc,
		throttledSecDesc, burstsDesc, burstSecDesc, waitDesc, podBudgetDesc, podP99Desc, stateDesc, reassertDesc, journalDesc} {
		ch <- d
	}
}

// Collect renders the current values.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for class, h := range c.hists {
		buckets, count, sum := promBuckets(h)
		ch <- prometheus.MustNewConstHistogram(runQueueDesc, count, sum, buckets, strings.ToLower(class))
	}
	if c.budget != nil {
		ch <- prometheus.MustNewConstMetric(budgetDesc, prometheus.GaugeValue, c.budget.Seconds(), c.profile)
	}
	conditionGauge(ch, withinDesc, c.within, c.profile)
	conditionGauge(ch, contentionDesc, c.contended, c.profile)
	for k, pc := range c.pods {
		lv := []string{k.namespace, k.name, strconv.FormatBool(k.optedIn)}
		ch <- prometheus.MustNewConstMetric(periodsDesc, prometheus.CounterValue, float64(pc.periods), lv...)
		ch <- prometheus.MustNewConstMetric(throttledDesc, prometheus.CounterValue, float64(pc.throttled), lv...)
		ch <- prometheus.MustNewConstMetric(throttledSecDesc, prometheus.CounterValue, pc.seconds, lv...)
		ch <- prometheus.MustNewConstMetric(burstsDesc, prometheus.CounterValue, float64(pc.bursts), lv...)
		ch <- prometheus.MustNewConstMetric(burstSecDesc, prometheus.CounterValue, pc.burstSeconds, lv...)
	}
	for k, d := range c.waits {
		ch <- prometheus.MustNewConstMetric(waitDesc, prometheus.CounterValue, d.Seconds(), k.namespace, k.name, string(k.class))
	}
	for _, b := range c.podBudgets {
		switch b.Verdict {
		case v1alpha1.PodWithinBudget:
			ch <- prometheus.MustNewConstMetric(podBudgetDesc, prometheus.GaugeValue, 1, b.Namespace, b.Name, b.Budget)
		case v1alpha1.PodOutsideBudget:
			ch <- prometheus.MustNewConstMetric(podBudgetDesc, prometheus.GaugeValue, 0, b.Namespace, b.Name, b.Budget)
		}
	}
	for k, d := range c.podP99 {
		ch <- prometheus.MustNewConstMetric(podP99Desc, prometheus.GaugeValue, d.Seconds(), k[0], k[1])
	}
	for id, states := range c.states {
		for state, current := range states {
			v := 0.0
			if current {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, v, id, string(state))
		}
	}
	for id, n := range c.reasserts {
		ch <- prometheus.MustNewConstMetric(reassertDesc, prometheus.CounterValue, float64(n), id)
	}
	// The journal is written atomically (rename), so a scrape reads either
	// the old file or the new one. No journal holds nothing; one that does
	// not parse has no size to report (the agent logs and quarantines it).
	j, err := journal.Load(c.root)
	if err != nil {
		return
	}
	var entries int
	if j != nil {
		entries = len(j.Entries)
	}
	ch <- prometheus.MustNewConstMetric(journalDesc, prometheus.GaugeValue, float64(entries))
}
