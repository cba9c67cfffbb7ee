package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
)

// simAgents play the agents of a set of nodes as the API documents them
// (LatencyEvidence): on a new (action, revision) the last full window
// becomes the baseline, and a full window under the new one is reported
// ending verificationWindow after the move (the window's end is data the
// controller compares, so no clock has to pass). p99 is 400µs untuned,
// 300µs tuned, 2ms where regress says so; a stalled node reports no window.
type simAgents struct {
	t      *testing.T
	nodes  []string
	window time.Duration

	mu      sync.Mutex
	regress map[string]bool // node/revision
	stall   map[string]bool // revision/node
	// fallback: the kernel ejected the node's scheduler under the
	// revision (node/revision): scheduler/class Fallback, Applied False
	// with the reason the agent gives it.
	fallback map[string]bool
	// Checked on every consistent snapshot (one List) of the LatencyNodes:
	// maxInFlight is the most nodes holding target without a passing
	// verdict; canary, when set, must pass before any other node holds
	// target (canaryBroken records the snapshot that broke it).
	target       string
	canary       string
	maxInFlight  int
	canaryBroken []string
	ever         map[string]bool // nodes ever seen at target
}

func startSimAgents(t *testing.T, nodes []string, window time.Duration) *simAgents {
	s := &simAgents{t: t, nodes: nodes, window: window, regress: map[string]bool{}, stall: map[string]bool{}, fallback: map[string]bool{}, ever: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			s.pass(ctx)
			time.Sleep(20 * time.Millisecond) // polling interval, not a clock
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func (s *simAgents) set(f func(s *simAgents)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *simAgents) pass(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var list v1alpha1.LatencyNodeList
	if err := k8s.List(ctx, &list); err != nil {
		return
	}
	mine := map[string]bool{}
	for _, n := range s.nodes {
		mine[n] = true
	}
	inFlight, canaryPassed, others := 0, false, []string{}
	for i := range list.Items {
		ln := &list.Items[i]
		if !mine[ln.Name] || s.target == "" || ln.Spec.Action != v1alpha1.ActionApply || ln.Spec.Revision != s.target {
			continue
		}
		s.ever[ln.Name] = true
		ok := s.passes(ln)
		if !ok {
			inFlight++
		}
		if ln.Name == s.canary {
			canaryPassed = ok
		} else {
			others = append(others, ln.Name)
		}
	}
	s.maxInFlight = max(s.maxInFlight, inFlight)
	if s.canary != "" && !canaryPassed && len(others) > 0 && s.canaryBroken == nil {
		s.canaryBroken = others
	}
	for i := range list.Items {
		if mine[list.Items[i].Name] {
			s.report(ctx, &list.Items[i])
		}
	}
}

// passes: the node reported a full window under the target that the
// controller's gate passes (the sim's own evidence: the verdicts are in the
// profile's status, which no snapshot of the LatencyNodes shows).
func (s *simAgents) passes(ln *v1alpha1.LatencyNode) bool {
	cur := ln.Status.Current
	return cur != nil && cur.Action == v1alpha1.ActionApply && cur.Revision == s.target &&
		!s.regress[ln.Name+"/"+s.target] && !s.stall[s.target+"/"+ln.Name] && !s.fallback[ln.Name+"/"+s.target]
}

// report writes the status the node's agent would, when it differs.
func (s *simAgents) report(ctx context.Context, ln *v1alpha1.LatencyNode) {
	st := ln.Status.DeepCopy()
	st.ObservedGeneration = ln.Generation
	st.Profile, st.ProfileGeneration = ln.Spec.Profile, ln.Spec.ProfileGeneration
	cond := appliedTrue
	if ln.Spec.Action == v1alpha1.ActionRevert {
		cond = revertedTrue
	}
	st.Settings = nil
	if ln.Spec.Action == v1alpha1.ActionApply && s.fallback[ln.Name+"/"+ln.Spec.Revision] {
		st.Settings, cond = fallbackReport()
	}
	cond.ObservedGeneration = ln.Generation
	if c := meta.FindStatusCondition(st.Conditions, cond.Type); c != nil {
		cond.LastTransitionTime = c.LastTransitionTime
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	cur := st.Current
	if cur == nil || cur.Action != ln.Spec.Action || cur.Revision != ln.Spec.Revision {
		if cur != nil {
			st.Baseline = cur
		}
		st.Current = nil
		if !s.stall[ln.Spec.Revision+"/"+ln.Name] {
			st.Current = s.window1(ln)
		}
	}
	if equalJSON(st, &ln.Status) {
		return
	}
	patched := ln.DeepCopy()
	patched.Status = *st
	if err := k8s.Status().Patch(ctx, patched, client.MergeFrom(ln)); err != nil {
		s.t.Logf("sim agent %s: %v", ln.Name, err)
	}
}

// window1 is a full window under the node's spec, ending verificationWindow
// after the controller's move.
func (s *simAgents) window1(ln *v1alpha1.LatencyNode) *v1alpha1.LatencyEvidence {
	setAt, err := time.Parse(time.RFC3339, ln.Annotations[v1alpha1.RevisionSetAtAnnotation])
	if err != nil {
		setAt = ln.CreationTimestamp.Time
	}
	p99 := 400 * time.Microsecond
	switch {
	case s.regress[ln.Name+"/"+ln.Spec.Revision]:
		p99 = 2 * time.Millisecond
	case ln.Spec.Action == v1alpha1.ActionApply:
		p99 = 300 * time.Microsecond
	}
	return &v1alpha1.LatencyEvidence{
		Action: ln.Spec.Action, Revision: ln.Spec.Revision,
		Window: &metav1.Duration{Duration: s.window}, MeasuredAt: metav1.NewTime(setAt.Add(s.window + time.Second)),
		RunQueue: v1alpha1.LatencySummary{Samples: 5000, P99: &metav1.Duration{Duration: p99}},
	}
}

func equalJSON(a, b *v1alpha1.LatencyNodeStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// rolloutFleet creates n nodes labelled for scenario and a profile with
// spec.rollout over them.
func rolloutFleet(t *testing.T, scenario string, n int, ro v1alpha1.RolloutSpec) ([]string, *v1alpha1.LatencyProfile) {
	t.Helper()
	var nodes []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%02d", scenario, i)
		createNode(t, name, map[string]string{"rollout": scenario})
		nodes = append(nodes, name)
	}
	p := &v1alpha1.LatencyProfile{
		ObjectMeta: metav1.ObjectMeta{Name: scenario},
		Spec: v1alpha1.LatencyProfileSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"rollout": scenario}},
			TuningSpec: v1alpha1.TuningSpec{
				Scheduler: &v1alpha1.SchedulerSpec{Autogroup: ptr.To(v1alpha1.Disabled)},
				Measurement: &v1alpha1.MeasurementSpec{Interval: &metav1.Duration{Duration: 5 * time.Second},
					NamespaceSelector: &v1alpha1.NamespaceSelector{MatchLabels: map[string]string{"latencytier.io/tier": "true"}}},
			},
			Rollout: &ro,
		},
	}
	if err := k8s.Create(context.Background(), p); err != nil {
		t.Fatalf("creating profile: %v", err)
	}
	cleanup(t, nodes, []string{scenario})
	return nodes, p
}

