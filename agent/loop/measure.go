package loop

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"latencytier.io/latencytier/agent/measure"
	mwindow "latencytier.io/latencytier/agent/window"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// defaultMeasureInterval applies when the profile names none.
const defaultMeasureInterval = 30 * time.Second

// Meter is the agent's measurement: a manager Runnable that collects one
// window every measurement interval on its own clock, beside the reconcile
// loop, and enqueues a pass through a channel source, so the pass that
// follows writes the window into status. Passes tell it what the node holds
// (hold) and read its newest window (latest).
type Meter struct {
	m      *mwindow.Collector
	clock  clock.Clock
	log    logr.Logger
	events chan event.GenericEvent
	wake   chan struct{}
	// observer is told every window (set by Run before the Meter starts).
	observer Observer

	mu     sync.Mutex
	held   heldSpec
	have   bool
	broken bool
	last   *window
}

// NewMeter returns a Meter that starts m, collects windows from it (with
// their findings and budget, agent/window) on clk and closes it when the
// manager stops.
func NewMeter(m *measure.Measurer, clk clock.Clock, log logr.Logger) *Meter {
	return &Meter{m: mwindow.New(m), clock: clk, log: log, events: make(chan event.GenericEvent, 1), wake: make(chan struct{}, 1)}
}

// evidenceKey is what a window is evidence of: the spec's action and revision.
type evidenceKey struct {
	action   v1alpha1.NodeAction
	revision string
}

func specKey(s v1alpha1.LatencyNodeSpec) evidenceKey { return evidenceKey{s.Action, s.Revision} }

// heldSpec is what the passes last told the Meter.
type heldSpec struct {
	key evidenceKey
	// since is when the agent finished acting on key; zero while it has not.
	since time.Time
	in    mwindow.Input
}

// window is one collected measurement interval.
type window struct {
	seq        uint64
	start, end time.Time
	key        evidenceKey
	// full says the agent had finished acting on key before the window
	// began and held it to the end: only such a window is evidence.
	full bool
	res  *measure.Result
}

// hold tells the Meter what the node holds after a pass: key, the input to
// measure with, and whether the pass finished acting on key (a pass that
// failed to act has not). A new key restarts the clock of "held since".
func (mt *Meter) hold(key evidenceKey, in mwindow.Input, acted bool) {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	interval, on := mt.scheduleLocked()
	if !mt.have || mt.held.key != key {
		mt.held.since = time.Time{}
	}
	mt.held.key, mt.held.in, mt.have = key, in, true
	if acted && mt.held.since.IsZero() {
		mt.held.since = mt.clock.Now()
	}
	if i, o := mt.scheduleLocked(); i != interval || o != on {
		select {
		case mt.wake <- struct{}{}:
		default:
		}
	}
}

// latest is the newest window, nil before the first.
func (mt *Meter) latest() *window {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	return mt.last
}

// running reports whether the Meter measures (its Measurer started).
func (mt *Meter) running() bool {
	mt.mu.Lock()
	defer mt.mu.Unlock()
	return !mt.broken
}

// scheduleLocked is the interval to collect on, and whether to collect at
// all: not before the first pass, not with measurement Disabled.
func (mt *Meter) scheduleLocked() (time.Duration, bool) {
	if !mt.have || mt.broken {
		return 0, false
	}
	return measureInterval(mt.held.in.Tuning.Measurement), !disabled(mt.held.in.Tuning.Measurement)
}

func measureInterval(m *v1alpha1.MeasurementSpec) time.Duration {
	if m != nil && m.Interval != nil && m.Interval.Duration > 0 {
		return m.Interval.Duration
	}
	return defaultMeasureInterval
}

func disabled(m *v1alpha1.MeasurementSpec) bool {
	return m != nil && m.Source == v1alpha1.MeasurementDisabled
}

// Start measures until ctx ends. A window begins when measurement is first
// (or again) on and ends one interval later, when the next one begins.
func (mt *Meter) Start(ctx context.Context) error {
	if err := mt.m.Start(ctx); err != nil {
		mt.log.Error(err, "Failed to start measurement; status reports WithinBudget Unknown")
		mt.mu.Lock()
		mt.broken = true
		mt.mu.Unlock()
		return nil
	}
	defer func() { _ = mt.m.Close() }()
	var start time.Time
	armed := false
	var seq uint64
	for {
		mt.mu.Lock()
		interval, on := mt.scheduleLocked()
		in := mt.held.in
		mt.mu.Unlock()
		if on && !armed {
			mt.m.Arm(ctx, in) // the counters start here
			start = mt.clock.Now()
		}
		armed = on
		var tick <-chan time.Time
		var timer clock.Timer
		if on {
			timer = mt.clock.NewTimer(interval - mt.clock.Since(start))
			tick = timer.C()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-mt.wake:
			if timer != nil {
				timer.Stop()
			}
			continue
		case <-tick:
		}
		seq++
		start = mt.collect(ctx, seq, start)
	}
}

// collect ends the window that began at start and publishes it; it returns
// the start of the next window.
func (mt *Meter) collect(ctx context.Context, seq uint64, start time.Time) time.Time {
	mt.mu.Lock()
	h := mt.held
	mt.mu.Unlock()
	res, err := mt.m.Collect(ctx, h.in)
	end := mt.clock.Now()
	if err != nil {
		mt.log.Error(err, "Failed to measure")
		return end
	}
	w := &window{seq: seq, start: start, end: end, key: h.key, res: res,
		full: !h.since.IsZero() && !start.Before(h.since)}
	mt.mu.Lock()
	mt.last = w
	mt.mu.Unlock()
	if mt.observer != nil {
		mt.observer.Measured(res)
	}
	select {
	case mt.events <- event.GenericEvent{Object: &v1alpha1.LatencyNode{}}:
	default: // a pass is already due
	}
	return end
}

// evidenceOf is a full window as status carries it: times to the second
// and durations to the millisecond, as they come back from the API server,
// so an unchanged window compares equal and is not written again.
func evidenceOf(w *window) *v1alpha1.LatencyEvidence {
	ev := &v1alpha1.LatencyEvidence{Action: w.key.action, Revision: w.key.revision,
		Window:         &metav1.Duration{Duration: w.end.Sub(w.start).Round(time.Millisecond)},
		MeasuredAt:     metav1.NewTime(w.end.UTC().Truncate(time.Second)),
		ThrottledRatio: w.res.PodsThrottledRatio, Pods: w.res.Pods.DeepCopy(),
		Neighbours: w.res.Neighbours.DeepCopy(), SchedulerClass: w.res.SchedulerClass,
		SchedulerClassChange: w.res.SchedulerClassChange}
	if l := w.res.Latency; l != nil && len(l.Classes) > 0 {
		c := l.Classes[0] // the Node class: every CPU
		ev.RunQueue = v1alpha1.LatencySummary{Samples: c.Samples, P50: c.P50, P99: c.P99, P999: c.P999, Max: c.Max}
	}
	return ev
}
