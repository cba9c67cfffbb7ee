package loop

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// measuredSetup is LatencyNode name applying spec() on the fake host, an
// agent reconciler with a Meter, both on one fake clock, writing status
// with a 5-minute heartbeat, and a workload whose run delay is the same
// every window (its windows differ only in when they end).
func measuredSetup(t *testing.T, c client.Client, name string, sp v1alpha1.LatencyNodeSpec) (*Reconciler, *shuffled, *Meter, *clocktesting.FakeClock, *workload) {
	t.Helper()
	root := fakeHost(t)
	wl := newWorkload(t, root)
	m, fc := newTestMeter(t, root)
	runMeter(t, m)
	if err := c.Create(context.Background(), &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: sp}); err != nil {
		t.Fatal(err)
	}
	sc := &shuffled{Client: c, rnd: rand.New(rand.NewSource(1))}
	r := &Reconciler{Client: sc, NodeName: name, Root: root, Resync: time.Second, Heartbeat: 5 * time.Minute, Clock: fc,
		Engine: &apply.Engine{Root: root, Log: testr.New(t)}, Meter: m}
	return r, sc, m, fc, wl
}

// oneWindow runs the workload through one measurement window and the pass it
// enqueues, and returns how many status patches that pass sent.
func oneWindow(t *testing.T, r *Reconciler, sc *shuffled, m *Meter, fc *clocktesting.FakeClock, wl *workload) int32 {
	t.Helper()
	wl.run(150 * time.Microsecond)
	step(t, m, fc, defaultMeasureInterval, true)
	n := sc.patches.Load()
	pass(t, r, r.NodeName)
	return sc.patches.Load() - n
}

// Windows that repeat the written figures write nothing until the last
// write is a heartbeat old; then one write carries the newest window and
// stamps reportedAt. (Before: one write per window.)
func TestStatusWrittenOnHeartbeatWhenNothingChanged(t *testing.T) {
	c, _ := startAPI(t)
	sp := spec()
	sp.Revision = "gateway-r1"
	r, sc, m, fc, wl := measuredSetup(t, c, "node-h", sp)
	pass(t, r, "node-h")
	if n := oneWindow(t, r, sc, m, fc, wl); n != 1 || getLN(t, c, "node-h").Status.Current == nil {
		t.Fatalf("the first full window: %d writes, want 1 with status.current", n)
	}
	written := getLN(t, c, "node-h")
	at := written.Status.ReportedAt
	if at == nil || !at.Time.Equal(fc.Now()) || written.Status.HeartbeatInterval == nil || written.Status.HeartbeatInterval.Duration != 5*time.Minute {
		t.Fatalf("reportedAt %v (want %s), heartbeatInterval %v", at, fc.Now(), written.Status.HeartbeatInterval)
	}
	// The windows that end before the node's heartbeat (5m stretched by
	// its share, nodeHeartbeat: ten windows, or nine when none), and extra
	// passes between them.
	quiet := int((nodeHeartbeat(5*time.Minute, "node-h") - 1) / defaultMeasureInterval)
	for i := range quiet {
		if n := oneWindow(t, r, sc, m, fc, wl); n != 0 {
			t.Fatalf("window %d after the written one: %d status writes with nothing changed", i+1, n)
		}
		pass(t, r, "node-h")
	}
	if got := getLN(t, c, "node-h"); got.ResourceVersion != written.ResourceVersion {
		t.Fatalf("status rewritten before the heartbeat (rv %s -> %s)", written.ResourceVersion, got.ResourceVersion)
	}
	if n := oneWindow(t, r, sc, m, fc, wl); n != 1 {
		t.Fatalf("the window a heartbeat after the last write: %d writes, want 1", n)
	}
	hb := getLN(t, c, "node-h")
	// (status.latency is stamped by the Measurer's own clock, not the fake one.)
	if !hb.Status.ReportedAt.Time.Equal(fc.Now()) || !hb.Status.Current.MeasuredAt.Time.Equal(fc.Now()) ||
		hb.Status.Latency == nil {
		t.Errorf("heartbeat write: reportedAt %s, current at %s, latency %+v; want the newest window at %s", hb.Status.ReportedAt,
			hb.Status.Current.MeasuredAt, hb.Status.Latency, fc.Now())
	}
	for range 3 {
		pass(t, r, "node-h")
	}
	if n := oneWindow(t, r, sc, m, fc, wl); n != 0 {
		t.Errorf("the window after the heartbeat: %d writes, want 0", n)
	}
}