func rolloutPolicy(canary, maxInFlight int32) v1alpha1.RolloutSpec {
	return v1alpha1.RolloutSpec{
		Canary:             &v1alpha1.CanarySpec{Nodes: ptr.To(intstr.FromInt32(canary))},
		MaxInFlight:        ptr.To(intstr.FromInt32(maxInFlight)),
		VerificationWindow: &metav1.Duration{Duration: 5 * time.Second},
	}
}

// expectRollout waits for the profile's rollout phase and returns the profile.
func expectRollout(t *testing.T, name string, phase v1alpha1.RolloutPhase) *v1alpha1.LatencyProfile {
	t.Helper()
	var p *v1alpha1.LatencyProfile
	eventually(t, name+" rollout "+string(phase), func() error {
		p = getProfile(t, name)
		ro := p.Status.Rollout
		if ro == nil || ro.Phase != phase || ro.ObservedGeneration != p.Generation || ro.Revision != currentRevision(p) ||
			(phase == v1alpha1.RolloutComplete && ro.Waiting+ro.Verifying > 0) || (phase == v1alpha1.RolloutComplete && ro.Updated == 0) {
			return fmt.Errorf("rollout = %+v", p.Status.Rollout)
		}
		return nil
	})
	return p
}

// editProfile changes the profile's spec with a patch.
func editProfile(t *testing.T, name string, f func(*v1alpha1.LatencyProfile)) *v1alpha1.LatencyProfile {
	t.Helper()
	p := getProfile(t, name)
	patched := p.DeepCopy()
	f(patched)
	if err := k8s.Patch(context.Background(), patched, client.MergeFrom(p)); err != nil {
		t.Fatalf("patching profile: %v", err)
	}
	return patched
}

