package loop

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/measure"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// newTestMeter is a Meter over a real Measurer reading the host root
// (schedstat, no BPF: the fake host's tasks are the workload) on a fake
// clock.
func newTestMeter(t *testing.T, root *host.Root) (*Meter, *clocktesting.FakeClock) {
	t.Helper()
	fc := clocktesting.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	log := testr.New(t)
	return NewMeter(measure.New(root, log, measure.WithAttach(measure.AttachNone)), fc, log), fc
}

// runMeter runs the Meter as the manager would, until the test ends.
func runMeter(t *testing.T, m *Meter) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = m.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// step moves the fake clock by d once the Meter waits on it; with window it
// also waits for the Meter to publish the window that ends there.
func step(t *testing.T, m *Meter, fc *clocktesting.FakeClock, d time.Duration, window bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !fc.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the Meter never waited on its clock")
		}
		time.Sleep(time.Millisecond)
	}
	fc.Step(d)
	if !window {
		return
	}
	select {
	case <-m.events:
	case <-time.After(10 * time.Second):
		t.Fatal("no window published after a full interval")
	}
}

// workload is one task in the fake host's /proc: each call to run adds
// 1000 timeslices that each waited delay in the run queue.
type workload struct {
	t                    *testing.T
	dir                  string
	delayNs, slicesTotal uint64
}

func newWorkload(t *testing.T, root *host.Root) *workload {
	w := &workload{t: t, dir: root.Proc("4242", "task", "4242")}
	f := make([]string, 50) // state and the 49 fields after it, as a 6.x kernel prints them
	for i := range f {
		f[i] = "0"
	}
	f[0] = "R"
	testroot.Write(t, filepath.Join(w.dir, "stat"), "4242 (gateway) "+strings.Join(f, " ")+"\n")
	w.run(0)
	return w
}

func (w *workload) run(delay time.Duration) {
	w.slicesTotal += 1000
	w.delayNs += 1000 * uint64(delay)
	testroot.Write(w.t, filepath.Join(w.dir, "schedstat"), fmt.Sprintf("1000000 %d %d\n", w.delayNs, w.slicesTotal))
}

