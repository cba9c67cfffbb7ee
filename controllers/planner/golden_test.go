package planner

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Golden sequences: events go in, the planned act and the writes it needs
// come out, pass after pass, with the node's state before and after each
// one checked against Machine. A world holds one node as the two
// reconcilers read it; a step says which of them runs (the profile's pass
// or the node controller's release), so an interleaving that once lost a
// race is a row here.

var goldenT0 = time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)

const goldenNode = "n1"

// world is one node, its LatencyNode and the profile whose pass runs.
type world struct {
	profile    *v1alpha1.LatencyProfile
	target     string
	ln         *v1alpha1.LatencyNode // nil: deleted (released)
	node       *corev1.Node
	now        time.Time
	deselected bool // the profile no longer wins the node
	drained    bool // no pod left to evict
	rolledBack bool
	classes    map[string]Class
	paused     bool // status.reboots.paused
	boots      int
}

// newWorld is a node selected by profile (revision profile-0000000a,
// boot policy Reboot, a rollout) in boot boot-1, Ready, Applied.
func newWorld(profile string) *world {
	w := &world{
		profile: &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: profile},
			Spec: v1alpha1.LatencyProfileSpec{Rollout: &v1alpha1.RolloutSpec{}}},
		target: profile + "-0000000a",
		now:    goldenT0,
		boots:  1,
	}
	w.ln = &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: goldenNode, Generation: 1},
		Spec: v1alpha1.LatencyNodeSpec{Profile: profile, Action: v1alpha1.ActionApply, Revision: w.target}}
	w.ln.Spec.Tuning.BootParameters = &v1alpha1.BootParametersSpec{Policy: v1alpha1.BootReboot}
	w.node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: goldenNode}}
	w.node.Status.NodeInfo.BootID = "boot-1"
	w.node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	w.report(v1alpha1.BootPlanned, metav1.ConditionTrue)
	return w
}

// report is the agent's status write for the current spec in the running boot.
func (w *world) report(st v1alpha1.BootState, applied metav1.ConditionStatus) {
	boot := w.node.Status.NodeInfo.BootID
	rebootedFor := ""
	if w.ln.Status.Boot != nil {
		rebootedFor = w.ln.Status.Boot.RebootedFor
	}
	w.ln.Status.ObservedGeneration = w.ln.Generation
	w.ln.Status.Boot = &v1alpha1.BootStatus{State: st, BootID: boot, RebootedFor: rebootedFor}
	w.ln.Status.Conditions = []metav1.Condition{{Type: v1alpha1.NodeApplied, Status: applied, ObservedGeneration: w.ln.Generation}}
	if w.ln.Spec.Action == v1alpha1.ActionRevert {
		w.ln.Status.Conditions = append(w.ln.Status.Conditions,
			metav1.Condition{Type: v1alpha1.NodeReverted, Status: metav1.ConditionTrue, ObservedGeneration: w.ln.Generation})
	}
}

// specWrite is a manager's spec write: a new generation.
func (w *world) specWrite(f func(*v1alpha1.LatencyNodeSpec)) {
	f(&w.ln.Spec)
	w.ln.Generation++
}

// The events.

func staged(w *world)  { w.report(v1alpha1.BootStaged, metav1.ConditionTrue) }
func drained(w *world) { w.drained = true }
func later(d time.Duration) func(*world) {
	return func(w *world) { w.now = w.now.Add(d) }
}

// rebooted: the agent rebooted for the record; the kubelet reports the new
// boot Ready and the agent reports it Applied.
func rebooted(w *world) {
	w.boots++
	w.node.Status.NodeInfo.BootID = "boot-" + string(rune('0'+w.boots))
	w.ln.Status.Boot = &v1alpha1.BootStatus{RebootedFor: w.ln.Spec.Reboot.Revision}
	w.report(v1alpha1.BootBooted, metav1.ConditionTrue)
}

