package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
	"latencytier.io/latencytier/controllers/planner"
	"latencytier.io/latencytier/internal/featuregate"
)

// Event reasons for decisions a user asks about.
const (
	eventSelected     = "Selected"
	eventReverting    = "Reverting"
	eventReverted     = "Reverted"
	eventNodeGone     = "NodeGone"
	eventNodeConflict = "NodeConflict"
	eventDegraded     = "Degraded"
	eventApplied      = "Applied"
	eventWaiting      = "WaitingForRevert"
	// eventContentionCapped: contended nodes left without the contention
	// taint by measurement.contention.maxTaintedPercent.
	eventContentionCapped = "ContentionTaintCapped"
	// eventAgentHostPID: a node's agent gains or loses hostPID.
	eventAgentHostPID = "AgentHostPID"
)

// Event actions: what the controller did when it recorded the event.
const (
	eventActionLabel     = "Label"
	eventActionApply     = "Apply"
	eventActionRevert    = "Revert"
	eventActionCleanup   = "Cleanup"
	eventActionAggregate = "Aggregate"
	eventActionGrant     = "Grant"
	eventActionWithdraw  = "Withdraw"
)

// nodeSelection is the selection part of a profile's pass: for each node
// the pass decides (planner.Decider: the profile that wins it, else the
// one its LatencyNode or label names), the profile label, the agent
// variant and the LatencyNode, and the revert handshake when the node
// leaves a profile. The planner decides (planner.ResolveNode,
// planner.Release), the executor writes, executor.Workers nodes at once.
// No controller of its own: Node and LatencyNode events map to the
// profiles they concern (profilesOfNode, latencyNodeToProfiles).
type nodeSelection struct {
	client.Client
	Recorder events.EventRecorder
	// UnreachableAfter is how long a NotReady node may hold up a revert.
	UnreachableAfter time.Duration
	// APIReader reads past the cache: a Node the cache does not show yet
	// (its add event behind its LatencyNode's) is looked up live before
	// its LatencyNode is deleted as a gone node's. Nil: the cache decides.
	APIReader client.Reader
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Gates are the manager's feature gates (schedclass_gate.go).
	Gates featuregate.Gates

	// written are the selection's own writes its cache has not shown yet.
	written ownWrites
}

// ownWriteRecheck is when a pass that waited for the cache to show the
// manager's own write to a node looks again, should that write's event
// not come.
const ownWriteRecheck = time.Second

// pass decides the selection of every node profile decides (p: the
// profile, nil when it is gone) and writes it, executor.Workers nodes at
// once. It returns when to look again and the nodes' errors joined.
func (r *nodeSelection) pass(ctx context.Context, profile string, p *v1alpha1.LatencyProfile) (time.Duration, error) {
	var list v1alpha1.LatencyProfileList
	if err := r.List(ctx, &list); err != nil {
		return 0, fmt.Errorf("listing profiles: %w", err)
	}
	names, err := r.nodesOf(ctx, profile, p)
	if err != nil {
		return 0, err
	}
	cands, _ := planner.CompileProfiles(list.Items)
	var todo []string
	for _, name := range names {
		if r.decides(ctx, profile, name, cands, list.Items) {
			todo = append(todo, name)
		}
	}
	waits := make([]time.Duration, len(todo))
	errs := executor.ForEachNode(ctx, len(todo), func(ctx context.Context, i int) error {
		log := ctrl.LoggerFrom(ctx).WithValues("node", todo[i])
		var err error
		waits[i], err = r.decide(ctrl.LoggerInto(ctx, log), todo[i], list.Items)
		return err
	})
	var wait time.Duration
	for _, w := range waits {
		wait = soonest(wait, w)
	}
	return wait, errors.Join(errs...)
}

// nodesOf names the nodes that concern profile: those it selects, those
// labelled for it and those whose LatencyNode names it (p nil: the
// profile is gone, and only the last two).
func (r *nodeSelection) nodesOf(ctx context.Context, profile string, p *v1alpha1.LatencyProfile) ([]string, error) {
	var set map[string]bool
	var err error
	if p != nil {
		set, err = nodeNamesOf(ctx, r.Client, p)
	} else {
		set, err = nodeNamesNaming(ctx, r.Client, profile)
	}
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(set)), nil
}