// tree is every file under root with its content.
func tree(t *testing.T, root *host.Root) map[string]string {
	out := map[string]string{}
	err := filepath.WalkDir(root.Dir(), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func p99Near(ev *v1alpha1.LatencyEvidence, want time.Duration) bool {
	p := ev.RunQueue.P99
	return p != nil && ev.RunQueue.Samples == 1000 && p.Duration > want*85/100 && p.Duration < want*115/100
}

func getLN(t *testing.T, c client.Client, name string) *v1alpha1.LatencyNode {
	t.Helper()
	ln := &v1alpha1.LatencyNode{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: name}, ln); err != nil {
		t.Fatal(err)
	}
	return ln
}

// moveTo changes the node's spec as the rollout controller does.
func moveTo(t *testing.T, c client.Client, name string, action v1alpha1.NodeAction, rev string, tuning v1alpha1.TuningSpec) {
	t.Helper()
	ln := getLN(t, c, name)
	ln.Spec.Action, ln.Spec.Revision, ln.Spec.Tuning = action, rev, tuning
	if err := c.Update(context.Background(), ln); err != nil {
		t.Fatal(err)
	}
}

// The evidence contract end to end on the real API server, with a fake
// clock and the workload's run delay scripted per window: under Baseline
// the node is measured and nothing on the host changes (no journal, no
// knob); the first apply moves that window to baseline; a window that began
// before the apply finished is not counted; a revision change moves the
// Apply window to baseline; the controller's verdict survives every agent
// write.
func TestEvidenceBaselineApplyAndRevisionChange(t *testing.T) {
	c, _ := startAPI(t)
	ctx := context.Background()
	root := fakeHost(t)
	wl := newWorkload(t, root)
	m, fc := newTestMeter(t, root)
	runMeter(t, m)
	sc := &shuffled{Client: c, rnd: rand.New(rand.NewSource(1))}
	r := &Reconciler{Client: sc, NodeName: "node-e", Root: root, Resync: time.Second,
		Engine: &apply.Engine{Root: root, Log: testr.New(t)}, Meter: m}
	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-e"},
		Spec: v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionBaseline, Profile: "gateway", ProfileGeneration: 1}}
	if err := c.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}
	before := tree(t, root)

	// Baseline: one full window at 100µs a wakeup.
	pass(t, r, "node-e")
	wl.run(100 * time.Microsecond)
	step(t, m, fc, defaultMeasureInterval, true)
	pass(t, r, "node-e")
	ln = getLN(t, c, "node-e")
	cur := ln.Status.Current
	if cur == nil || cur.Action != v1alpha1.ActionBaseline || cur.Revision != "" || !p99Near(cur, 100*time.Microsecond) ||
		cur.Window.Duration != defaultMeasureInterval || !cur.MeasuredAt.Time.Equal(fc.Now()) {
		t.Fatalf("current after a Baseline window = %+v; want Baseline, p99 ~100µs over %s ending %s", cur, defaultMeasureInterval, fc.Now())
	}
	if c := ln.Status.Conditions; !conditionIs(ln, v1alpha1.NodeApplied, metav1.ConditionFalse) || ln.Status.ObservedGeneration != ln.Generation {
		t.Errorf("Baseline status conditions %+v, observedGeneration %d", c, ln.Status.ObservedGeneration)
	}
	// Schedstat attributes nothing: the window's RunQueueContention says
	// it cannot tell, and why.
	if c := meta.FindStatusCondition(ln.Status.Conditions, v1alpha1.NodeRunQueueContention); c == nil ||
		c.Status != metav1.ConditionUnknown || c.Reason != v1alpha1.ReasonNoAttribution {
		t.Errorf("RunQueueContention after a schedstat window = %+v, want Unknown/%s", c, v1alpha1.ReasonNoAttribution)
	}
	wl.run(0) // the same workload file, rewritten: the only change on the host
	after := tree(t, root)
	for p, v := range after {
		if before[p] != v && !strings.HasPrefix(p, filepath.Dir(wl.dir)) {
			t.Errorf("Baseline changed %s: %q -> %q", p, before[p], v)
		}
	}
	if _, err := os.Stat(filepath.Join(root.StateDir(), "journal.json")); !os.IsNotExist(err) {
		t.Errorf("Baseline left a journal (%v)", err)
	}

	// The controller moves the node to revision r1 a third into the next
	// window: that window straddles the apply and is not evidence.
	step(t, m, fc, defaultMeasureInterval/3, false)
	moveTo(t, c, "node-e", v1alpha1.ActionApply, "gateway-r1", spec().Tuning)
	pass(t, r, "node-e")
	ln = getLN(t, c, "node-e")
	if ln.Status.Current != nil || ln.Status.Baseline == nil || ln.Status.Baseline.Action != v1alpha1.ActionBaseline ||
		!p99Near(ln.Status.Baseline, 100*time.Microsecond) {
		t.Fatalf("after the first apply baseline = %+v, current = %+v; want the Baseline window as baseline, no current",
			ln.Status.Baseline, ln.Status.Current)
	}
	if got := testroot.Read(t, root.Proc("sys", "kernel", "sched_autogroup_enabled")); got != "0" {
		t.Fatalf("autogroup = %q after the apply", got)
	}
	wl.run(2 * time.Millisecond)
	step(t, m, fc, defaultMeasureInterval-defaultMeasureInterval/3, true)
	pass(t, r, "node-e")
	if ln = getLN(t, c, "node-e"); ln.Status.Current != nil {
		t.Fatalf("a window that began before the apply counted: current = %+v", ln.Status.Current)
	}
	wl.run(2 * time.Millisecond)
	step(t, m, fc, defaultMeasureInterval, true)
	pass(t, r, "node-e")
	ln = getLN(t, c, "node-e")
	if cur := ln.Status.Current; cur == nil || cur.Action != v1alpha1.ActionApply || cur.Revision != "gateway-r1" || !p99Near(cur, 2*time.Millisecond) {
		t.Fatalf("current after a full window under r1 = %+v; want Apply gateway-r1 p99 ~2ms", cur)
	}

	// A new revision: the r1 window becomes the baseline.
	moveTo(t, c, "node-e", v1alpha1.ActionApply, "gateway-r2", spec().Tuning)
	pass(t, r, "node-e")
	ln = getLN(t, c, "node-e")
	if b := ln.Status.Baseline; b == nil || b.Revision != "gateway-r1" || ln.Status.Current != nil {
		t.Fatalf("after the revision change baseline = %+v, current = %+v; want r1's window, no current", b, ln.Status.Current)
	}
	wl.run(50 * time.Microsecond)
	step(t, m, fc, defaultMeasureInterval, true)
	pass(t, r, "node-e")
	ln = getLN(t, c, "node-e")
	if cur := ln.Status.Current; cur == nil || cur.Revision != "gateway-r2" || !p99Near(cur, 50*time.Microsecond) {
		t.Fatalf("current under r2 = %+v", cur)
	}
}