func uncordonedByPerson(w *world) { w.node.Spec.Unschedulable = false }
func deselected(w *world)         { w.deselected = true }
func verdict(c Class) func(*world) {
	return func(w *world) { w.classes = map[string]Class{goldenNode: c} }
}

// takenOver: another profile wins the node and writes its tuning into the
// same LatencyNode; the record of the profile it left is carried over.
func takenOver(by string) func(*world) {
	return func(w *world) {
		w.profile = &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: by},
			Spec: v1alpha1.LatencyProfileSpec{Rollout: &v1alpha1.RolloutSpec{}}}
		w.target = by + "-0000000b"
		w.specWrite(func(s *v1alpha1.LatencyNodeSpec) { s.Profile, s.Revision = by, w.target })
		w.report(v1alpha1.BootPlanned, metav1.ConditionTrue)
	}
}

func agentReports(w *world) { w.report(w.ln.Status.Boot.State, metav1.ConditionTrue) }

func onBaseline(w *world) {
	w.specWrite(func(s *v1alpha1.LatencyNodeSpec) { s.Action = v1alpha1.ActionBaseline })
	w.report(v1alpha1.BootNotNeeded, metav1.ConditionTrue)
}

// pass says which reconciler runs a step.
type pass int

const (
	none        pass = iota // an event only
	profilePass             // the profile's reboot pass
	releasePass             // the node controller's release of a node no profile owns
	gatePass                // the taint gate: the tuning-pending taint on or off
)

// step is one row of a golden sequence: the event, the pass that runs
// after it, the act it plans (profilePass) and the writes it makes.
type step struct {
	on     Event
	event  func(*world)
	run    pass
	act    Act
	writes []Write
	to     State
}

// planProfile is the profile's pass for the world's node: a record's next
// act (NextReboot), or whether a reboot starts (Startable).
func (w *world) planProfile() Act {
	if w.ln == nil {
		return Wait
	}
	if w.ln.Spec.Reboot != nil {
		v := ViewOf(w.profile, w.target, w.ln, w.node, w.deselected, w.classes, w.now)
		v.Drained = w.drained
		a, _ := NextReboot(v)
		return a
	}
	if Startable(w.ln, w.node, w.target, w.rolledBack, w.deselected) {
		return Start
	}
	return Wait
}

// carryOut is the executor (controllers/reboot_act.go) on the world: the
// writes act makes, made.
func (w *world) carryOut(a Act) []Write {
	var out []Write
	since := metav1.NewTime(w.now)
	switch a {
	case Start:
		w.ln.Spec.Reboot = &v1alpha1.NodeRebootSpec{Revision: w.ln.Spec.Revision, Phase: v1alpha1.RebootDraining, Since: since}
		if !StagedForReboot(w.ln) {
			w.ln.Spec.Reboot.Revision = BackRevision(w.target)
		}
		w.ln.Generation++
		out = append(out, WriteRecord, w.cordon())
	case Drain:
		if !w.node.Spec.Unschedulable {
			return []Write{w.cordon()}
		}
		return []Write{WriteEvict}
	case Request:
		w.ln.Spec.Reboot.Phase, w.ln.Spec.Reboot.Since = v1alpha1.RebootRequested, since
		w.ln.Spec.Reboot.BootID = w.node.Status.NodeInfo.BootID
		w.ln.Generation++
		out = append(out, WriteRecord)
	case Withdraw:
		w.ln.Spec.Reboot.Phase, w.ln.Spec.Reboot.Since = v1alpha1.RebootDraining, since
		w.ln.Generation++
		out = append(out, WriteRecord)
	case Verify:
		w.ln.Spec.Reboot.Phase, w.ln.Spec.Reboot.Since = v1alpha1.RebootVerifying, since
		w.ln.Generation++
		out = append(out, WriteRecord, WriteVerifyAfter)
		w.report(w.ln.Status.Boot.State, metav1.ConditionTrue) // the agent reports the new generation
	case Abandon, Stall:
		w.paused = true
		out = append(out, WriteStatusPause)
		if a == Stall {
			return out
		}
		fallthrough
	case Finish:
		if w.uncordon() {
			out = append(out, WriteUncordon)
		}
		w.ln.Spec.Reboot = nil
		w.ln.Generation++
		out = append(out, WriteRecordClear)
	}
	return out
}

