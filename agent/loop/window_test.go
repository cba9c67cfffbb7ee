package loop

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// A measurement window updates status (its latency and budget) without a
// probe, render or apply: a knob someone changed after the apply stays as
// they left it until the next full pass (here an hour away), instead of the
// window's pass writing it back.
func TestWindowWritesStatusWithoutApplying(t *testing.T) {
	c, env := startAPI(t)
	root := fakeHost(t)
	wl := newWorkload(t, root)
	m, fc := newTestMeter(t, root)
	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-win"}, Spec: spec()}
	if err := c.Create(context.Background(), ln); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{NodeName: "node-win", Root: root, Resync: time.Hour, Log: testr.New(t), Config: env.Config, Meter: m})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	eventually(t, "the apply", func() bool {
		return conditionIs(getLN(t, c, "node-win"), v1alpha1.NodeApplied, metav1.ConditionTrue)
	})
	autogroup := root.Proc("sys", "kernel", "sched_autogroup_enabled")
	if got, _ := root.ReadString(autogroup); got != "0" {
		t.Fatalf("autogroup %q after the apply, want 0", got)
	}
	testroot.Write(t, autogroup, "1") // someone else's write, after the pass
	wl.run(300 * time.Microsecond)
	step(t, m, fc, defaultMeasureInterval, false)
	eventually(t, "the window in status", func() bool {
		st := getLN(t, c, "node-win").Status
		return st.Latency != nil && st.Latency.MeasuredAt != nil
	})
	if got, _ := root.ReadString(autogroup); got != "1" {
		t.Errorf("autogroup %q after a measurement window: the window ran an apply pass that re-asserted it", got)
	}
}