// decides reports whether profile's pass decides node name and may have
// something to write: it is the node's planner.Decider, and the node is
// not labelled and specified as profile wants it already. It reads the
// cache's objects without copying them; decide reads them afresh.
func (r *nodeSelection) decides(ctx context.Context, profile, name string, cands []planner.Candidate, profiles []v1alpha1.LatencyProfile) bool {
	key := types.NamespacedName{Name: name}
	node, ln := &corev1.Node{}, &v1alpha1.LatencyNode{}
	nodeErr, lnErr := r.Get(ctx, key, node, client.UnsafeDisableDeepCopy), r.Get(ctx, key, ln, client.UnsafeDisableDeepCopy)
	if (nodeErr != nil && !apierrors.IsNotFound(nodeErr)) || (lnErr != nil && !apierrors.IsNotFound(lnErr)) {
		return true // decide reads again, and returns the error
	}
	if lnErr != nil {
		ln = nil
	}
	if nodeErr != nil { // gone: its LatencyNode's profile deletes it
		return ln != nil && ln.Spec.Profile == profile
	}
	res := planner.ResolveNode(node.Labels, cands)
	if planner.Decider(res, ln != nil, specProfile(ln), node.Labels[v1alpha1.ProfileLabel]) != profile {
		return false
	}
	if res.Winner != profile || r.written.behind(name, ln, r.now()) || r.written.labelsBehind(node, r.now()) {
		return true
	}
	return !selectedAsWanted(node, ln, gatedProfile(findProfile(profiles, profile), r.Gates))
}

// specProfile is the profile ln's spec names, "" without ln.
func specProfile(ln *v1alpha1.LatencyNode) string {
	if ln == nil {
		return ""
	}
	return ln.Spec.Profile
}

// selectedAsWanted: node, selected for p, has p's labels and agent
// variant, and its LatencyNode (ln) exists and applies p, or is one of
// p's rollout's to move: apply would write nothing.
func selectedAsWanted(node *corev1.Node, ln *v1alpha1.LatencyNode, p *v1alpha1.LatencyProfile) bool {
	if patch, _ := labelPatch(node, p.Name); patch != nil || withAgentLabel(nil, node, agentVariant(p, ln)) != nil {
		return false
	}
	return ln != nil && (specUpToDate(ln, p, currentRevision(p)) || (ln.Spec.Profile == p.Name && p.Spec.Rollout != nil))
}

// decide brings one node's labels and LatencyNode in line with the
// profiles, and returns when to look at it again.
func (r *nodeSelection) decide(ctx context.Context, name string, profiles []v1alpha1.LatencyProfile) (time.Duration, error) {
	ln, err := r.latencyNode(ctx, name)
	if err != nil {
		return 0, err
	}
	if r.written.behind(name, ln, r.now()) {
		ctrl.LoggerFrom(ctx).V(1).Info("Waiting for the cache to show the LatencyNode just written")
		return ownWriteRecheck, nil
	}
	node := &corev1.Node{}
	if err := r.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
		if apierrors.IsNotFound(err) {
			if behind, err := r.nodeBehindCache(ctx, name, ln); err != nil || behind {
				return ownWriteRecheck, err
			}
			r.written.forgetLabels(name)
			return 0, r.nodeGone(ctx, ln)
		}
		return 0, fmt.Errorf("getting node: %w", err)
	}
	if r.written.labelsBehind(node, r.now()) {
		ctrl.LoggerFrom(ctx).V(1).Info("Waiting for the cache to show the node labels just written")
		return ownWriteRecheck, nil
	}
	cands, _ := planner.CompileProfiles(profiles)
	res := planner.ResolveNode(node.Labels, cands)
	if res.Winner != "" {
		return 0, r.apply(ctx, node, ln, gatedProfile(findProfile(profiles, res.Winner), r.Gates))
	}
	return r.release(ctx, node, ln, res, profiles)
}

func (r *nodeSelection) now() time.Time { return readClock(r.Now) }

// exec is the executor of the node's writes: its labels and taint with
// the selection, its LatencyNode's creation, spec and deletion.
func (r *nodeSelection) exec() *executor.Executor { return executor.New(r.Client, r.APIReader) }