func (w *world) cordon() Write {
	w.node.Spec.Unschedulable = true
	w.node.Annotations = map[string]string{v1alpha1.RebootCordonAnnotation: w.ln.Spec.Reboot.Revision}
	return WriteCordon
}

// uncordon lifts the manager's own cordon only (the marker), as executor.Uncordon.
func (w *world) uncordon() bool {
	if _, ours := w.node.Annotations[v1alpha1.RebootCordonAnnotation]; !ours {
		return false
	}
	w.node.Spec.Unschedulable = false
	delete(w.node.Annotations, v1alpha1.RebootCordonAnnotation)
	return true
}

// release is the node controller's pass for a node no profile owns.
func (w *world) release() []Write {
	if w.ln == nil {
		return nil
	}
	v := ReleaseView{LN: w.ln, Node: w.node, Now: w.now, BootTimeout: BootTimeoutOf(w.profile),
		UnreachableAfter: 5 * time.Minute}
	switch Release(v) {
	case ReleaseRevert:
		w.specWrite(func(s *v1alpha1.LatencyNodeSpec) { s.Action = v1alpha1.ActionRevert })
		return []Write{WriteRevert}
	case ReleaseFinish:
		out := []Write{WriteLabelsOff}
		if UncordonOnRelease(w.ln, w.node) && w.uncordon() {
			out = append(out, WriteUncordon)
		}
		w.ln = nil
		return append(out, WriteDelete)
	}
	return nil
}

// gate is the taint reconciler's pass: the taint put on or lifted.
func (w *world) gate() []Write {
	want := WantsPendingTaint(w.node, w.ln)
	if HasTaint(w.node.Spec.Taints, PendingTaint) == want {
		return nil
	}
	w.node.Spec.Taints = nil
	if want {
		w.node.Spec.Taints = []corev1.Taint{PendingTaint}
	}
	return []Write{WriteTaint}
}

// stateNow is the node's state as the planner reads it after a step.
func (w *world) stateNow(a Act) State {
	switch {
	case w.ln == nil:
		return Released
	case a == Stall:
		return Stalled
	}
	return StateOf(w.ln, w.node, w.classes[goldenNode])
}

// covered records each Machine row a golden sequence went through.
var covered = map[int]bool{}

// runGolden plays steps on w and checks each one's act, writes and state,
// and that every move is a row of Machine with those writes.
func runGolden(t *testing.T, w *world, steps []step) {
	t.Helper()
	for i, s := range steps {
		before := w.stateNow(Wait)
		if s.event != nil {
			s.event(w)
		}
		var got []Write
		act := Wait
		switch s.run {
		case profilePass:
			act = w.planProfile()
			got = w.carryOut(act)
		case releasePass:
			got = w.release()
		case gatePass:
			got = w.gate()
		}
		after := w.stateNow(act)
		if act != s.act || !slices.Equal(got, s.writes) || after != s.to {
			t.Fatalf("step %d (%s): act %v writes %v state %s; want act %v writes %v state %s",
				i, s.on, act, got, after, s.act, s.writes, s.to)
		}
		if len(got) == 0 || s.run == gatePass { // no move of its own: the taint follows the state and readiness
			continue
		}
		row := slices.IndexFunc(Machine, func(r Transition) bool {
			return r.From == before && r.On == s.on && r.To == after && r.Act == act
		})
		if row < 0 {
			t.Fatalf("step %d: %s --%s--> %s (act %v) is no row of Machine", i, before, s.on, after, act)
		}
		for _, wr := range got {
			if !slices.Contains(Machine[row].Writes, wr) {
				t.Fatalf("step %d: %s --%s--> %s wrote %s, which its row does not list (%v)", i, before, s.on, after, wr, Machine[row].Writes)
			}
		}
		covered[row] = true
	}
}

