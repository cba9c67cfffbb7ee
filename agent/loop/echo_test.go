package loop

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/agent/measure"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// passCounter counts the loop's passes (each tells its Observer once).
type passCounter struct{ n atomic.Int64 }

func (p *passCounter) Observed(v1alpha1.LatencyNodeSpec, v1alpha1.LatencyNodeStatus) { p.n.Add(1) }
func (p *passCounter) Reasserted([]string)                                           {}
func (p *passCounter) Measured(*measure.Result)                                      {}

// TestStatusOnlyUpdatesRunNoPass: a write to the LatencyNode's status alone
// — the agent's own report coming back, the controller's verdict — runs no
// pass (each pass reads every knob again; one after every report doubled
// the agent's work), while a new spec still runs one at once.
func TestStatusOnlyUpdatesRunNoPass(t *testing.T) {
	c, env := startAPI(t)
	ctx := context.Background()
	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-echo"}, Spec: spec()}
	if err := c.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}
	passes := &passCounter{}
	// A resync far away: every pass in this test comes from a watch event.
	startObservedAgent(t, env, fakeHost(t), "node-echo", time.Hour, passes)
	get := func() *v1alpha1.LatencyNode {
		got := &v1alpha1.LatencyNode{}
		if err := c.Get(ctx, client.ObjectKey{Name: "node-echo"}, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	eventually(t, "the agent's first report", func() bool { return conditionIs(get(), v1alpha1.NodeApplied, metav1.ConditionTrue) })
	settled := func() int64 {
		for {
			n := passes.n.Load()
			time.Sleep(time.Second)
			if passes.n.Load() == n {
				return n
			}
		}
	}
	before := settled()

	// Someone writes the status only (its agent's own subresource).
	judged := get()
	orig := judged.DeepCopy()
	judged.Status.Findings = append(judged.Status.Findings, v1alpha1.Finding{Type: "Echo", Severity: "Info", Message: "written by the test"})
	if err := c.Status().Patch(ctx, judged, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	if after := settled(); after != before {
		t.Fatalf("a status-only write ran %d passes, want none", after-before)
	}

	// A new spec runs a pass, and its report is written.
	moved := get()
	orig = moved.DeepCopy()
	moved.Spec.ProfileGeneration = 2
	if err := c.Patch(ctx, moved, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a pass for the new spec", func() bool { return passes.n.Load() > before })
	eventually(t, "the report of the new spec", func() bool {
		got := get()
		return got.Status.ObservedGeneration == got.Generation
	})
}