// readClock reads an injected clock, the wall clock when there is none.
func readClock(now func() time.Time) time.Time {
	if now == nil {
		return time.Now()
	}
	return now()
}

// latencyNode returns the node's LatencyNode, nil when there is none.
func (r *nodeSelection) latencyNode(ctx context.Context, name string) (*v1alpha1.LatencyNode, error) {
	ln := &v1alpha1.LatencyNode{}
	err := r.Get(ctx, types.NamespacedName{Name: name}, ln)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getting LatencyNode: %w", err)
	}
	return ln, nil
}

// apply labels the node for p and writes p's resolved spec to its LatencyNode.
func (r *nodeSelection) apply(ctx context.Context, node *corev1.Node, ln *v1alpha1.LatencyNode, p *v1alpha1.LatencyProfile) error {
	if err := r.setLabels(ctx, node, p.Name, agentVariant(p, ln)); err != nil {
		return err
	}
	log := ctrl.LoggerFrom(ctx).WithValues("profile", p.Name)
	if ln == nil {
		created := renderLatencyNode(node, p, r.now())
		if err := r.exec().CreateLatencyNode(ctx, created); err != nil {
			return err
		}
		r.written.wrote(created.Name, created.Generation, r.now())
		log.Info("Created LatencyNode")
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, eventSelected, eventActionApply,
			"Node %s selected; LatencyNode created", node.Name)
		return nil
	}
	if specUpToDate(ln, p, currentRevision(p)) || (ln.Spec.Profile == p.Name && p.Spec.Rollout != nil) {
		return nil // a profile with spec.rollout moves its own nodes
	}
	previous := ln.Spec.Profile
	gen, err := r.exec().WriteSpec(ctx, ln, joinSpec(p), r.now(), true)
	if err != nil {
		return err
	}
	r.written.wrote(ln.Name, gen, r.now())
	log.Info("Updated LatencyNode spec", "previousProfile", previous, "generation", p.Generation)
	if previous != p.Name {
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, eventSelected, eventActionApply,
			"Node %s selected (taken over from %q)", node.Name, previous)
	}
	return nil
}

// release handles a node no profile owns: revert its LatencyNode, wait for
// the agent (or for the node to be unreachable too long), then clean up.
func (r *nodeSelection) release(ctx context.Context, node *corev1.Node, ln *v1alpha1.LatencyNode, res planner.Resolution, profiles []v1alpha1.LatencyProfile) (time.Duration, error) {
	if ln == nil {
		return 0, r.setLabels(ctx, node, "", "")
	}
	owner := findProfile(profiles, ln.Spec.Profile)
	// The agent reverts: it stays, hostPID while it has real-time threads
	// to restore; the profile label stays until finish.
	if err := r.setLabels(ctx, node, keepProfileLabel, agentVariant(nil, ln)); err != nil {
		return 0, err
	}
	now := r.now()
	_, wait := unreachable(node, now, r.UnreachableAfter)
	step := planner.Release(planner.ReleaseView{LN: ln, Node: node, Now: now, BootTimeout: bootTimeoutOf(owner),
		UnreachableAfter: r.UnreachableAfter})
	switch {
	case step == planner.ReleaseRevert:
		return 0, r.startRevert(ctx, ln, res, owner)
	case step == planner.ReleaseHold:
		// A reboot asked of the node may still come: it stays cordoned,
		// with its record, until that settles (planner/release.go).
		return defaultRebootPoll, nil
	case step == planner.ReleaseFinish && revertDone(ln):
		return 0, r.finish(ctx, node, ln, owner, "Node %s reverted")
	case step == planner.ReleaseFinish:
		return 0, r.finish(ctx, node, ln, owner, "Node %s NotReady past the timeout; removed without waiting for its agent")
	case wait > 0:
		return wait, nil
	}
	return 0, nil
}