// A setting someone else changed is written by the pass that finds it, with
// a heartbeat an hour away, and that write restarts the heartbeat.
func TestDriftWrittenWithinOnePass(t *testing.T) {
	c, _ := startAPI(t)
	sp := spec()
	r, sc, _, fc, _ := measuredSetup(t, c, "node-dr", sp)
	r.Heartbeat = time.Hour
	pass(t, r, "node-dr")
	for range 3 {
		fc.Step(time.Second)
		pass(t, r, "node-dr")
	}
	if n := sc.patches.Load(); n != 1 {
		t.Fatalf("%d writes for one apply and three quiet passes, want 1", n)
	}
	autogroup := r.Root.Proc("sys", "kernel", "sched_autogroup_enabled")
	testroot.Write(t, autogroup, "1")
	fc.Step(10 * time.Second)
	pass(t, r, "node-dr")
	ln := getLN(t, c, "node-dr")
	if n := sc.patches.Load(); n != 2 || !conditionIs(ln, v1alpha1.NodeDrifted, metav1.ConditionTrue) {
		t.Fatalf("%d writes; Drifted %+v: the drift is not in status after one pass", n, ln.Status.Conditions)
	}
	if ln.Status.ReportedAt == nil || !ln.Status.ReportedAt.Time.Equal(fc.Now()) {
		t.Errorf("the drift's write says reportedAt %v, want %s", ln.Status.ReportedAt, fc.Now())
	}
}

// Under one revision, windows that repeat the figures are not written; the
// first full window under a new revision is, at once.
func TestNewRevisionWindowWrittenAtOnce(t *testing.T) {
	c, _ := startAPI(t)
	sp := spec()
	sp.Revision = "gateway-r1"
	r, sc, m, fc, wl := measuredSetup(t, c, "node-rv", sp)
	pass(t, r, "node-rv")
	oneWindow(t, r, sc, m, fc, wl)
	for i := range 3 {
		if n := oneWindow(t, r, sc, m, fc, wl); n != 0 {
			t.Fatalf("r1 window %d repeating the figures: %d writes", i+2, n)
		}
	}
	// The controller moves the node a third into a window.
	step(t, m, fc, defaultMeasureInterval/3, false)
	moveTo(t, c, "node-rv", v1alpha1.ActionApply, "gateway-r2", spec().Tuning)
	pass(t, r, "node-rv")
	if ln := getLN(t, c, "node-rv"); ln.Status.Baseline == nil || ln.Status.Baseline.Revision != "gateway-r1" || ln.Status.Current != nil {
		t.Fatalf("after the move: baseline %+v, current %+v", ln.Status.Baseline, ln.Status.Current)
	}
	oneWindow(t, r, sc, m, fc, wl) // began before the apply finished: whatever it writes, it is no evidence
	if n := oneWindow(t, r, sc, m, fc, wl); n != 1 {
		t.Fatalf("the first full r2 window: %d writes, want 1", n)
	}
	if cur := getLN(t, c, "node-rv").Status.Current; cur == nil || cur.Revision != "gateway-r2" || !cur.MeasuredAt.Time.Equal(fc.Now()) {
		t.Errorf("current after the first r2 window = %+v", cur)
	}
}

// The first window that ends at or after spec.verifyAfter is written at
// once; the windows before it (after the first) and after it are not.
func TestFirstWindowPastVerifyAfterWrittenAtOnce(t *testing.T) {
	c, _ := startAPI(t)
	sp := spec()
	sp.Revision = "gateway-r1"
	r, sc, m, fc, wl := measuredSetup(t, c, "node-va", sp)
	va := metav1.NewTime(fc.Now().Add(95 * time.Second))
	ln := getLN(t, c, "node-va")
	ln.Spec.VerifyAfter = &va
	if err := c.Update(context.Background(), ln); err != nil {
		t.Fatal(err)
	}
	pass(t, r, "node-va")
	var writes []string
	for range 5 { // windows end at 30s, 60s, 90s, 120s, 150s
		writes = append(writes, fmt.Sprint(oneWindow(t, r, sc, m, fc, wl)))
	}
	if got := strings.Join(writes, " "); got != "1 0 0 1 0" {
		t.Fatalf("writes per window = %s; want 1 0 0 1 0 (the first window, then the one past verifyAfter)", got)
	}
	if cur := getLN(t, c, "node-va").Status.Current; cur == nil || cur.MeasuredAt.Before(&va) {
		t.Errorf("current = %+v, want the window past %s", cur, va)
	}
}

// The running agent writes its status as field manager latencytier-agent.
func TestAgentFieldOwner(t *testing.T) {
	c, env := startAPI(t)
	if err := c.Create(context.Background(), &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-fo"}, Spec: spec()}); err != nil {
		t.Fatal(err)
	}
	startAgent(t, env, fakeHost(t), "node-fo")
	ln := &v1alpha1.LatencyNode{}
	eventually(t, "Applied=True", func() bool {
		return c.Get(context.Background(), types.NamespacedName{Name: "node-fo"}, ln) == nil &&
			conditionIs(ln, v1alpha1.NodeApplied, metav1.ConditionTrue)
	})
	var managers []string
	owned := false
	for _, f := range ln.ManagedFields {
		managers = append(managers, f.Manager+"/"+f.Subresource)
		if f.Subresource == "status" {
			owned = f.Manager == FieldOwner
			if !owned {
				break
			}
		}
	}
	if !owned {
		t.Errorf("status managed by %v, want %s alone", managers, FieldOwner)
	}
}
