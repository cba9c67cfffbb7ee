package fleetsim

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/api/v1alpha1"
)

// TestFakeHostIsMeasured: the real Measurer reads the simulated node's
// schedstat. A /proc/<pid>/task/<tid>/stat shorter than the kernel's made
// procfs return EOF, every task was skipped as exited, and every simulated
// agent reported an empty run queue: no verdict ever had figures, so the
// benchmark could not show what judged windows cost.
func TestFakeHostIsMeasured(t *testing.T) {
	h, err := newFakeHost(t.TempDir(), nodeNormal, 50*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	m := measure.New(h.root, logr.Discard(), measure.WithAttach(measure.AttachNone))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	in := measure.Input{Tuning: v1alpha1.TuningSpec{Measurement: &v1alpha1.MeasurementSpec{Source: v1alpha1.MeasurementAuto}}}
	var r *measure.Result
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