// revisionAfter is the revision p will have after f.
func revisionAfter(p *v1alpha1.LatencyProfile, f func(*v1alpha1.LatencyProfile)) string {
	q := p.DeepCopy()
	f(q)
	return currentRevision(q)
}

func migrationCost(d time.Duration) func(*v1alpha1.LatencyProfile) {
	return func(p *v1alpha1.LatencyProfile) { p.Spec.Scheduler.MigrationCost = &metav1.Duration{Duration: d} }
}

// revisionsOf maps node → spec revision ("Baseline"/"Revert" for those).
func revisionsOf(t *testing.T, nodes []string) map[string]string {
	out := map[string]string{}
	for _, n := range nodes {
		ln, err := getLN(n)
		if err != nil {
			continue
		}
		out[n] = ln.Spec.Revision
		if ln.Spec.Action != v1alpha1.ActionApply {
			out[n] = string(ln.Spec.Action)
		}
	}
	return out
}

func TestRolloutCanaryThenBatchesThenNoWrites(t *testing.T) {
	needSuite(t)
	nodes, p := rolloutFleet(t, "ro-batch", 20, rolloutPolicy(1, 3))
	sim := startSimAgents(t, nodes, 5*time.Second)
	sim.set(func(s *simAgents) { s.target, s.canary = currentRevision(p), "ro-batch-00" })
	done := expectRollout(t, "ro-batch", v1alpha1.RolloutComplete)

	sim.set(func(s *simAgents) {
		if s.canaryBroken != nil {
			t.Errorf("nodes %v held the revision before the canary ro-batch-00 passed", s.canaryBroken)
		}
		if s.maxInFlight > 3 {
			t.Errorf("%d nodes in flight at once, maxInFlight 3", s.maxInFlight)
		}
	})
	ro := done.Status.Rollout
	if ro.Updated != 20 || ro.Improved != 20 || ro.Waiting != 0 {
		t.Fatalf("rollout status = %+v", ro)
	}
	for n, rev := range revisionsOf(t, nodes) {
		if rev != ro.Revision {
			t.Fatalf("node %s holds %s, want %s", n, rev, ro.Revision)
		}
	}
	// Each move tells the agent when its verification window ends, so it
	// reports the deciding window at once.
	for _, n := range nodes {
		ln, err := getLN(n)
		if err != nil {
			t.Fatal(err)
		}
		setAt, err := time.Parse(time.RFC3339, ln.Annotations[v1alpha1.RevisionSetAtAnnotation])
		if err != nil {
			t.Fatalf("node %s: %v", n, err)
		}
		if va := ln.Spec.VerifyAfter; va == nil || !va.Time.Equal(setAt.Add(5*time.Second)) {
			t.Fatalf("node %s: verifyAfter %v, want the move (%s) + verificationWindow 5s", n, va, setAt)
		}
	}
	expectEvent(t, "ro-batch", "RolloutComplete")

	// Complete: nothing more is written, across several informer resyncs.
	before := rolloutVersions(t, nodes, "ro-batch")
	waitForReconciles(t, 3, nodes, []string{"ro-batch"})
	if after := rolloutVersions(t, nodes, "ro-batch"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("writes after completion:\nbefore %v\nafter  %v", before, after)
	}
}

func rolloutVersions(t *testing.T, nodes []string, profile string) map[string]string {
	out := map[string]string{"profile": getProfile(t, profile).ResourceVersion}
	for _, n := range nodes {
		if ln, err := getLN(n); err == nil {
			out[n] = ln.ResourceVersion
		}
	}
	return out
}