// The way through: staged, cordoned, drained, rebooted, verified, uncordoned.
func TestGoldenRebootThrough(t *testing.T) {
	w := newWorld("gw")
	runGolden(t, w, []step{
		{on: EvApplied, run: profilePass, to: Verifying},
		{on: EvStaged, event: staged, run: profilePass, act: Start, writes: []Write{WriteRecord, WriteCordon}, to: Draining},
		{on: EvPodsLeft, run: profilePass, act: Drain, writes: []Write{WriteEvict}, to: Draining},
		{on: EvDrained, event: drained, run: profilePass, act: Request, writes: []Write{WriteRecord}, to: Rebooting},
		{on: EvNewBoot, event: rebooted, run: profilePass, act: Verify, writes: []Write{WriteRecord, WriteVerifyAfter}, to: Rejoining},
		{on: EvVerified, event: verdict(ClassVerifying), run: profilePass, act: Wait, to: Rejoining}, // the window is open
		{on: EvVerified, event: verdict(ClassPassed), run: profilePass, act: Finish, writes: []Write{WriteUncordon, WriteRecordClear}, to: Tuned},
	})
	if w.node.Spec.Unschedulable {
		t.Error("the node stays cordoned after its verified reboot")
	}
}

func TestGoldenRebootFailures(t *testing.T) {
	toDraining := []step{
		{on: EvStaged, event: staged, run: profilePass, act: Start, writes: []Write{WriteRecord, WriteCordon}, to: Draining},
	}
	toRebooting := append(slices.Clone(toDraining),
		step{on: EvDrained, event: drained, run: profilePass, act: Request, writes: []Write{WriteRecord}, to: Rebooting})
	cases := map[string][]step{
		"drain timeout": append(slices.Clone(toDraining),
			step{on: EvDrainTimeout, event: later(DefaultDrainTimeout), run: profilePass, act: Abandon,
				writes: []Write{WriteStatusPause, WriteUncordon, WriteRecordClear}, to: Applying}),
		"reboot failed": append(slices.Clone(toRebooting),
			step{on: EvRebootFailed, event: func(w *world) { w.report(v1alpha1.BootFailed, metav1.ConditionTrue) }, run: profilePass,
				act: Abandon, writes: []Write{WriteStatusPause, WriteUncordon, WriteRecordClear}, to: Applying}),
		"not back in time": append(slices.Clone(toRebooting),
			step{on: EvBootTimeout, event: later(DefaultBootTimeout), run: profilePass, act: Stall, writes: []Write{WriteStatusPause}, to: Stalled}),
		"back Ready but never Applied": append(slices.Clone(toRebooting),
			step{on: EvNewBoot, event: func(w *world) {
				rebooted(w)
				w.ln.Status.Conditions[0].Status = metav1.ConditionFalse
			}, run: profilePass, act: Verify, writes: []Write{WriteRecord, WriteVerifyAfter}, to: Rejoining},
			step{on: EvBootTimeout, event: func(w *world) {
				w.ln.Status.Conditions[0].Status = metav1.ConditionFalse
				w.now = w.now.Add(DefaultBootTimeout)
			}, run: profilePass, act: Abandon, writes: []Write{WriteStatusPause, WriteUncordon, WriteRecordClear}, to: Applying}),
		"deselected while verifying": append(slices.Clone(toRebooting),
			step{on: EvNewBoot, event: rebooted, run: profilePass, act: Verify, writes: []Write{WriteRecord, WriteVerifyAfter}, to: Rejoining},
			step{on: EvDeselected, event: deselected, run: profilePass, act: Finish, writes: []Write{WriteUncordon, WriteRecordClear}, to: Applying}),
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) { runGolden(t, newWorld("gw"), steps) })
	}
}