// With measurement on, the agent writes its status at most once per
// window: the passes in between (resyncs, pod events) find nothing new,
// also in the measured latency copied beside the evidence. Each window's
// wait is four times the last's, a move written from its window
// (figures.Sudden), so every window is written once.
func TestEvidenceWritesAtMostOncePerWindow(t *testing.T) {
	c, _ := startAPI(t)
	_, r, sc := quietSetup(t, c, "node-m", 3, nil)
	wl := newWorkload(t, r.Root)
	m, fc := newTestMeter(t, r.Root)
	runMeter(t, m)
	r.Meter = m
	pass(t, r, "node-m")
	const windows = 4
	wait := 100 * time.Microsecond
	for range windows {
		wl.run(wait)
		wait *= 4
		step(t, m, fc, defaultMeasureInterval, true)
		for range 5 {
			pass(t, r, "node-m")
		}
	}
	ln := getLN(t, c, "node-m")
	if cur := ln.Status.Current; cur == nil || !cur.MeasuredAt.Time.Equal(fc.Now()) || ln.Status.Latency == nil {
		t.Fatalf("the last window is not in status: current %+v, latency %+v", cur, ln.Status.Latency)
	}
	if n := sc.patches.Load(); n > 1+windows {
		t.Errorf("%d status patches for one apply and %d windows (6 passes each); want at most %d", n, windows, 1+windows)
	}
}

// With measurement Disabled, windows neither come nor are written.
func TestEvidenceNoneWithMeasurementDisabled(t *testing.T) {
	const windows = 4
	c, _ := startAPI(t)
	_, rd, scd := quietSetup(t, c, "node-d", 1, nil)
	off := getLN(t, c, "node-d")
	off.Spec.Tuning.Measurement = &v1alpha1.MeasurementSpec{Source: v1alpha1.MeasurementDisabled}
	if err := c.Update(context.Background(), off); err != nil {
		t.Fatal(err)
	}
	md, fcd := newTestMeter(t, rd.Root)
	runMeter(t, md)
	rd.Meter = md
	for range windows {
		pass(t, rd, "node-d")
		fcd.Step(defaultMeasureInterval)
	}
	pass(t, rd, "node-d")
	if md.latest() != nil || fcd.HasWaiters() {
		t.Errorf("the Meter measured with measurement Disabled")
	}
	if n := scd.patches.Load(); n != 1 || getLN(t, c, "node-d").Status.Current != nil {
		t.Errorf("%d status patches with measurement Disabled; want the apply's only, no evidence", n)
	}
	for _, typ := range []string{v1alpha1.NodeWithinBudget, v1alpha1.NodeRunQueueContention} {
		if c := meta.FindStatusCondition(getLN(t, c, "node-d").Status.Conditions, typ); c == nil ||
			c.Status != metav1.ConditionUnknown || c.Reason != v1alpha1.ReasonNotMeasured {
			t.Errorf("%s with measurement Disabled = %+v, want Unknown/%s", typ, c, v1alpha1.ReasonNotMeasured)
		}
	}
}

// The running agent: its Meter's window enqueues the pass that writes
// status.current, with the resync an hour away.
func TestMeterWindowEnqueuesAPass(t *testing.T) {
	c, env := startAPI(t)
	root := fakeHost(t)
	wl := newWorkload(t, root)
	m, fc := newTestMeter(t, root)
	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-w"},
		Spec: v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionBaseline, Profile: "gateway", ProfileGeneration: 1}}
	if err := c.Create(context.Background(), ln); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{NodeName: "node-w", Root: root, Resync: time.Hour, Log: testr.New(t), Config: env.Config, Meter: m})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	eventually(t, "the Baseline pass", func() bool {
		ln = getLN(t, c, "node-w")
		return conditionIs(ln, v1alpha1.NodeApplied, metav1.ConditionFalse)
	})
	if ln.Status.Current != nil {
		t.Fatalf("current before any window: %+v", ln.Status.Current)
	}
	wl.run(300 * time.Microsecond)
	step(t, m, fc, defaultMeasureInterval, false)
	eventually(t, "status.current written after the window", func() bool {
		cur := getLN(t, c, "node-w").Status.Current
		return cur != nil && p99Near(cur, 300*time.Microsecond)
	})
}