func TestRolloutRegressingCanaryRollsBackAndStops(t *testing.T) {
	needSuite(t)
	nodes, p := rolloutFleet(t, "ro-back", 20, rolloutPolicy(1, 4))
	sim := startSimAgents(t, nodes, 5*time.Second)
	r1 := currentRevision(p)
	expectRollout(t, "ro-back", v1alpha1.RolloutComplete)

	r2 := revisionAfter(p, migrationCost(5*time.Millisecond))
	sim.set(func(s *simAgents) { s.target = r2; s.regress["ro-back-00/"+r2] = true })
	editProfile(t, "ro-back", migrationCost(5*time.Millisecond))
	back := expectRollout(t, "ro-back", v1alpha1.RolloutRolledBack)
	want := "node ro-back-00 regressed: run-queue p99 300µs → 2ms, 6.67× > 1.2×; rolled back 1 node(s) to " + r1
	if ro := back.Status.Rollout; ro.PreviousRevision != r1 || !strings.Contains(ro.Message, want) {
		t.Fatalf("rollout = %+v, want message %q", ro, want)
	}
	expectCanaryRolledBack(t, sim, "ro-back", "ro-back-00", nodes, r1, r2)
}

// expectCanaryRolledBack: profile's canary is back on r1 with the
// RolloutRolledBack event, no other node ever reached r2, and every node
// holds r1.
func expectCanaryRolledBack(t *testing.T, sim *simAgents, profile, canary string, nodes []string, r1, r2 string) {
	t.Helper()
	eventually(t, "canary back on "+r1, func() error {
		if got := revisionsOf(t, nodes)[canary]; got != r1 {
			return fmt.Errorf("canary holds %s", got)
		}
		return nil
	})
	expectEvent(t, profile, "RolloutRolledBack")
	sim.set(func(s *simAgents) {
		for n := range s.ever {
			if n != canary {
				t.Errorf("node %s reached %s although the canary failed", n, r2)
			}
		}
	})
	for n, rev := range revisionsOf(t, nodes) {
		if rev != r1 {
			t.Fatalf("node %s holds %s after the rollback, want %s", n, rev, r1)
		}
	}
}

func TestRolloutPauseSpecChangeAndNodeLeaving(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	nodes, p := rolloutFleet(t, "ro-mid", 20, rolloutPolicy(1, 2))
	sim := startSimAgents(t, nodes, 5*time.Second)
	expectRollout(t, "ro-mid", v1alpha1.RolloutComplete)

	// R2: nodes 05-07 stall in verification; 05 and 06 fill both slots.
	r1 := currentRevision(p)
	r2 := revisionAfter(p, migrationCost(5*time.Millisecond))
	sim.set(func(s *simAgents) {
		s.target = r2
		for _, n := range []string{"ro-mid-05", "ro-mid-06", "ro-mid-07"} {
			s.stall[r2+"/"+n] = true
		}
	})
	editProfile(t, "ro-mid", migrationCost(5*time.Millisecond))
	expectHolding(t, nodes, map[string]string{"ro-mid-05": r2, "ro-mid-06": r2, "ro-mid-07": r1})

	// A node in flight leaves: its slot goes to the next node (07, which
	// stalls too), and no further.
	if err := k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ro-mid-06"}}); err != nil {
		t.Fatal(err)
	}
	expectHolding(t, nodes, map[string]string{"ro-mid-05": r2, "ro-mid-07": r2, "ro-mid-08": r1})
	sim.set(func(s *simAgents) {
		if s.maxInFlight > 2 {
			t.Errorf("%d nodes in flight at once, maxInFlight 2", s.maxInFlight)
		}
	})

	// Pause: nothing moves, even once the stalled node reports.
	editProfile(t, "ro-mid", func(p *v1alpha1.LatencyProfile) { p.Spec.Rollout.Paused = true })
	expectRollout(t, "ro-mid", v1alpha1.RolloutPaused)
	held := revisionsOf(t, nodes)
	if held["ro-mid-08"] != r1 {
		t.Fatalf("ro-mid-08 holds %s with both slots stalled, want %s", held["ro-mid-08"], r1)
	}
	sim.set(func(s *simAgents) { s.stall = map[string]bool{} })
	for _, n := range []string{"ro-mid-05", "ro-mid-07"} {
		eventually(t, n+" reports its window under "+r2, func() error {
			ln, err := getLN(n)
			if err != nil {
				return err
			}
			if cur := ln.Status.Current; cur == nil || cur.Revision != r2 {
				return fmt.Errorf("current evidence %+v", cur)
			}
			return nil
		})
	}
	waitForReconciles(t, 3, nil, []string{"ro-mid"})
	if now := revisionsOf(t, nodes); fmt.Sprint(now) != fmt.Sprint(held) {
		t.Fatalf("nodes moved while paused:\nbefore %v\nafter  %v", held, now)
	}

	// A spec change mid-rollout (while paused), then resume: R3 everywhere,
	// and a rollback would still return to R1, the last complete revision.
	p3 := editProfile(t, "ro-mid", migrationCost(3*time.Millisecond))
	r3 := currentRevision(p3)
	sim.set(func(s *simAgents) { s.target = r3; s.maxInFlight = 0 })
	expectRollout(t, "ro-mid", v1alpha1.RolloutPaused)
	editProfile(t, "ro-mid", func(p *v1alpha1.LatencyProfile) { p.Spec.Rollout.Paused = false })
	done := expectRollout(t, "ro-mid", v1alpha1.RolloutComplete)
	if ro := done.Status.Rollout; ro.Updated != 19 || ro.PreviousRevision != r1 {
		t.Fatalf("rollout = %+v, want 19 nodes on %s, rolling back to %s", ro, r3, r1)
	}
	sim.set(func(s *simAgents) {
		if s.maxInFlight > 2 {
			t.Errorf("%d nodes in flight at once, maxInFlight 2", s.maxInFlight)
		}
	})
	for n, rev := range revisionsOf(t, nodes) {
		if rev != r3 {
			t.Fatalf("node %s holds %s, want %s", n, rev, r3)
		}
	}
}