// A rolled-back node whose kernel still holds the target's arguments is
// rebooted back once a person (or Automatic) says go: the go-ahead is the
// controllers' (rebootBackAllowed); the start is the planner's.
func TestGoldenRebootBack(t *testing.T) {
	w := newWorld("gw")
	runGolden(t, w, []step{{on: EvFailed, event: func(w *world) {
		w.rolledBack = true
		w.specWrite(func(s *v1alpha1.LatencyNodeSpec) { s.Revision = "gw-00000009" })
		w.report(v1alpha1.BootUnstaged, metav1.ConditionTrue)
		w.classes = map[string]Class{goldenNode: ClassFailed}
	}, to: RolledBack},
		{on: EvRebootBackGoAt, run: profilePass, act: Start, writes: []Write{WriteRecord, WriteCordon}, to: Draining},
	})
	if w.ln.Spec.Reboot.Revision != BackRevision(w.target) {
		t.Errorf("the reboot back records %q, want %q", w.ln.Spec.Reboot.Revision, BackRevision(w.target))
	}
}

// A node that leaves without a reboot record is reverted, then released,
// whatever its place in the rollout.
func TestGoldenRelease(t *testing.T) {
	for name, from := range map[string]func(*world){
		"verifying": func(*world) {},
		"tuned":     verdict(ClassPassed),
		"applying":  func(w *world) { w.ln.Status.Conditions[0].Status = metav1.ConditionFalse },
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld("gw")
			from(w)
			runGolden(t, w, []step{
				{on: EvDeselected, event: deselected, run: releasePass, writes: []Write{WriteRevert}, to: Reverting},
				{on: EvDeselected, run: releasePass, to: Reverting}, // waits for the agent
				{on: EvReverted, event: agentReports, run: releasePass, writes: []Write{WriteLabelsOff, WriteDelete}, to: Released},
			})
		})
	}
}

// A node unreachable past the manager's timeout is released without its
// agent's Reverted.
func TestGoldenReleaseUnreachable(t *testing.T) {
	runGolden(t, newWorld("gw"), []step{
		{on: EvDeselected, event: deselected, run: releasePass, writes: []Write{WriteRevert}, to: Reverting},
		{on: EvReverted, event: func(w *world) {
			w.node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
				LastTransitionTime: metav1.NewTime(w.now)}}
			w.now = w.now.Add(4 * time.Minute)
		}, run: releasePass, to: Reverting},
		{on: EvReverted, event: later(time.Minute), run: releasePass, writes: []Write{WriteLabelsOff, WriteDelete}, to: Released},
	})
}

// Race (3674fff): the taint against the kubelet's Ready. The gate put
// the taint back only once the manager saw the new boot id, so a node
// that rebooted on its own was Ready, schedulable and untainted before the
// manager's patch: the scheduler could bind a tier pod to an untuned node.
// The taint goes on while the node is not Ready, so it comes back tainted.
func TestRaceUnplannedRebootUntaintedBeforeReady(t *testing.T) {
	w := newWorld("gw")
	notReady := func(w *world) {
		w.node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse,
			LastTransitionTime: metav1.NewTime(w.now)}}
	}
	backReady := func(w *world) { // the kubelet first: the agent has not reported the new boot
		w.node.Status.NodeInfo.BootID = "boot-2"
		w.node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	}
	runGolden(t, w, []step{
		{on: EvApplied, run: gatePass, to: Verifying}, // tuned in boot-1: no taint
		{on: EvNewBoot, event: notReady, run: gatePass, writes: []Write{WriteTaint}, to: Verifying},
		{on: EvNewBoot, event: backReady, run: gatePass, to: Applying}, // still tainted: not Applied in boot-2
		{on: EvApplied, event: agentReports, run: gatePass, writes: []Write{WriteTaint}, to: Verifying},
	})
	if HasTaint(w.node.Spec.Taints, PendingTaint) {
		t.Error("the taint stays on a node tuned in its boot")
	}
}

