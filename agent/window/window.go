// Package window collects one measurement window of a node: the figures
// agent/measure measures, the observations of the node its checks need
// (sysctls, real-time tasks, IRQ counters, irqbalance, kubelet's CPU
// manager, topology), and what agent/findings judges of both: the findings
// and the WithinBudget condition. measure measures; findings judges; this
// package reads the rest and puts them together.
package window

import (
	"context"
	"path/filepath"
	"time"

	"latencytier.io/latencytier/agent/findings"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/bound"
	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/schedext"
	"latencytier.io/latencytier/agent/snapshot"
	"latencytier.io/latencytier/api/v1alpha1"
)

// Input is what a window is collected for: the node's resolved tuning, the
// pods running on it, and the snapshot of the pass that held the tuning
// (agent/snapshot), which the checks decide from instead of reading the
// node again (nil: the Collector reads one).
type Input struct {
	Tuning v1alpha1.TuningSpec
	Pods   []podcgroup.Pod
	Node   *snapshot.Node
}

// Collector is a Measurer with the window's findings and conditions.
type Collector struct {
	m    *measure.Measurer
	root *host.Root
	// irqs and softirqs are /proc/interrupts and /proc/softirqs at the end
	// of the previous window; ok says they were read.
	irqs, softirqs counters
	// contention counts the windows in a row the RunQueueContention
	// condition and the NoisyNeighbor finding need.
	contention findings.Contention
	// sx is the node's sched_ext state at the end of the previous window:
	// a class that changes within a window makes its evidence
	// inconclusive.
	sx schedext.State
	// budgets counts the windows in a row each measured pod's verdict
	// against measurement.budgets needs.
	budgets findings.PodBudgets
}

type counters struct {
	table findings.CounterTable
	ok    bool
}

// New returns a Collector over m, reading the host through m's root.
func New(m *measure.Measurer) *Collector {
	return &Collector{m: m, root: m.Root()}
}

// Start starts the Measurer and takes the counters' baselines.
func (c *Collector) Start(ctx context.Context) error {
	if err := c.m.Start(ctx); err != nil {
		return err
	}
	c.readCounters()
	return nil
}

// Close stops the Measurer.
func (c *Collector) Close() error { return c.m.Close() }

// Source says where run-queue latency comes from (Measurer.Source).
func (c *Collector) Source() string { return c.m.Source() }

// Arm ends the window since the previous Collect without judging it: the
// first window after measurement was off (or of a new Collector) is only
// the start of the counters, and the windows in a row the contention rule
// counts start again.
func (c *Collector) Arm(ctx context.Context, in Input) {
	_, _ = c.Collect(ctx, in)
	c.contention = findings.Contention{}
	c.budgets = findings.PodBudgets{}
}

// Collect ends the window since the previous Collect (or Start): the
// Measurer's Result with the window's findings (the checks' first, most
// severe first, then NoisyNeighbor), its WithinBudget condition and its
// RunQueueContention condition, which counts this window after the
// previous ones.
func (c *Collector) Collect(ctx context.Context, in Input) (*measure.Result, error) {
	cls := classes(in)
	res, err := c.m.Collect(ctx, measure.Input{Tuning: in.Tuning, Pods: in.Pods, Isolated: cls.Isolated, Reserved: cls.Reserved})
	if err != nil {
		return nil, err
	}
	prevIRQ, prevSoft, prevSx := c.irqs, c.softirqs, c.sx
	c.readCounters()
	res.SchedulerClass = bound.String(c.sx.String(), bound.SchedClass)
	res.SchedulerClassChange = bound.String(schedext.Changed(prevSx, c.sx), bound.SchedClassChange)
	o := observe(c.root, in, cls, res)
	o.SchedExt = c.sx
	o.IRQs = findings.CounterWindow{Prev: prevIRQ.table, Cur: c.irqs.table, OK: prevIRQ.ok && c.irqs.ok}
	o.Softirqs = findings.CounterWindow{Prev: prevSoft.table, Cur: c.softirqs.table, OK: prevSoft.ok && c.softirqs.ok}
	res.Findings = append(findings.Judge(o), res.Findings...)
	var spec *v1alpha1.ContentionSpec
	var budgets []v1alpha1.PodBudget
	if in.Tuning.Measurement != nil {
		spec, budgets = in.Tuning.Measurement.Contention, in.Tuning.Measurement.Budgets
	}
	var measured []findings.BudgetPod
	if len(budgets) > 0 {
		measured = measuredPods(in)
	}
	var noisy *v1alpha1.Finding
	res.Contention, noisy = c.contention.Judge(findings.ContentionWindow{Spec: spec, Attributed: res.Attributed,
		Window: res.Window, Pods: res.Attribution, Budgets: findings.WaitBudgets(budgets, measured), HostSlices: hostSlices(c.root)})
	if noisy != nil {
		res.Findings = append(res.Findings, *noisy)
	}
	res.PodBudgets = c.judgeBudgets(budgets, measured, res)
	highest, pod := optedInThrottled(o.Throttles)
	res.Budget = findings.Budget(findings.BudgetInput{Budget: in.Tuning.LatencyBudget, P99: res.RunQueueP99,
		Throttled: highest, ThrottledPod: pod})
	return res, nil
}