// expectHolding waits until each named node's LatencyNode holds the revision.
func expectHolding(t *testing.T, nodes []string, want map[string]string) {
	t.Helper()
	eventually(t, fmt.Sprintf("nodes holding %v", want), func() error {
		revs := revisionsOf(t, nodes)
		for n, rev := range want {
			if revs[n] != rev {
				return fmt.Errorf("revisions %v", revs)
			}
		}
		return nil
	})
}

// The verdict a rollback rests on stays on record: the profile's rollout
// lists the regressed node as Regressed, with the figures, after it was
// reverted, and counts it (found on the real cluster: the move skipped the
// verdict patch and the Revert then cleared it).
func TestRolloutFirstRevisionRegressedKeepsVerdictAfterRevert(t *testing.T) {
	needSuite(t)
	nodes, p := rolloutFleet(t, "ro-first", 3, rolloutPolicy(1, 1))
	sim := startSimAgents(t, nodes, 5*time.Second)
	r1 := currentRevision(p)
	sim.set(func(s *simAgents) { s.target = r1; s.regress["ro-first-00/"+r1] = true })
	back := expectRollout(t, "ro-first", v1alpha1.RolloutRolledBack)
	eventually(t, "ro-first-00 reverted with verdict Regressed", func() error {
		ln, err := getLN("ro-first-00")
		if err != nil {
			return err
		}
		if ln.Spec.Action != v1alpha1.ActionRevert {
			return fmt.Errorf("action %s", ln.Spec.Action)
		}
		ro := getProfile(t, "ro-first").Status.Rollout
		if v := verdictIn(ro, "ro-first-00"); v == nil || v.Verdict != v1alpha1.VerdictRegressed || !strings.Contains(v.Message, "400µs → 2ms") {
			return fmt.Errorf("verdict %+v", v)
		}
		if ro.Regressed != 1 {
			return fmt.Errorf("rollout %+v", ro)
		}
		return nil
	})
	if !strings.Contains(back.Status.Rollout.Message, "rolled back 1 node(s) to no tuning") {
		t.Fatalf("message %q", back.Status.Rollout.Message)
	}
}

// verdictIn is node's entry in a rollout status's verdicts, nil when none.
func verdictIn(ro *v1alpha1.RolloutStatus, node string) *v1alpha1.NodeVerdictStatus {
	if ro == nil {
		return nil
	}
	for i := range ro.Verdicts {
		if ro.Verdicts[i].Node == node {
			return &ro.Verdicts[i]
		}
	}
	return nil
}