// Race (c064d98): a Baseline node never reverted on deletion. A profile
// deleted while its rollout still measured baselines (or had rolled its
// canary back onto Baseline) released only nodes on Apply: the node on
// Baseline was neither reverted nor removed, and the profile waited on its
// finalizer forever.
func TestRaceBaselineNodeNeverRevertedOnDeletion(t *testing.T) {
	w := newWorld("gw")
	onBaseline(w)
	runGolden(t, w, []step{
		{on: EvDeselected, event: deselected, run: releasePass, writes: []Write{WriteRevert}, to: Reverting},
		{on: EvReverted, event: agentReports, run: releasePass, writes: []Write{WriteLabelsOff, WriteDelete}, to: Released},
	})
}

// Race (0dfbb3a): a node released during a reboot left cordoned. The
// node controller's release wins over the profile's pass (or the profile
// is gone and no pass comes): the record goes with the LatencyNode, the
// only sign the managed reboots cordoned the node, so the release lifts
// the manager's cordon first.
func TestRaceNodeReleasedDuringRebootLeftCordoned(t *testing.T) {
	w := newWorld("gw")
	runGolden(t, w, []step{
		{on: EvStaged, event: staged, run: profilePass, act: Start, writes: []Write{WriteRecord, WriteCordon}, to: Draining},
		{on: EvDeselected, event: deselected, run: releasePass, writes: []Write{WriteRevert}, to: Draining},
		{on: EvReverted, event: agentReports, run: releasePass, writes: []Write{WriteLabelsOff, WriteUncordon, WriteDelete}, to: Released},
	})
	if w.node.Spec.Unschedulable {
		t.Error("released node left cordoned")
	}
}

// Race (36bdfbf): a withdrawn reboot rebooting an uncordoned node. A node
// deselected while Rebooting was uncordoned and its record cleared at
// once, while its agent may already have read the request: it rebooted
// uncordoned, open to pods on its way down. The request is taken back
// (Draining with the request's boot id), the node stays cordoned, and the
// release holds, until the request settles.
func TestRaceWithdrawnRebootRebootsUncordonedNode(t *testing.T) {
	w := newWorld("gw")
	runGolden(t, w, []step{
		{on: EvStaged, event: staged, run: profilePass, act: Start, writes: []Write{WriteRecord, WriteCordon}, to: Draining},
		{on: EvDrained, event: drained, run: profilePass, act: Request, writes: []Write{WriteRecord}, to: Rebooting},
		{on: EvDeselected, event: deselected, run: profilePass, act: Withdraw, writes: []Write{WriteRecord}, to: TakenBack},
		{on: EvDeselected, run: releasePass, writes: []Write{WriteRevert}, to: TakenBack},
		{on: EvReverted, event: agentReports, run: releasePass, to: TakenBack}, // the request may still reboot it
		{on: EvSettled, event: later(WithdrawGrace), run: releasePass, writes: []Write{WriteLabelsOff, WriteUncordon, WriteDelete}, to: Released},
	})
	t.Run("settled in the profile's pass", func(t *testing.T) {
		w := newWorld("gw")
		runGolden(t, w, []step{
			{on: EvStaged, event: staged, run: profilePass, act: Start, writes: []Write{WriteRecord, WriteCordon}, to: Draining},
			{on: EvDrained, event: drained, run: profilePass, act: Request, writes: []Write{WriteRecord}, to: Rebooting},
			{on: EvDeselected, event: deselected, run: profilePass, act: Withdraw, writes: []Write{WriteRecord}, to: TakenBack},
			{on: EvDeselected, run: profilePass, act: Wait, to: TakenBack}, // the agent has not read the withdrawal
			{on: EvSettled, event: func(w *world) { agentReports(w); w.now = w.now.Add(WithdrawGrace) }, run: profilePass,
				act: Finish, writes: []Write{WriteUncordon, WriteRecordClear}, to: Applying},
		})
	})
}

