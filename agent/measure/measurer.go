// Package measure measures what a latency-tier node delivers: run-queue
// latency (eBPF on sched_wakeup/sched_wakeup_new/sched_switch, like runqlat,
// with per-task schedstat run_delay and PSI as the fallback where BPF is not
// allowed), CFS throttling per pod from cgroup cpu.stat, and who made the
// measured pods wait (attribution). agent/window adds the findings and the
// budget judgement (agent/findings) to each window.
// A Measurer is started once and collected every interval; each Result
// covers the window since the previous Collect.
package measure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/cpuset"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/measure/bpf"
	"latencytier.io/latencytier/agent/measure/throttling"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/api/v1alpha1"
)

// Input is what a Collect needs from the agent: the node's resolved tuning
// and the pods running on the node.
type Input struct {
	Tuning v1alpha1.TuningSpec
	Pods   []podcgroup.Pod
	// Isolated and Reserved are the CPU classes latency is broken down by
	// (agent/window sets them from the pass's snapshot); empty, latency is
	// the Node class's only.
	Isolated, Reserved cpuset.CPUSet
}

// Result is one window's measurement, shaped for LatencyNode status.
type Result struct {
	// Latency is nil when measurement is disabled or no source produced
	// numbers in this window.
	Latency *v1alpha1.LatencyStatus `json:"latency,omitempty"`
	// RunQueueP99 is the node-wide p99 (nil when not measured).
	RunQueueP99 *metav1.Duration `json:"runQueueP99,omitempty"`
	// Throttling lists pods with a CFS limit or opted in, most throttled first.
	Throttling []v1alpha1.PodThrottling `json:"throttling,omitempty"`
	// AllThrottling is every pod in Throttling's order, unbounded: the
	// agent's metrics keep a counter for each pod still on the node.
	AllThrottling []v1alpha1.PodThrottling `json:"-"`
	// ThrottledRatio is the highest ratio in Throttling ("" when no pod).
	ThrottledRatio string `json:"throttledRatio,omitempty"`
	// PodPressure is, by namespace/name, each pod in AllThrottling's
	// cgroup v2 cpu.pressure "some avg10" (absent on cgroup v1).
	PodPressure map[string]string `json:"-"`
	// Findings are diagnostics with evidence, most severe first, set by
	// agent/window (the checks' and NoisyNeighbor).
	Findings []v1alpha1.Finding `json:"findings,omitempty"`
	// Budget is the WithinBudget condition (the caller sets transition
	// times), set by agent/window.
	Budget metav1.Condition `json:"budget"`
	// Contention is the RunQueueContention condition (the caller sets
	// transition times), set by agent/window over a run of windows.
	Contention metav1.Condition `json:"contention"`
	// Pods is the measured pods' own run delay (see pods.go): nil when no
	// such pod ran through the whole window or BPF is unavailable.
	Pods *v1alpha1.LatencySummary `json:"pods,omitempty"`
	// PodsThrottledRatio is the highest throttled ratio among the measured
	// pods ("" when none is listed in Throttling): the rollout's evidence,
	// which pods outside the tier must not sway.
	PodsThrottledRatio string `json:"podsThrottledRatio,omitempty"`
	// Attribution is, per measured pod that waited in the window, its
	// run-queue wait split by what ran on its CPU meanwhile, most waited
	// first (attribution.go). Nil where BPF or attribution is off or no pod
	// was measured through the window.
	Attribution []PodAttribution `json:"attribution,omitempty"`
	// Attributed says what Attribution covers: the pods measured through
	// the window (AttributedPods, Attribution then lists those that
	// waited), no pod (AttributedNoPods), or nothing (AttributedNone).
	Attributed AttributionCover `json:"attributed,omitempty"`
	// Neighbours is the measured pods' wait charged to neighbours in the
	// window (the rollout's evidence); nil without Attribution.
	Neighbours *v1alpha1.NeighbourWait `json:"neighbours,omitempty"`
	// SchedulerClass is the scheduling class at the window's end ("fair",
	// "ext:scx_lavd"), and SchedulerClassChange how it changed during the
	// window ("" when it did not); set by agent/window.
	SchedulerClass       string `json:"schedulerClass,omitempty"`
	SchedulerClassChange string `json:"schedulerClassChange,omitempty"`
	// Traced are the pods (namespace/name) the tracer measured through
	// the window: a measured pod outside it (no cgroup found, past
	// bpf.MaxPodCgroups, first seen in the window) has no wait to judge,
	// which is not a wait of 0.
	Traced map[string]bool `json:"-"`
	// PodRunQueue is, by namespace/name, the run-queue latency of each pod
	// in Traced that had a histogram of its own in the tracer (podhist.go);
	// nil on the schedstat fallback.
	PodRunQueue map[string]PodRunQueue `json:"-"`
	// PodsWithoutOwnHist is how many measured pods shared the tracer's
	// last per-pod histogram in the window (past bpf.PodSlots-1 pods):
	// Traced, but not in PodRunQueue.
	PodsWithoutOwnHist int `json:"podsWithoutOwnHist,omitempty"`
	// PodBudgets is every measured pod's verdict against
	// measurement.budgets, Outside first (agent/findings' PodBudgets, set
	// by agent/window); unbounded, status holds the first
	// v1alpha1.MaxPodBudgetResults.
	PodBudgets []v1alpha1.PodBudgetResult `json:"podBudgets,omitempty"`
	// Window is how long the window was.
	Window time.Duration `json:"-"`
	// Hists are the full-resolution histograms per class, for the CLI.
	Hists map[string]*Hist `json:"-"`
}