// startRevert turns the node's LatencyNode spec to Revert.
func (r *nodeSelection) startRevert(ctx context.Context, ln *v1alpha1.LatencyNode, res planner.Resolution, owner *v1alpha1.LatencyProfile) error {
	spec := *ln.Spec.DeepCopy()
	spec.Action = v1alpha1.ActionRevert
	gen, err := r.exec().WriteSpec(ctx, ln, spec, r.now(), false)
	if err != nil {
		return err
	}
	r.written.wrote(ln.Name, gen, r.now())
	ctrl.LoggerFrom(ctx).Info("Started revert", "profile", ln.Spec.Profile, "conflict", res.Conflict)
	why := "no longer selected"
	if res.Conflicted() {
		why = fmt.Sprintf("selected with equal priority by %v", res.Conflict)
	} else if owner == nil || !owner.DeletionTimestamp.IsZero() {
		why = "profile deleted"
	}
	r.event(owner, ln, corev1.EventTypeNormal, eventReverting, eventActionRevert, "Node %s reverting: %s", ln.Name, why)
	return nil
}

// finish removes the profile label and the LatencyNode once a revert is over.
func (r *nodeSelection) finish(ctx context.Context, node *corev1.Node, ln *v1alpha1.LatencyNode, owner *v1alpha1.LatencyProfile, note string) error {
	if err := r.setLabels(ctx, node, "", ""); err != nil {
		return err
	}
	if err := r.letGoOfReboot(ctx, node, ln); err != nil {
		return err
	}
	if err := r.exec().DeleteLatencyNode(ctx, ln); err != nil {
		return fmt.Errorf("deleting LatencyNode: %w", err)
	}
	r.written.forget(ln.Name)
	ctrl.LoggerFrom(ctx).Info("Removed reverted LatencyNode", "profile", ln.Spec.Profile)
	r.event(owner, ln, corev1.EventTypeNormal, eventReverted, eventActionCleanup, note, node.Name)
	return nil
}

// nodeBehindCache: the cache has no Node called name, but the API server
// does. A LatencyNode is deleted as a gone node's only when a live read
// agrees, since the cache can hold a LatencyNode before the Node it was
// made for.
func (r *nodeSelection) nodeBehindCache(ctx context.Context, name string, ln *v1alpha1.LatencyNode) (bool, error) {
	if ln == nil || r.APIReader == nil {
		return false, nil
	}
	err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{})
	switch {
	case err == nil:
		ctrl.LoggerFrom(ctx).V(1).Info("Waiting for the cache to show the node its LatencyNode was made for")
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	default:
		return false, fmt.Errorf("confirming node %s is gone: %w", name, err)
	}
}

// nodeGone deletes the LatencyNode of a node that no longer exists.
func (r *nodeSelection) nodeGone(ctx context.Context, ln *v1alpha1.LatencyNode) error {
	if ln == nil {
		return nil
	}
	if err := r.exec().DeleteLatencyNode(ctx, ln); err != nil {
		return fmt.Errorf("deleting LatencyNode of a deleted node: %w", err)
	}
	r.written.forget(ln.Name)
	ctrl.LoggerFrom(ctx).Info("Deleted LatencyNode of a deleted node", "profile", ln.Spec.Profile)
	owner := r.profile(ctx, ln.Spec.Profile)
	r.event(owner, ln, corev1.EventTypeNormal, eventNodeGone, eventActionCleanup, "Node %s is gone; LatencyNode removed", ln.Name)
	return nil
}

// keepProfileLabel, as setLabels' profile, leaves the profile label as it is.
const keepProfileLabel = "\x00keep"

