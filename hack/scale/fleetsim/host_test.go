package fleetsim

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/api/v1alpha1"
)

// measuredFakeHost is a normal simulated node of meanWait (wandering every
// wanderEvery, 0: never) and the real Measurer started on it, with the
// input that measures it.
func measuredFakeHost(t *testing.T, meanWait, wanderEvery time.Duration) (*fakeHost, *measure.Measurer, measure.Input) {
	t.Helper()
	h, err := newFakeHost(t.TempDir(), nodeNormal, meanWait, wanderEvery, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := measure.New(h.root, logr.Discard(), measure.WithAttach(measure.AttachNone))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h, m, measure.Input{Tuning: v1alpha1.TuningSpec{Measurement: &v1alpha1.MeasurementSpec{Source: v1alpha1.MeasurementAuto}}}
}

// TestFakeHostIsMeasured: the real Measurer reads the simulated node's
// schedstat. A /proc/<pid>/task/<tid>/stat shorter than the kernel's made
// procfs return EOF, every task was skipped as exited, and every simulated
// agent reported an empty run queue: no verdict ever had figures, so the
// benchmark could not show what judged windows cost.
func TestFakeHostIsMeasured(t *testing.T) {
	h, m, in := measuredFakeHost(t, 50*time.Microsecond, 0)
	var r *measure.Result
	var err error
	for range 2 { // the first read is the schedstat baseline
		if err := h.tick(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		if r, err = m.Collect(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	if r.Latency == nil || len(r.Latency.Classes) == 0 || r.Latency.Classes[0].Samples == 0 || r.RunQueueP99 == nil {
		t.Fatalf("measured %+v, want the Node class with samples and a p99", r.Latency)
	}
}

// TestFakeHostWanders: measured every 30 s, a simulated node near a 1-2-5
// boundary (48 µs) sees its p99 cross it window after window, as a real
// node's does, within ×1.11 of every other window (inside the verdict's
// Unchanged band). A counter that never moved let the benchmark miss
// every write a wander costs (issue 43).
func TestFakeHostWanders(t *testing.T) {
	const window = 30 * time.Second
	h, m, in := measuredFakeHost(t, 48*time.Microsecond, window)
	if _, err := m.Collect(context.Background(), in); err != nil { // the schedstat baseline
		t.Fatal(err)
	}
	var p99s []time.Duration
	for range 12 {
		for range window / (5 * time.Second) {
			if err := h.tick(5 * time.Second); err != nil {
				t.Fatal(err)
			}
		}
		r, err := m.Collect(context.Background(), in)
		if err != nil || r.RunQueueP99 == nil {
			t.Fatalf("window: %v, %+v", err, r)
		}
		p99s = append(p99s, r.RunQueueP99.Duration)
	}
	lo, hi, crossed := p99s[0], p99s[0], 0
	for i, d := range p99s {
		lo, hi = min(lo, d), max(hi, d)
		if i > 0 && (d < 50*time.Microsecond) != (p99s[i-1] < 50*time.Microsecond) {
			crossed++
		}
	}
	if crossed < 4 || float64(hi) > 1.11*float64(lo) {
		t.Errorf("p99s %v: crossed 50µs %d times (want ≥ 4), spread %.3f× (want ≤ 1.11×)", p99s, crossed, float64(hi)/float64(lo))
	}
}