// Attach modes for WithAttach besides bpf.AttachTPBTF and bpf.AttachRawTP.
const (
	AttachAuto = ""
	AttachNone = "none"
)

// Option configures a Measurer.
type Option func(*Measurer)

// WithAttach forces an attach type (tp_btf, raw_tp) or none (schedstat only).
func WithAttach(a string) Option { return func(m *Measurer) { m.attach = a } }

// WithoutAttribution loads the BPF program without noisy-neighbour
// attribution (Result.Attribution stays nil).
func WithoutAttribution() Option { return func(m *Measurer) { m.noAttribution = true } }

// WithPodcgroup passes options to podcgroup.Find (tests use their own
// kubepods name).
func WithPodcgroup(opts ...podcgroup.Option) Option {
	return func(m *Measurer) { m.podOpts = opts }
}

// Measurer owns the BPF program and the previous counters of every source.
type Measurer struct {
	root          *host.Root
	log           logr.Logger
	attach        string
	noAttribution bool

	mu      sync.Mutex
	started bool
	bpfSrc  *bpfSource
	bpfErr  error
	sched   *schedstatSource
	thr     *throttling.Meter
	// podOpts find pods' cgroups (WithPodcgroup).
	podOpts []podcgroup.Option
	last    time.Time
	// podsTracked says the BPF program measured pods' cgroups in the window
	// now running.
	podsTracked bool
	// victims are the measured pods' cgroup IDs in the window now running.
	victims map[uint64]podRef
	// traced are the pods (namespace/name) measured through the window
	// podLatency last ended.
	traced map[string]bool
	// slots are the measured pods' histograms in the tracer; podRunQueue
	// is what they held for the window podLatency last ended, podsShared
	// how many measured pods have none of their own in the window now
	// running.
	slots       podSlots
	podRunQueue map[string]PodRunQueue
	podsShared  int
	// cgPaths caches cgroup ID -> path in the cpu hierarchy; cgWalked says
	// this window walked it already.
	cgPaths  map[uint64]string
	cgWalked bool
}

// New returns a Measurer reading the host through root.
func New(root *host.Root, log logr.Logger, opts ...Option) *Measurer {
	m := &Measurer{root: root, log: log}
	for _, o := range opts {
		o(m)
	}
	m.thr = throttling.New(root, m.podOpts...)
	return m
}

// Start loads the BPF program (tp_btf where the kernel has it, raw_tp
// otherwise) and takes the baselines. Where BPF is not allowed it records
// why and measures with schedstat and PSI instead; that is not an error.
func (m *Measurer) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return errors.New("measurer already started")
	}
	m.started = true
	if err := m.startBPF(); err != nil {
		m.bpfErr = err
		m.log.Info("Fell back to schedstat and PSI for run-queue latency", "reason", err.Error())
	} else {
		m.log.Info("Attached run-queue latency BPF program", "attach", m.bpfSrc.t.Attach())
	}
	m.sched = &schedstatSource{root: m.root}
	if m.bpfSrc == nil {
		_, _ = m.sched.perCPU() // baseline
	}
	m.last = time.Now()
	return nil
}

func (m *Measurer) startBPF() error {
	var t *bpf.Tracer
	var err error
	var opts []bpf.Option
	if m.noAttribution {
		opts = append(opts, bpf.WithoutAttribution())
	}
	switch m.attach {
	case AttachNone:
		return errors.New("BPF disabled by configuration")
	case AttachAuto:
		t, err = bpf.Open(opts...)
	default:
		t, err = bpf.OpenAttach(m.attach, opts...)
	}
	if err != nil {
		return err
	}
	m.bpfSrc = &bpfSource{t: t}
	_, err = m.bpfSrc.perCPU() // baseline
	return err
}