// setLabels patches the node's profile label to profile ("" removes it;
// keepProfileLabel leaves it) and its agent label to agent ("" removes it)
// in one merge patch, and records on the node when its agent gains or
// loses hostPID.
func (r *nodeSelection) setLabels(ctx context.Context, node *corev1.Node, profile, agent string) error {
	var patch map[string]any
	if profile != keepProfileLabel {
		var foreign bool
		patch, foreign = labelPatch(node, profile)
		if foreign {
			ctrl.LoggerFrom(ctx).Info("Left a profile label the controller did not set", "value", node.Labels[v1alpha1.ProfileLabel])
		}
	}
	was := node.Labels[v1alpha1.AgentLabel]
	patch = withAgentLabel(patch, node, agent)
	if patch == nil {
		return nil
	}
	write, tainted := patch, withPendingTaint(patch, node, profile)
	if tainted != nil {
		write = tainted
	}
	if err := r.exec().PatchNode(ctx, node, write); apierrors.IsConflict(err) {
		// The taint's list carries the node's resourceVersion: the
		// cache's node is older than the API server's (often our own
		// write not seen yet). Run again on the newer node.
		return executor.Stale(fmt.Errorf("patching node labels and taint: %w", err))
	} else if err != nil {
		return fmt.Errorf("patching node labels: %w", err)
	}
	if tainted != nil {
		ctrl.LoggerFrom(ctx).Info("Patched the tuning-pending taint with the selection", "present", true)
	}
	r.written.wroteLabels(node.Name, patchedLabels(patch), r.now())
	ctrl.LoggerFrom(ctx).Info("Patched node labels", "profile", profile, "agent", agent)
	r.agentSwitched(ctx, node, was, agent)
	return nil
}

// withPendingTaint is patch with the tuning-ready gate's taint added, when
// the patch selects the node for a profile it was not labelled for and the
// node lacks the taint: the gate closes in the same write as the selection
// (one Node write per selected node, not two). Taints are a list a merge
// patch replaces whole, so the patch then carries the node's
// resourceVersion. nil when the patch selects nothing new.
func withPendingTaint(patch map[string]any, node *corev1.Node, profile string) map[string]any {
	if profile == "" || profile == keepProfileLabel || node.Labels[v1alpha1.ProfileLabel] == profile {
		return nil
	}
	taints := executor.WithTaint(node.Spec.Taints, pendingTaint, true)
	if taints == nil {
		return nil
	}
	out := map[string]any{"spec": map[string]any{"taints": taints}}
	meta := map[string]any{"resourceVersion": node.ResourceVersion}
	for k, v := range patch["metadata"].(map[string]any) {
		meta[k] = v
	}
	out["metadata"] = meta
	return out
}

// agentSwitched records, on the node, that its agent gains or loses the
// host's pid namespace: the DaemonSet controller then replaces the node's
// agent pod with the other DaemonSet's (the journal on the node carries
// the tuning over; the new agent waits until the old one released it).
func (r *nodeSelection) agentSwitched(ctx context.Context, node *corev1.Node, was, now string) {
	switch {
	case now == v1alpha1.AgentHostPID && was != now:
		ctrl.LoggerFrom(ctx).Info("Node's agent moves to the hostPID DaemonSet", "from", was)
		r.Recorder.Eventf(node, nil, corev1.EventTypeNormal, eventAgentHostPID, eventActionGrant,
			"Agent runs with hostPID on this node: its profile grants realtime or it holds real-time threads (sched_setattr names threads in the caller's pid namespace)")
	case was == v1alpha1.AgentHostPID && now != was:
		ctrl.LoggerFrom(ctx).Info("Node's agent leaves the hostPID DaemonSet", "to", now)
		r.Recorder.Eventf(node, nil, corev1.EventTypeNormal, eventAgentHostPID, eventActionWithdraw,
			"Agent no longer runs with hostPID on this node: no realtime granted and no real-time thread left to restore")
	}
}

func (r *nodeSelection) profile(ctx context.Context, name string) *v1alpha1.LatencyProfile {
	p := &v1alpha1.LatencyProfile{}
	if name == "" || r.Get(ctx, types.NamespacedName{Name: name}, p) != nil {
		return nil
	}
	return p
}

// event records on the profile when it still exists, else on the LatencyNode.
func (r *nodeSelection) event(p *v1alpha1.LatencyProfile, ln *v1alpha1.LatencyNode, typ, reason, action, note string, args ...any) {
	if p != nil {
		r.Recorder.Eventf(p, ln, typ, reason, action, note, args...)
		return
	}
	r.Recorder.Eventf(ln, nil, typ, reason, action, note, args...)
}

func findProfile(profiles []v1alpha1.LatencyProfile, name string) *v1alpha1.LatencyProfile {
	for i := range profiles {
		if profiles[i].Name == name {
			return &profiles[i]
		}
	}
	return nil
}

// staleRetry is how soon a reconcile that lost to a newer object runs again.
const staleRetry = 200 * time.Millisecond
