package controllers

import (
	"context"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
	"latencytier.io/latencytier/controllers/planner"
	"latencytier.io/latencytier/controllers/profilestatus"
	"latencytier.io/latencytier/controllers/rollout"
)

// The rollout writes ControllerRevisions in the manager's namespace and
// the nodes' spec.revision (through LatencyNode spec); its verdicts live in
// the profile's status.rollout. It never writes a LatencyNode's status: the
// node's agent is its one writer.
//
// +kubebuilder:rbac:groups=apps,namespace=latencytier-system,resources=controllerrevisions,verbs=get;list;watch;create;patch;delete

// eventRolloutMoved is the reason of the event for a batch of moves (the
// phase events are "Rollout<Phase>"), recorded with action eventActionRoll.
const (
	eventRolloutMoved = "RolloutMoved"
	eventActionRoll   = "Rollout"
)

// rolloutStep is one pass's rollout of a profile, decided: the
// status.rollout that records it, then the moves.
type rolloutStep struct {
	Status  *v1alpha1.RolloutStatus
	Classes map[string]nodeClass
	Wait    time.Duration // when a clock next changes the decision
	decided bool          // false for a profile being deleted: nothing moves
	plan    rollout.Plan
	lns     map[string]*v1alpha1.LatencyNode
	owned   map[string]*appsv1.ControllerRevision
}

// planRollout stores p's tuning as a revision and decides the rollout's
// step. When nodes move, its status.rollout goes into the pass's one status
// patch, written before actRollout moves them: the evidence a move rests
// on (a rollback's Regressed verdict, which keeps the node from being moved
// again) is on record before the move, so a restart between the two does
// not judge the node again and move it forward. p's status holds it from
// here on, as the rest of the pass reads it.
func (r *profileReconciler) planRollout(ctx context.Context, p *v1alpha1.LatencyProfile, in profilestatus.Input) (rolloutStep, error) {
	if !p.DeletionTimestamp.IsZero() {
		return rolloutStep{Status: p.Status.Rollout.DeepCopy()}, nil
	}
	owned, err := r.revisions().ensure(ctx, p)
	if err != nil {
		return rolloutStep{}, err
	}
	nodes, lns := rollout.NodesOf(in)
	plan := rollout.Decide(rollout.Input{
		Policy: p.Spec.Rollout, Gate: rollout.GateOf(p), Generation: p.Generation, Unmeasured: unmeasured(p),
		Target: currentRevision(p), Last: p.Status.Rollout, Nodes: nodes, Now: in.Now,
	})
	if len(plan.Moves) > 0 {
		p.Status.Rollout = plan.Status.DeepCopy()
	}
	return rolloutStep{Status: &plan.Status, Classes: plan.Classes, Wait: plan.RequeueAfter, decided: true, plan: plan, lns: lns, owned: owned}, nil
}

// actRollout moves the nodes of a planned step, once its status.rollout
// is on record, and prunes the revisions no one holds.
func (r *profileReconciler) actRollout(ctx context.Context, p *v1alpha1.LatencyProfile, s rolloutStep, g rebootGate, now time.Time) error {
	if !s.decided {
		return nil
	}
	if err := r.moveNodes(ctx, p, s.plan.Moves, s.lns, s.owned, now, g); err != nil {
		return err
	}
	if err := r.unstageGated(ctx, p, s.plan.Moves, s.lns, g, now); err != nil {
		return err
	}
	if err := r.revisions().prune(ctx, s.owned, keptRevisions(s.plan.Status, s.lns)); err != nil {
		return err
	}
	for _, e := range s.plan.Events {
		r.Recorder.Eventf(p, nil, e.Type, e.Reason, eventActionRoll, "%s", e.Note)
	}
	return nil
}

// rolloutRecordChanged: the step moves nodes and its status.rollout is not
// the one on record (before), so it must be written before the moves.
func rolloutRecordChanged(before *v1alpha1.RolloutStatus, s rolloutStep) bool {
	return len(s.plan.Moves) > 0 && !equality.Semantic.DeepEqual(before, s.Status)
}

func (r *profileReconciler) revisions() revisions {
	return revisions{Reader: r.Client, Exec: r.exec(), Namespace: r.Namespace}
}

// unmeasured: p's tuning measures nothing.
func unmeasured(p *v1alpha1.LatencyProfile) bool {
	m := p.Spec.Measurement
	return m != nil && m.Source == v1alpha1.MeasurementDisabled
}