// Race (e57ebcf): a reboot carried on by the profile that took the node
// over. The LatencyNode keeps the record of the profile it left; the new
// one (whose name the old one's prefixes, the hard case) drained the node
// for a revision not its own. The record is one of a node that left: let go.
func TestRaceRebootCarriedOnByProfileThatTookNodeOver(t *testing.T) {
	w := newWorld("tk")
	runGolden(t, w, []step{
		{on: EvStaged, event: staged, run: profilePass, act: Start, writes: []Write{WriteRecord, WriteCordon}, to: Draining},
		{on: EvDeselected, event: takenOver("tk-next"), run: profilePass, act: Finish,
			writes: []Write{WriteUncordon, WriteRecordClear}, to: Applying},
	})
}

// Race (3a78bc9): a node that left the selection rebooted by the profile.
// In the moment between a label change and the node controller's Revert,
// a staged node could still be started; after a rollback, a deselected
// node whose kernel still held the arguments was due a reboot back.
func TestRaceDeselectedNodeRebootedBeforeItsRevert(t *testing.T) {
	runGolden(t, newWorld("gw"), []step{
		{on: EvStaged, event: func(w *world) { staged(w); deselected(w) }, run: profilePass, act: Wait, to: Verifying},
	})
	w := newWorld("gw")
	runGolden(t, w, []step{{on: EvDeselected, event: func(w *world) {
		w.rolledBack, w.deselected = true, true
		w.specWrite(func(s *v1alpha1.LatencyNodeSpec) { s.Action = v1alpha1.ActionRevert })
		w.report(v1alpha1.BootUnstaged, metav1.ConditionTrue)
	}, run: profilePass, act: Wait, to: Reverting}})
}

// Race (5f22f1a): a Draining node found uncordoned (a manager stopped
// between the record and the cordon, or a person's uncordon) was drained
// and asked to reboot uncordoned. It is cordoned again first.
func TestRaceDrainingNodeFoundUncordonedIsCordonedFirst(t *testing.T) {
	runGolden(t, newWorld("gw"), []step{
		{on: EvStaged, event: staged, run: profilePass, act: Start, writes: []Write{WriteRecord, WriteCordon}, to: Draining},
		{on: EvUncordoned, event: func(w *world) { uncordonedByPerson(w); drained(w) }, run: profilePass, act: Drain,
			writes: []Write{WriteCordon}, to: Draining},
		{on: EvDrained, run: profilePass, act: Request, writes: []Write{WriteRecord}, to: Rebooting},
	})
}

// Race (0e1e842): a released node holding a --max-rebooting slot. A node
// this manager started whose LatencyNode the node controller deleted
// (released with its record) stayed in the started set when the cache
// never showed its record, holding the only slot for good.
func TestRaceReleasedNodeHoldsARebootSlot(t *testing.T) {
	started := map[string]bool{"gone": true, "unseen": true, "seen": true}
	lns := []v1alpha1.LatencyNode{{ObjectMeta: metav1.ObjectMeta{Name: "unseen"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "seen"}, Spec: v1alpha1.LatencyNodeSpec{Reboot: &v1alpha1.NodeRebootSpec{}}}}
	used, keep := SlotsInUse(started, lns)
	if used != 2 || !maps1(keep, "unseen") {
		t.Errorf("slots in use %d, kept %v; want 2 (seen by its record, unseen by memory), kept [unseen]", used, keep)
	}
}

func maps1(m map[string]bool, only string) bool { return len(m) == 1 && m[only] }

