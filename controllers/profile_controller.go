package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
	"latencytier.io/latencytier/controllers/planner"
	"latencytier.io/latencytier/controllers/profilestatus"
	"latencytier.io/latencytier/internal/featuregate"
)

// profileReconciler owns a LatencyProfile's finalizer and status: it
// aggregates the profile's LatencyNodes into status and, on deletion, holds
// the profile until every node it tuned has been reverted. It also runs the
// profile's rollout (rollout_controller.go): it keeps the tuning history as
// ControllerRevisions and, for a profile with spec.rollout, moves its nodes
// from revision to revision (its selection, selection.go, only adds and removes
// them). It never writes the profile's spec, labels or annotations.
type profileReconciler struct {
	client.Client
	Recorder         events.EventRecorder
	UnreachableAfter time.Duration
	// Now is the clock of reachability, rollout windows and condition
	// times (time.Now when nil).
	Now func() time.Time
	// Namespace is the manager's namespace, where revisions are kept.
	Namespace string
	// Cache reads nodes and LatencyNodes through the cache's indexes
	// (the client when nil).
	Cache client.Reader
	// Gate spaces out the status writes of each profile.
	Gate *statusGate
	// Reboots runs the managed reboots (nil: none).
	Reboots *rebooter
	// Gates are the manager's feature gates (schedclass_gate.go).
	Gates featuregate.Gates
	// Select decides and writes the selection of the profile's nodes
	// (selection.go), first in each pass (nil: none, in tests).
	Select *nodeSelection
}

// exec is the executor of the profile's writes: its finalizer and status,
// the rollout's spec writes.
func (r *profileReconciler) exec() *executor.Executor { return executor.New(r.Client, nil) }

// reader is where the reconciler reads nodes and LatencyNodes.
func (r *profileReconciler) reader() client.Reader {
	if r.Cache == nil {
		return r.Client
	}
	return r.Cache
}

// Reconcile runs one profile's pass: its finalizer, its nodes' selection,
// then its status, rollout and reboots. A profile that is gone still has
// its nodes released (those labelled for it or whose LatencyNode names
// it).
func (r *profileReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &v1alpha1.LatencyProfile{}
	if err := r.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			forgetProfileMetrics(req.Name)
			r.Gate.forget(req.Name)
			wait, err := r.selectNodes(ctx, req.Name, nil)
			return ctrl.Result{RequeueAfter: wait}, err
		}
		return ctrl.Result{}, fmt.Errorf("getting profile: %w", err)
	}
	asked := p
	p = gatedProfile(p, r.Gates)
	if p.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(p, v1alpha1.RevertFinalizer) {
		return ctrl.Result{}, r.patchFinalizer(ctx, p, controllerutil.AddFinalizer)
	}
	wait, selErr := r.selectNodes(ctx, p.Name, p)
	res, err := r.statusPass(ctx, p, asked)
	res.RequeueAfter = soonest(res.RequeueAfter, wait)
	return res, errors.Join(selErr, err)
}

// selectNodes is the pass's selection of the nodes it decides
// (nodeSelection.pass); none without a selection.
func (r *profileReconciler) selectNodes(ctx context.Context, name string, p *v1alpha1.LatencyProfile) (time.Duration, error) {
	if r.Select == nil {
		return 0, nil
	}
	return r.Select.pass(ctx, name, p)
}

// statusPass is the rest of the pass: the profile's status with the
// records its acts rest on, in one patch, then the rollout's moves and
// the reboots' acts; a deleted profile holding no node loses its
// finalizer.
func (r *profileReconciler) statusPass(ctx context.Context, p, asked *v1alpha1.LatencyProfile) (ctrl.Result, error) {
	deleting := !p.DeletionTimestamp.IsZero()
	in, err := r.statusInput(ctx, p)
	if err != nil {
		return ctrl.Result{}, err
	}
	if deleting && !holdsNodes(in) {
		return ctrl.Result{}, r.patchFinalizer(ctx, p, controllerutil.RemoveFinalizer)
	}
	orig := p.DeepCopy() // the status on record; the pass's steps update p's
	gate := rebootGateIn(p, in)
	rollout, err := r.planRollout(ctx, p, in)
	if err != nil {
		return ctrl.Result{}, err
	}
	in.Rollout = rollout.Status
	reboots, err := r.Reboots.plan(ctx, p, in, rollout.Classes)
	if err != nil {
		return ctrl.Result{}, err
	}
	st, counts := profilestatus.Compute(p.Status, in)
	st.Reboots = reboots.Status
	if setRebootsCondition(&st.Conditions, gate, p.Generation, metav1.NewTime(in.Now)) {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, eventRebootsGated, eventActionReboot, "%s", gate.Message)
	}
	if setSchedulerClassCondition(&st.Conditions, asked, r.Gates, metav1.NewTime(in.Now)) {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, eventSchedulerClassRefused, eventActionApply, "%s", tierRefusedMessage)
	}
	recordProfileMetrics(p.Name, counts, st)
	recordProfileReports(p, nodeReports(in))
	// The pass's one status patch, before its acts: the records the acts
	// rest on are written now, whatever the gate says, and the acts wait
	// until they are stored.
	records := rolloutRecordChanged(orig.Status.Rollout, rollout) || !equality.Semantic.DeepEqual(orig.Status.Reboots, st.Reboots)
	gated, patchErr := r.patchStatus(ctx, orig, st, records)
	if patchErr != nil && records {
		return ctrl.Result{}, patchErr
	}
	wait, err := r.act(ctx, p, rollout, reboots, gate, in.Now)
	if err != nil || patchErr != nil {
		return ctrl.Result{}, errors.Join(err, patchErr)
	}
	recheck := soonest(unreachableRecheck(in), profilestatus.StaleRecheck(in))
	return ctrl.Result{RequeueAfter: soonest(soonest(recheck, wait), gated)}, nil
}

