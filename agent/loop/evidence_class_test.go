package loop

import (
	"testing"
	"time"

	"latencytier.io/latencytier/agent/measure"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// A window's scheduling class, and how it changed within the window, reach
// the rollout's evidence, where the verdict reads them.
func TestEvidenceCarriesTheSchedulerClass(t *testing.T) {
	start := time.Date(2026, 12, 6, 13, 0, 0, 0, time.UTC)
	w := &window{start: start, end: start.Add(time.Minute), key: evidenceKey{v1alpha1.ActionApply, "p-1"},
		res: &measure.Result{SchedulerClass: "ext:scx_lavd", SchedulerClassChange: "fair → ext:scx_lavd (enable_seq 3→4)"}}
	ev := evidenceOf(w)
	if ev.SchedulerClass != "ext:scx_lavd" || ev.SchedulerClassChange != "fair → ext:scx_lavd (enable_seq 3→4)" {
		t.Errorf("evidence class %q, change %q", ev.SchedulerClass, ev.SchedulerClassChange)
	}
}