// Source says where run-queue latency comes from: "EBPF (raw_tp)", or
// "Schedstat" with the reason BPF is not used.
func (m *Measurer) Source() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bpfSrc != nil {
		return SourceEBPF + " (" + m.bpfSrc.t.Attach() + ")"
	}
	if m.bpfErr != nil {
		return SourceSchedstat + " (BPF unavailable: " + m.bpfErr.Error() + ")"
	}
	return SourceSchedstat
}

// Root is the host root the Measurer reads.
func (m *Measurer) Root() *host.Root { return m.root }

// Tracer returns the BPF tracer (nil on the fallback), for cost accounting.
func (m *Measurer) Tracer() *bpf.Tracer {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bpfSrc == nil {
		return nil
	}
	return m.bpfSrc.t
}

// Collect summarises the window since the previous Collect (or Start).
// Problems with one source are logged and leave its part of the Result
// empty; only a Measurer that was never started is an error.
func (m *Measurer) Collect(ctx context.Context, in Input) (*Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started {
		return nil, errors.New("measurer not started")
	}
	now := time.Now()
	window := now.Sub(m.last)
	m.last = now
	cls := cpuClasses{isolated: in.Isolated, reserved: in.Reserved}
	res := &Result{Window: window}

	if hs := m.latency(in.Tuning, cls); hs != nil {
		res.Hists = hs.hists
		res.Latency = &v1alpha1.LatencyStatus{
			Source:     hs.source,
			Window:     &metav1.Duration{Duration: window.Round(time.Millisecond)},
			MeasuredAt: &metav1.Time{Time: now},
			Classes:    classLatencies(hs.hists),
		}
		res.Latency.PSICPUSomeAvg10, _ = nodePressure(m.root)
		if p99 := res.Latency.Classes[0].P99; p99 != nil {
			res.RunQueueP99 = p99.DeepCopy()
		}
	}

	if t := in.Tuning; t.Measurement == nil || t.Measurement.Source != v1alpha1.MeasurementDisabled {
		shared := m.podsShared
		res.Pods, res.Attribution, res.Attributed = m.podLatency(t, in.Pods)
		res.Traced, res.PodRunQueue, res.PodsWithoutOwnHist = m.traced, m.podRunQueue, shared
	}

	isMeasured := func(p podcgroup.Pod) bool { return measured(in.Tuning, p) }
	throttles, err := m.thr.Collect(in.Pods, isMeasured)
	if err != nil {
		m.log.V(1).Info("Read no pod throttling", "reason", err.Error())
	}
	sum := throttling.Summarise(throttles, isMeasured)
	res.AllThrottling = sum.All
	res.Throttling = slices.Clip(sum.All[:min(len(sum.All), throttling.MaxListed)])
	res.ThrottledRatio, res.PodsThrottledRatio, res.PodPressure = sum.Ratio, sum.MeasuredRatio, sum.Pressure

	if len(res.Attribution) > 0 {
		if res.Latency != nil {
			res.Latency.Pods = podWaits(res.Attribution, window)
		}
		res.Neighbours = neighbourWaits(res.Attribution, window)
	}
	return res, nil
}

type latencyHists struct {
	source string
	hists  map[string]*Hist
}

// latency reads the source the tuning asks for; nil when measurement is
// disabled or the source has nothing for this window.
func (m *Measurer) latency(t v1alpha1.TuningSpec, cls cpuClasses) *latencyHists {
	want := v1alpha1.MeasurementAuto
	if t.Measurement != nil && t.Measurement.Source != "" {
		want = t.Measurement.Source
	}
	var fromBPF []Hist
	var bpfErr error
	if m.bpfSrc != nil {
		fromBPF, bpfErr = m.bpfSrc.perCPU() // always read, so windows stay aligned
	}
	useBPF := m.bpfSrc != nil && (want == v1alpha1.MeasurementAuto || want == v1alpha1.MeasurementEBPF)
	switch {
	case want == v1alpha1.MeasurementDisabled:
		return nil
	case useBPF && bpfErr == nil:
		return &latencyHists{source: SourceEBPF, hists: byClass(fromBPF, cls)}
	case useBPF:
		m.log.Info("Read no BPF histogram", "reason", bpfErr.Error())
		return nil
	case want == v1alpha1.MeasurementEBPF:
		m.log.V(1).Info("Measured no run-queue latency: source EBPF asked for but unavailable", "reason", fmt.Sprint(m.bpfErr))
		return nil
	}
	perCPU, err := m.sched.perCPU()
	if err != nil {
		m.log.V(1).Info("Read no schedstat window", "reason", err.Error())
		return nil
	}
	return &latencyHists{source: SourceSchedstat, hists: byClass(perCPU, cls)}
}

// Close unloads the BPF program.
func (m *Measurer) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.bpfSrc == nil {
		return nil
	}
	err := m.bpfSrc.t.Close()
	m.bpfSrc = nil
	return err
}