// act carries out a pass's decided acts, once what they rest on is on
// record: the rollout's moves, then the reboots' acts. It returns when
// to look again.
func (r *profileReconciler) act(ctx context.Context, p *v1alpha1.LatencyProfile, rollout rolloutStep, reboots rebootStep,
	gate rebootGate, now time.Time) (time.Duration, error) {
	if err := r.actRollout(ctx, p, rollout, gate, now); err != nil {
		return 0, err
	}
	wait, err := r.Reboots.act(ctx, p, reboots, now)
	if err != nil {
		return 0, err
	}
	return soonest(rollout.Wait, wait), nil
}

// soonest is the shorter of two requeue delays, 0 meaning none.
func soonest(a, b time.Duration) time.Duration {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// statusInput gathers what the profile's status is computed from: every
// profile (few, and any may tie with p on a node), the nodes p selects or
// whose LatencyNode still names it, and their LatencyNodes — not the fleet.
func (r *profileReconciler) statusInput(ctx context.Context, p *v1alpha1.LatencyProfile) (profilestatus.Input, error) {
	var profiles v1alpha1.LatencyProfileList
	if err := r.List(ctx, &profiles); err != nil {
		return profilestatus.Input{}, fmt.Errorf("listing profiles: %w", err)
	}
	nodes, err := selectedNodes(ctx, r.reader(), p)
	if err != nil {
		return profilestatus.Input{}, err
	}
	byName, err := latencyNodesOf(ctx, r.reader(), p.Name)
	if err != nil {
		return profilestatus.Input{}, err
	}
	if nodes, err = r.addHeldNodes(ctx, nodes, byName); err != nil {
		return profilestatus.Input{}, err
	}
	if err := r.addLatencyNodes(ctx, nodes, byName); err != nil {
		return profilestatus.Input{}, err
	}
	cands, bad := planner.CompileProfiles(profiles.Items)
	if err := bad[p.Name]; err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Ignored profile with an invalid nodeSelector")
	}
	return profilestatus.Input{
		Profile: p, Nodes: nodes, Candidates: cands, LatencyNodes: byName,
		Now: readClock(r.Now), UnreachableAfter: r.UnreachableAfter, Revision: currentRevision(p),
		Resolved: make(map[string]planner.Resolution, len(nodes)),
	}, nil
}