// TestRolloutRestartKeepsRolledBackNode: the verdicts live in the
// profile's status, not in the manager: a fresh reconciler (a restarted
// manager, nothing in memory) reading the same objects keeps the rolled
// back canary on the previous revision, still Regressed with its figures,
// and moves no node to the regressed revision.
func TestRolloutRestartKeepsRolledBackNode(t *testing.T) {
	needSuite(t)
	nodes, p := rolloutFleet(t, "ro-restart", 4, rolloutPolicy(1, 2))
	sim := startSimAgents(t, nodes, 5*time.Second)
	r1 := currentRevision(p)
	expectRollout(t, "ro-restart", v1alpha1.RolloutComplete)
	r2 := revisionAfter(p, migrationCost(5*time.Millisecond))
	sim.set(func(s *simAgents) { s.target = r2; s.regress["ro-restart-00/"+r2] = true })
	editProfile(t, "ro-restart", migrationCost(5*time.Millisecond))
	expectRollout(t, "ro-restart", v1alpha1.RolloutRolledBack)
	expectHolding(t, nodes, map[string]string{"ro-restart-00": r1, "ro-restart-01": r1})

	fresh := &profileReconciler{Client: k8s, Recorder: events.NewFakeRecorder(100), UnreachableAfter: testUnreachable,
		Namespace: testNamespace, Gate: newStatusGate(0, nil), Cache: freshCache(t)}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "ro-restart"}}
	// Three passes of the fresh reconciler (the suite's manager runs too: a
	// pass that loses a write to it is run again).
	for done, tries := 0, 0; done < 3; tries++ {
		_, err := fresh.Reconcile(context.Background(), req)
		switch {
		case err == nil:
			done++
		case errors.As(err, new(executor.StaleError)) && tries < 30:
		default:
			t.Fatalf("fresh reconciler: %v", err)
		}
	}
	for n, rev := range revisionsOf(t, nodes) {
		if rev != r1 {
			t.Fatalf("node %s holds %s after the restart, want %s", n, rev, r1)
		}
	}
	ro := getProfile(t, "ro-restart").Status.Rollout
	if ro.Phase != v1alpha1.RolloutRolledBack || ro.Regressed != 1 {
		t.Fatalf("rollout after the restart = %+v", ro)
	}
	if v := verdictIn(ro, "ro-restart-00"); v == nil || v.Verdict != v1alpha1.VerdictRegressed || v.Revision != r2 ||
		!strings.Contains(v.Message, "300µs → 2ms") {
		t.Fatalf("canary's verdict after the restart = %+v, want Regressed on %s", v, r2)
	}
}

// freshCache is a new informer cache with the manager's indexes, as a
// restarted manager starts with: nothing carried over from the suite's.
func freshCache(t *testing.T) cache.Cache {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := cache.New(testEnv.Config, cacheOptionsWithScheme(testNamespace))
	if err != nil {
		t.Fatal(err)
	}
	if err := addIndexes(ctx, c); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("fresh cache did not sync")
	}
	return c
}

func cacheOptionsWithScheme(ns string) cache.Options {
	o := cacheOptions(ns)
	o.Scheme = NewScheme()
	return o
}

// TestDeletionRevertsNodesStillOnBaseline deletes a profile with
// spec.rollout while its nodes still measure their baseline (a node joins
// on Baseline, and a rolled-back canary waits there): the nodes are
// reverted and released and the profile goes. The release started a revert
// only from Apply, so a Baseline node was never reverted and the profile's
// finalizer waited for it forever (seen on the multi-node cluster, issue
// 29: deleting a rolled-back profile hung).
func TestDeletionRevertsNodesStillOnBaseline(t *testing.T) {
	needSuite(t)
	nodes, p := rolloutFleet(t, "delbase", 2, rolloutPolicy(1, 1))
	for _, n := range nodes {
		eventually(t, n+" on Baseline", func() error {
			ln, err := getLN(n)
			if err != nil {
				return err
			}
			if ln.Spec.Action != v1alpha1.ActionBaseline {
				return fmt.Errorf("action = %s", ln.Spec.Action)
			}
			return nil
		})
	}
	eventually(t, "finalizer", func() error {
		if len(getProfile(t, p.Name).Finalizers) == 0 {
			return errString("no finalizer yet")
		}
		return nil
	})
	if err := k8s.Delete(context.Background(), &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: p.Name}}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		expectReverting(t, n)
		playAgent(t, n, revertedTrue)
		expectReleased(t, n)
	}
	eventually(t, "profile gone", func() error { return gone(&v1alpha1.LatencyProfile{}, p.Name) })
}