// judgeBudgets counts the window for each measured pod a
// measurement.budgets entry matches and returns their verdicts; without
// budgets it forgets every pod.
func (c *Collector) judgeBudgets(budgets []v1alpha1.PodBudget, pods []findings.BudgetPod, res *measure.Result) []v1alpha1.PodBudgetResult {
	if len(budgets) == 0 {
		c.budgets = findings.PodBudgets{}
		return nil
	}
	return c.budgets.Judge(findings.PodBudgetWindow{Budgets: budgets, Pods: pods,
		Attributed: res.Attributed, Window: res.Window, Attribution: res.Attribution, Traced: res.Traced,
		RunQueue: res.PodRunQueue, Throttling: res.AllThrottling, Now: time.Now()})
}

// measuredPods are the input's pods the tuning measures, as the budget
// rules see them.
func measuredPods(in Input) []findings.BudgetPod {
	var pods []findings.BudgetPod
	for _, p := range in.Pods {
		if measure.Measured(in.Tuning, p) {
			pods = append(pods, findings.BudgetPod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels})
		}
	}
	return pods
}

// classes are the profile's CPU classes: the pass's snapshot's, or parsed
// from the tuning when the input carries none.
func classes(in Input) snapshot.CPUs {
	if in.Node != nil {
		return in.Node.CPUs
	}
	return snapshot.ParseCPUs(in.Tuning.CPUs)
}

// readCounters reads what a window compares between its two ends.
func (c *Collector) readCounters() {
	c.irqs = readCounters(c.root, c.root.Proc("interrupts"))
	c.softirqs = readCounters(c.root, c.root.Proc("softirqs"))
	c.sx = schedext.Read(c.root)
}

// readCounters reads /proc/interrupts or /proc/softirqs.
func readCounters(root *host.Root, path string) counters {
	b, err := root.ReadFile(path)
	if err != nil {
		return counters{}
	}
	t, err := findings.ParseCounterTable(string(b))
	return counters{table: t, ok: err == nil}
}

// optedInThrottled is the highest throttled ratio of an opted-in pod and
// the first opted-in pod that was throttled (ts is most throttled first).
func optedInThrottled(ts []findings.PodThrottle) (highest float64, pod string) {
	for _, t := range ts {
		if !t.OptedIn {
			continue
		}
		highest = max(highest, t.Ratio)
		if pod == "" && t.Throttled > 0 {
			pod = t.Namespace + "/" + t.Name
		}
	}
	return highest, pod
}

// hostSlices says the node's cpu controller has systemd's system.slice:
// where it has not, what runs in its root cgroup outside every pod is the
// host's own processes (kubelet, the runtime, a control plane).
func hostSlices(root *host.Root) bool {
	dir, _, err := podcgroup.ControllerDir(root, "cpu")
	return err == nil && root.IsDir(filepath.Join(dir, "system.slice"))
}