// moveNodes writes each move into the node's LatencyNode spec, with the
// revision's tuning and the time of the move, as one batch of the
// executor's.
func (r *profileReconciler) moveNodes(ctx context.Context, p *v1alpha1.LatencyProfile, moves []rollout.Move,
	lns map[string]*v1alpha1.LatencyNode, owned map[string]*appsv1.ControllerRevision, now time.Time, g rebootGate) error {
	writes, err := moveSpecs(p, moves, lns, owned, now, g)
	if err != nil {
		return err
	}
	if _, err := r.exec().WriteSpecs(ctx, writes); err != nil {
		return err
	}
	moved := make([]string, len(moves))
	for i, m := range moves {
		moved[i] = m.Node
	}
	if len(moved) > 0 {
		m := moves[0]
		ctrl.LoggerFrom(ctx).Info("Moved nodes", "action", m.Action, "revision", m.Revision, "nodes", moved)
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, eventRolloutMoved, eventActionRoll,
			"%s %s on %s", m.Action, orNone(m.Revision), names(moved))
	}
	return nil
}

// moveSpecs are the spec writes of moves: each node's spec with the
// revision's tuning (gated by g), stamped with the time of the move.
func moveSpecs(p *v1alpha1.LatencyProfile, moves []rollout.Move, lns map[string]*v1alpha1.LatencyNode,
	owned map[string]*appsv1.ControllerRevision, now time.Time, g rebootGate) ([]executor.NodeSpec, error) {
	writes := make([]executor.NodeSpec, 0, len(moves))
	for _, m := range moves {
		spec := v1alpha1.LatencyNodeSpec{Action: m.Action, Profile: p.Name, ProfileGeneration: p.Generation, Revision: m.Revision}
		if ro := p.Spec.Rollout; ro != nil {
			// The agent reports the window that decides the node at once,
			// not at its next heartbeat.
			spec.VerifyAfter = ptr.To(metav1.NewTime(now.Truncate(time.Second).Add(rollout.Window(ro))))
		}
		if m.Action == v1alpha1.ActionApply {
			cr := owned[m.Revision]
			if cr == nil {
				return nil, fmt.Errorf("moving node %s: revision %s is not in the history", m.Node, m.Revision)
			}
			t, err := tuningOf(cr)
			if err != nil {
				return nil, err
			}
			spec.Tuning = gatedTuning(t, g)
		}
		writes = append(writes, executor.NodeSpec{LN: lns[m.Node], Write: executor.SpecWrite{Spec: spec, Stamp: now}})
	}
	return writes, nil
}

// unstageGated writes ReportOnly into the tuning of p's nodes that hold
// policy Reboot while p's reboot gate is closed (the selection shrank to
// the canary's size, or spec.rollout went away), so their agents unstage
// and no node keeps untested arguments in its bootloader. Nodes moved in
// this pass were written gated already. Without spec.rollout the
// selection writes the nodes (directTuning).
func (r *profileReconciler) unstageGated(ctx context.Context, p *v1alpha1.LatencyProfile, moves []rollout.Move,
	lns map[string]*v1alpha1.LatencyNode, g rebootGate, now time.Time) error {
	if g.Open || p.Spec.Rollout == nil {
		return nil
	}
	moved := map[string]bool{}
	for _, m := range moves {
		moved[m.Node] = true
	}
	var unstaged []string
	var writes []executor.NodeSpec
	for _, name := range sortedNames(lns) {
		ln := lns[name]
		if moved[name] || !rebootsAllowed(ln) {
			continue
		}
		spec := *ln.Spec.DeepCopy()
		spec.Tuning = gatedTuning(spec.Tuning, g)
		writes = append(writes, executor.NodeSpec{LN: ln, Write: executor.SpecWrite{Spec: spec}})
		unstaged = append(unstaged, name)
	}
	if _, err := r.exec().WriteSpecs(ctx, writes); err != nil {
		return err
	}
	if len(unstaged) > 0 {
		ctrl.LoggerFrom(ctx).Info("Turned the boot policy ReportOnly on nodes while reboots are not allowed", "nodes", unstaged, "reason", g.Reason)
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, eventRebootsGated, eventActionRoll,
			"Boot parameters no longer staged on %s: %s", names(unstaged), g.Message)
	}
	return nil
}

// names lists up to five names, then how many more.
var names = planner.Names

// sortedNames are the keys of lns in order.
func sortedNames(lns map[string]*v1alpha1.LatencyNode) []string {
	out := make([]string, 0, len(lns))
	for name := range lns {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// keptRevisions are the revisions pruning must leave: the target, the
// rollback target and every one a node holds.
func keptRevisions(st v1alpha1.RolloutStatus, lns map[string]*v1alpha1.LatencyNode) map[string]bool {
	keep := map[string]bool{st.Revision: true, st.PreviousRevision: true}
	for _, ln := range lns {
		keep[ln.Spec.Revision] = true
	}
	return keep
}

func orNone(rev string) string {
	if rev == "" {
		return "(no revision)"
	}
	return rev
}