// addHeldNodes adds to nodes the ones the profile no longer selects whose
// LatencyNode still names it (being reverted), when the node still exists.
func (r *profileReconciler) addHeldNodes(ctx context.Context, nodes []corev1.Node, lns map[string]*v1alpha1.LatencyNode) ([]corev1.Node, error) {
	have := make(map[string]bool, len(nodes))
	for i := range nodes {
		have[nodes[i].Name] = true
	}
	for name := range lns {
		if have[name] {
			continue
		}
		n := corev1.Node{}
		err := r.reader().Get(ctx, types.NamespacedName{Name: name}, &n, client.UnsafeDisableDeepCopy)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("getting node: %w", err)
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// addLatencyNodes adds to lns the LatencyNodes of selected nodes that name
// another profile (a node being taken over): their measurements still
// describe the node.
func (r *profileReconciler) addLatencyNodes(ctx context.Context, nodes []corev1.Node, lns map[string]*v1alpha1.LatencyNode) error {
	for i := range nodes {
		name := nodes[i].Name
		if lns[name] != nil {
			continue
		}
		ln := &v1alpha1.LatencyNode{}
		err := r.reader().Get(ctx, types.NamespacedName{Name: name}, ln)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("getting LatencyNode: %w", err)
		}
		lns[name] = ln
	}
	return nil
}

// holdsNodes reports whether a LatencyNode still carries the profile.
func holdsNodes(in profilestatus.Input) bool {
	for _, ln := range in.LatencyNodes {
		if ln.Spec.Profile == in.Profile.Name {
			return true
		}
	}
	return false
}

// unreachableRecheck is when a NotReady node of the profile crosses the
// unreachable timeout, so status turns Unreachable without another event.
func unreachableRecheck(in profilestatus.Input) time.Duration {
	var soonest time.Duration
	for i := range in.Nodes {
		ln := in.LatencyNodes[in.Nodes[i].Name]
		if ln == nil || ln.Spec.Profile != in.Profile.Name {
			continue
		}
		if _, wait := unreachable(&in.Nodes[i], in.Now, in.UnreachableAfter); wait > 0 && (soonest == 0 || wait < soonest) {
			soonest = wait
		}
	}
	return soonest
}

// patchFinalizer adds or removes the revert finalizer with a merge patch that
// carries only metadata.finalizers (and the resourceVersion it was read at),
// and writes nothing when the finalizer already is as wanted.
func (r *profileReconciler) patchFinalizer(ctx context.Context, p *v1alpha1.LatencyProfile, change func(client.Object, string) bool) error {
	patched := p.DeepCopy()
	if !change(patched, v1alpha1.RevertFinalizer) {
		// Already as wanted (e.g. a deleted profile another finalizer
		// still holds): patching anyway would write on every resync.
		return nil
	}
	if err := r.exec().PatchFinalizer(ctx, p, patched); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Patched finalizer", "present", controllerutil.ContainsFinalizer(patched, v1alpha1.RevertFinalizer))
	return nil
}

// patchStatus writes st through the status subresource when it changed, and
// records an event for each decision the change carries. A change that is
// not urgent (and carries no record the pass's acts rest on) waits for
// the profile's status gate: patchStatus then writes nothing and returns
// how long until the gate opens.
func (r *profileReconciler) patchStatus(ctx context.Context, p *v1alpha1.LatencyProfile, st v1alpha1.LatencyProfileStatus, records bool) (time.Duration, error) {
	if equality.Semantic.DeepEqual(p.Status, st) {
		// Current as it is: the reports that come within the interval wait
		// for the gate too. Marked only on writes, a fleet whose reports
		// changed nothing reconciled its profile on every report (33 a
		// second at 1000 nodes, the manager at 0.38 core writing nothing).
		r.Gate.wrote(p.Name)
		return 0, nil
	}
	if wait := r.Gate.wait(p.Name); wait > 0 && !records && !statusUrgent(p, st) {
		return wait, nil
	}
	patched, err := r.exec().WriteProfileStatus(ctx, p, st)
	if err != nil {
		return 0, err
	}
	r.Gate.wrote(p.Name)
	r.Gate.wroteVersion(p.Name, patched.ResourceVersion)
	for _, e := range statusEvents(p.Status, st) {
		r.Recorder.Eventf(patched, nil, e.typ, e.reason, eventActionAggregate, "%s", e.note)
	}
	return 0, nil
}

// statusEvent is an event a status change warrants.
type statusEvent struct{ typ, reason, note string }

// statusEvents are the events for the decisions between old and new status:
// conflicts, degradation, all nodes applied, and what a deletion waits for.
func statusEvents(old, cur v1alpha1.LatencyProfileStatus) []statusEvent {
	var out []statusEvent
	if cur.Conflicted > old.Conflicted {
		out = append(out, statusEvent{corev1.EventTypeWarning, eventNodeConflict, conditionMessage(cur, v1alpha1.ProfileDegraded, v1alpha1.ReasonNodeConflict,
			fmt.Sprintf("%d node(s) selected with equal priority by another profile get no profile", cur.Conflicted))})
	}
	if cur.Degraded > old.Degraded {
		msg := fmt.Sprintf("%d node(s) failed, drifted or unreachable", cur.Degraded)
		if c := meta.FindStatusCondition(cur.Conditions, v1alpha1.ProfileDegraded); c != nil && c.Status == metav1.ConditionTrue && cur.Stale > 0 {
			msg = c.Message // says how many are stale
		}
		out = append(out, statusEvent{corev1.EventTypeWarning, eventDegraded, msg})
	}
	if becameTrue(old, cur, v1alpha1.ProfileReady) {
		out = append(out, statusEvent{corev1.EventTypeNormal, eventApplied, fmt.Sprintf("All %d node(s) applied", cur.Applied)})
	}
	if cur.ContentionHeldBack > old.ContentionHeldBack {
		allowed := cur.Contended - cur.ContentionHeldBack
		out = append(out, statusEvent{corev1.EventTypeWarning, eventContentionCapped, fmt.Sprintf(
			"%d contended node(s) held back from the %s taint: measurement.contention.maxTaintedPercent allows %d of the profile's %d node(s) tainted at once",
			cur.ContentionHeldBack, v1alpha1.ContentionTaint, allowed, cur.Matched-cur.Conflicted)})
	}
	if len(cur.WaitingFor) > 0 && !equality.Semantic.DeepEqual(old.WaitingFor, cur.WaitingFor) {
		out = append(out, statusEvent{corev1.EventTypeNormal, eventWaiting, "Waiting for nodes to revert: " + strings.Join(cur.WaitingFor, ", ")})
	}
	return out
}

func becameTrue(old, cur v1alpha1.LatencyProfileStatus, typ string) bool {
	return meta.IsStatusConditionTrue(cur.Conditions, typ) && !meta.IsStatusConditionTrue(old.Conditions, typ)
}

// conditionMessage is the message of condition typ when it has reason, else def.
func conditionMessage(st v1alpha1.LatencyProfileStatus, typ, reason, def string) string {
	c := meta.FindStatusCondition(st.Conditions, typ)
	if c != nil && c.Reason == reason && c.Message != "" {
		return c.Message
	}
	return def
}