// Race (e159a33): a stale reboot message. A pass carried
// status.reboots.message over for the revision whatever it said, so the
// in-flight message of the first reboot stayed after every node was
// rebooted and the rollout Complete. Only a pause's reason is carried.
func TestRaceStaleRebootMessage(t *testing.T) {
	cases := []struct {
		name   string
		last   *v1alpha1.RebootRolloutStatus
		paused bool
		msg    string
	}{
		{"in flight", &v1alpha1.RebootRolloutStatus{Revision: "r1", Message: "waiting for the reboot of rb-a"}, false, ""},
		{"paused", &v1alpha1.RebootRolloutStatus{Revision: "r1", Paused: true, Message: "drain timed out"}, true, "drain timed out"},
		{"paused for an older revision", &v1alpha1.RebootRolloutStatus{Revision: "r0", Paused: true, Message: "drain timed out"}, false, ""},
		{"reboot back waits", &v1alpha1.RebootRolloutStatus{Revision: "r1", Paused: true, Message: BackWaitPrefix + "x"}, false, ""},
		{"none", nil, false, ""},
	}
	for _, c := range cases {
		if p, m := CarriedPause(c.last, "r1"); p != c.paused || m != c.msg {
			t.Errorf("%s: carried (%v, %q), want (%v, %q)", c.name, p, m, c.paused, c.msg)
		}
	}
	// The pass: each reboot's status as the profile records it, from the
	// status the pass before recorded.
	w := newWorld("rb")
	var last *v1alpha1.RebootRolloutStatus
	for i, s := range []struct {
		event func(*world)
		msg   string
	}{
		{staged, "waiting for the reboot of n1"},
		{drained, "waiting for the reboot of n1"},
		{rebooted, "waiting for the reboot of n1"},
		{verdict(ClassPassed), ""}, // Finish: every reboot done
		{nil, ""},
	} {
		if s.event != nil {
			s.event(w)
		}
		act := w.planProfile()
		paused, msg := CarriedPause(last, w.target)
		last = RebootStatus([]*v1alpha1.LatencyNode{w.ln}, RebootPass{Target: w.target, Paused: paused, Message: msg,
			Acts: map[string]Act{goldenNode: act}})
		w.carryOut(act)
		if last == nil || last.Message != s.msg {
			t.Fatalf("pass %d (%v): status.reboots %+v, want message %q", i, act, last, s.msg)
		}
	}
	if last.Rebooted != 1 {
		t.Errorf("status.reboots %+v, want 1 rebooted", last)
	}
}

// TestGoldenCoversEveryPlannerRow: every row of Machine the planner
// decides is a step of some golden sequence. Rows still decided in
// controllers/ (selection, the rollout's moves) are listed by the test's
// log until the planner takes them.
func TestGoldenCoversEveryPlannerRow(t *testing.T) {
	for name, f := range map[string]func(*testing.T){
		"through": TestGoldenRebootThrough, "failures": TestGoldenRebootFailures, "back": TestGoldenRebootBack,
		"release": TestGoldenRelease, "unreachable": TestGoldenReleaseUnreachable, "taint": TestRaceUnplannedRebootUntaintedBeforeReady, "baseline": TestRaceBaselineNodeNeverRevertedOnDeletion,
		"released cordoned": TestRaceNodeReleasedDuringRebootLeftCordoned, "withdrawn": TestRaceWithdrawnRebootRebootsUncordonedNode,
		"taken over": TestRaceRebootCarriedOnByProfileThatTookNodeOver, "deselected": TestRaceDeselectedNodeRebootedBeforeItsRevert,
		"uncordoned": TestRaceDrainingNodeFoundUncordonedIsCordonedFirst,
	} {
		t.Run(name, f)
	}
	for i, r := range Machine {
		planned := strings.HasPrefix(r.Decider, "planner.")
		switch {
		case planned && !covered[i]:
			t.Errorf("row %d %s --%s--> %s (%s) is in no golden sequence", i, r.From, r.On, r.To, r.Decider)
		case !planned:
			t.Logf("row %d %s --%s--> %s is decided by %s, not the planner yet", i, r.From, r.On, r.To, r.Decider)
		}
	}
}
