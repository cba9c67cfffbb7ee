package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Managed reboots, the acting half: the profile reconciler runs one step
// of its nodes' reboots after each rollout step. It cordons a node
// (spec.unschedulable), evicts its pods through the Eviction API (policy/v1,
// so PodDisruptionBudgets hold: a refused eviction, 429, is tried again at
// the next poll), records each phase in the LatencyNode's spec.reboot
// before acting on it, and uncordons. It never deletes a pod and never
// writes a node's other fields; the agent does the reboot itself.
//
// What a drain leaves on the node: DaemonSet pods (their controller puts
// them back at once; the agent is one), mirror pods (the kubelet's static
// pods, which the API cannot evict), pods that tolerate the tuning-pending
// taint (what the user marks node-critical, as the agent does) and pods
// that have finished (Succeeded, Failed). A pod already terminating is
// waited for, not evicted again.
//
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create

// Event reasons of the managed reboots (on the profile).
const (
	eventRebootDraining  = "RebootDraining"
	eventRebootRequested = "RebootRequested"
	eventRebootVerifying = "RebootVerifying"
	eventRebootDone      = "RebootDone"
	eventRebootPaused    = "RebootPaused"
	eventRebootBlocked   = "RebootEvictionBlocked"
	eventActionReboot    = "Reboot"
)

// defaultRebootPoll is how often a reboot in flight is looked at (drain
// progress, timeouts) when no event comes.
const defaultRebootPoll = 5 * time.Second

// mirrorPodAnnotation marks the kubelet's static pods.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// rebooter runs the managed reboots of every profile; one is shared by
// the profile reconciler's passes, so its budget spans all profiles.
type rebooter struct {
	client.Client
	// Live reads pods (never cached: the manager keeps no pod informer)
	// and the reboot records when the budget is in doubt.
	Live     client.Reader
	Recorder events.EventRecorder
	// Max is how many nodes may be cordoned or rebooting at once across
	// all profiles (--max-rebooting).
	Max int
	// Poll is defaultRebootPoll when 0.
	Poll time.Duration

	mu sync.Mutex
	// started are the nodes this manager recorded Draining whose record
	// the cache may not show yet: they count against Max until it does.
	started map[string]bool
}

// rebootStep is one pass's outcome for a profile.
type rebootStep struct {
	Status *v1alpha1.RebootRolloutStatus
	Wait   time.Duration
}

// step runs one pass of p's managed reboots. classes are the rollout's
// classes of p's nodes (nil when the rollout did not run).
func (r *rebooter) step(ctx context.Context, p *v1alpha1.LatencyProfile, in statusInput, classes map[string]nodeClass) (rebootStep, error) {
	if r == nil {
		return rebootStep{Status: p.Status.Reboots}, nil
	}
	target := currentRevision(p)
	lns := sortedLatencyNodes(in.LatencyNodes, p.Name)
	nodes := make(map[string]*corev1.Node, len(in.Nodes))
	for i := range in.Nodes {
		nodes[in.Nodes[i].Name] = &in.Nodes[i]
	}
	st := v1alpha1.RebootRolloutStatus{Revision: target}
	if last := p.Status.Reboots; last != nil && last.Revision == target {
		st.Paused, st.Message = last.Paused, last.Message
	}
	acts, why := map[string]rebootAct{}, map[string]string{}
	inFlight := false
	for _, ln := range lns {
		if ln.Spec.Reboot == nil {
			continue
		}
		inFlight = true
		v := rebootView{LN: ln, Node: nodes[ln.Name], Limits: rebootLimitsOf(p), Now: in.Now}
		v.Class, v.Judged = classes[ln.Name]
		v.Judged = v.Judged && p.Spec.Rollout != nil && ln.Spec.Reboot.Revision == target
		if ln.Spec.Reboot.Phase == v1alpha1.RebootDraining && v.Node != nil {
			drained, blocked, err := r.drain(ctx, v.Node)
			if err != nil {
				return rebootStep{}, err
			}
			if blocked != "" {
				r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, eventRebootBlocked, eventActionReboot,
					"Eviction of %s from node %s refused (a PodDisruptionBudget); retrying", blocked, ln.Name)
			}
			v.Drained = drained
		}
		acts[ln.Name], why[ln.Name] = nextReboot(v)
		if a := acts[ln.Name]; a == rebootAbandon || a == rebootStall {
			st.Paused, st.Message = true, truncateReboot(why[ln.Name])
		}
	}
	if !st.Paused {
		if err := r.chooseStarts(ctx, p, lns, nodes, target, acts); err != nil {
			return rebootStep{}, err
		}
	}
	counts := rebootCounts(lns, acts, target)
	counts.Revision, counts.Paused, counts.Message = target, st.Paused, st.Message
	if counts.Message == "" && (counts.Draining+counts.Rebooting+counts.Verifying) > 0 {
		counts.Message = truncateReboot(inFlightMessage(lns, acts))
	}
	out := &counts
	if !anyRebootPolicy(lns) && counts == (v1alpha1.RebootRolloutStatus{Revision: target}) {
		out = nil
	}
	// The pause is on record before the act that caused it: a restart
	// between the two must not start the node again.
	if err := r.record(ctx, p, out); err != nil {
		return rebootStep{}, err
	}
	for _, ln := range lns {
		if a, ok := acts[ln.Name]; ok {
			if err := r.carryOut(ctx, p, ln, nodes[ln.Name], a, why[ln.Name], in.Now); err != nil {
				return rebootStep{}, err
			}
		}
	}
	res := rebootStep{Status: out}
	if inFlight || len(acts) > 0 {
		res.Wait = r.poll()
	}
	return res, nil
}

func (r *rebooter) poll() time.Duration {
	if r.Poll > 0 {
		return r.Poll
	}
	return defaultRebootPoll
}

// anyRebootPolicy: some node holds a tuning whose boot policy is Reboot,
// or arguments that need a reboot out.
func anyRebootPolicy(lns []*v1alpha1.LatencyNode) bool {
	for _, ln := range lns {
		if rebootsAllowed(ln) || ln.Spec.Reboot != nil || (ln.Status.Boot != nil && ln.Status.Boot.State == v1alpha1.BootUnstaged) {
			return true
		}
	}
	return false
}

// inFlightMessage names the nodes whose reboot is in flight.
func inFlightMessage(lns []*v1alpha1.LatencyNode, acts map[string]rebootAct) string {
	var list []string
	for _, ln := range lns {
		a, ok := acts[ln.Name]
		switch {
		case ok && (a == rebootFinish || a == rebootAbandon):
		case ok && a == rebootStart, ln.Spec.Reboot != nil:
			list = append(list, ln.Name)
		}
	}
	return "waiting for the reboot of " + names(list)
}

// chooseStarts picks the staged nodes whose reboot starts now, while the
// budget across all profiles allows: a node holding the target revision
// (the rollout's turn), or any revision after a rollback (the arguments go
// back), or, after a rollback, a node whose kernel still holds the target's
// arguments (Unstaged: the reboot back), Ready and not cordoned by someone
// else.
func (r *rebooter) chooseStarts(ctx context.Context, p *v1alpha1.LatencyProfile, lns []*v1alpha1.LatencyNode,
	nodes map[string]*corev1.Node, target string, acts map[string]rebootAct) error {
	rolledBack := p.Status.Rollout != nil && p.Status.Rollout.Phase == v1alpha1.RolloutRolledBack
	var used int
	counted := false
	for _, ln := range lns {
		n := nodes[ln.Name]
		if ln.Spec.Reboot != nil || n == nil || n.Spec.Unschedulable || readyStatus(n) != corev1.ConditionTrue {
			continue
		}
		staged := stagedForReboot(ln) && (ln.Spec.Revision == target || rolledBack)
		if !staged && !(rolledBack && unstagedForReboot(ln, target)) {
			continue
		}
		if !counted {
			var err error
			if used, err = r.inUse(ctx); err != nil {
				return err
			}
			counted = true
		}
		if used >= r.Max {
			return nil
		}
		acts[ln.Name] = rebootStart
		used++
	}
	return nil
}

// inUse counts the nodes cordoned or rebooting for a managed reboot: the
// reboot records the cache holds and those this manager wrote that it
// does not show yet.
func (r *rebooter) inUse(ctx context.Context) (int, error) {
	var all v1alpha1.LatencyNodeList
	if err := r.List(ctx, &all, client.UnsafeDisableDeepCopy); err != nil {
		return 0, fmt.Errorf("listing LatencyNodes: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for i := range all.Items {
		if all.Items[i].Spec.Reboot != nil {
			seen[all.Items[i].Name] = true
			delete(r.started, all.Items[i].Name)
		}
	}
	for name := range r.started {
		seen[name] = true
	}
	return len(seen), nil
}

func (r *rebooter) markStarted(node string, on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started == nil {
		r.started = map[string]bool{}
	}
	if on {
		r.started[node] = true
	} else {
		delete(r.started, node)
	}
}

// carryOut does one node's act: the record first where the act advances
// it, so a restart resumes from what was done.
func (r *rebooter) carryOut(ctx context.Context, p *v1alpha1.LatencyProfile, ln *v1alpha1.LatencyNode, n *corev1.Node,
	a rebootAct, why string, now time.Time) error {
	log := ctrl.LoggerFrom(ctx).WithValues("node", ln.Name)
	since := metav1.NewTime(now.Truncate(time.Second))
	switch a {
	case rebootStart:
		r.markStarted(ln.Name, true)
		rec := &v1alpha1.NodeRebootSpec{Revision: ln.Spec.Revision, Phase: v1alpha1.RebootDraining, Since: since}
		if !stagedForReboot(ln) {
			rec.Revision = backRevision(currentRevision(p))
		}
		if err := r.writeRecord(ctx, ln, rec, nil); err != nil {
			r.markStarted(ln.Name, false)
			return err
		}
		if err := r.cordon(ctx, n, true); err != nil {
			return err
		}
		log.Info("Cordoned the node to reboot it", "revision", rec.Revision)
		r.event(p, corev1.EventTypeNormal, eventRebootDraining, "Cordoned node %s and draining it to reboot for %s", ln.Name, rec.Revision)
	case rebootDrain:
		if n != nil && !n.Spec.Unschedulable {
			return r.cordon(ctx, n, true)
		}
	case rebootRequest:
		rec := ln.Spec.Reboot.DeepCopy()
		rec.Phase, rec.Since, rec.BootID = v1alpha1.RebootRequested, since, bootIDOf(n, ln)
		if err := r.writeRecord(ctx, ln, rec, nil); err != nil {
			return err
		}
		log.Info("Asked the agent to reboot the node", "bootID", rec.BootID)
		r.event(p, corev1.EventTypeNormal, eventRebootRequested, "Drained node %s; its agent reboots it for %s", ln.Name, rec.Revision)
	case rebootVerify:
		rec := ln.Spec.Reboot.DeepCopy()
		rec.Phase, rec.Since = v1alpha1.RebootVerifying, since
		var stamp *verifyStamp
		if !isBack(rec) { // a reboot back is judged by the boot, not the rollout's window
			stamp = &verifyStamp{at: now}
			if ro := p.Spec.Rollout; ro != nil {
				stamp.after = &metav1.Time{Time: since.Add(window(ro))}
			}
		}
		if err := r.writeRecord(ctx, ln, rec, stamp); err != nil {
			return err
		}
		r.event(p, corev1.EventTypeNormal, eventRebootVerifying, "Node %s is %s; verifying", ln.Name, why)
	case rebootFinish, rebootAbandon:
		if err := r.cordon(ctx, n, false); err != nil {
			return err
		}
		if err := r.writeRecord(ctx, ln, nil, nil); err != nil {
			return err
		}
		r.markStarted(ln.Name, false)
		if a == rebootAbandon {
			log.Info("Paused the reboots", "why", why)
			r.event(p, corev1.EventTypeWarning, eventRebootPaused, "%s; the reboots of %s paused", why, p.Name)
			return nil
		}
		log.Info("Uncordoned the node after its reboot", "why", why)
		r.event(p, corev1.EventTypeNormal, eventRebootDone, "Uncordoned node %s: %s", ln.Name, why)
	case rebootStall:
		if p.Status.Reboots == nil || !p.Status.Reboots.Paused || p.Status.Reboots.Message != why {
			log.Info("Paused the reboots", "why", why)
			r.event(p, corev1.EventTypeWarning, eventRebootPaused, "%s; the reboots of %s paused", why, p.Name)
		}
	}
	return nil
}

func (r *rebooter) event(p *v1alpha1.LatencyProfile, typ, reason, format string, args ...any) {
	r.Recorder.Eventf(p, nil, typ, reason, eventActionReboot, format, args...)
}

// bootIDOf is the node's running boot as the agent reports it, else as
// the kubelet does.
func bootIDOf(n *corev1.Node, ln *v1alpha1.LatencyNode) string {
	if b := ln.Status.Boot; b != nil && b.BootID != "" {
		return b.BootID
	}
	if n != nil {
		return n.Status.NodeInfo.BootID
	}
	return ""
}

// verifyStamp restarts the rollout's verification clock at the boot: the
// revision-set-at annotation and spec.verifyAfter.
type verifyStamp struct {
	at    time.Time
	after *metav1.Time
}

// writeRecord sets (rec) or clears (nil) ln's spec.reboot with a JSON
// patch that tests the generation it was read at: a spec written since
// (a rollout move) makes it a staleError, and the pass runs again.
func (r *rebooter) writeRecord(ctx context.Context, ln *v1alpha1.LatencyNode, rec *v1alpha1.NodeRebootSpec, stamp *verifyStamp) error {
	ops := []jsonOp{{Op: "test", Path: "/metadata/generation", Value: ln.Generation}}
	switch {
	case rec != nil:
		ops = append(ops, jsonOp{Op: "add", Path: "/spec/reboot", Value: rec})
	case ln.Spec.Reboot != nil:
		ops = append(ops, jsonOp{Op: "remove", Path: "/spec/reboot"})
	default:
		return nil
	}
	if stamp != nil {
		at := stamp.at.UTC().Format(time.RFC3339)
		if ln.Annotations == nil {
			ops = append(ops, jsonOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{v1alpha1.RevisionSetAtAnnotation: at}})
		} else {
			ops = append(ops, jsonOp{Op: "add", Path: "/metadata/annotations/" + pointerEscape(v1alpha1.RevisionSetAtAnnotation), Value: at})
		}
		if stamp.after != nil {
			ops = append(ops, jsonOp{Op: "add", Path: "/spec/verifyAfter", Value: stamp.after})
		}
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	written := ln.DeepCopy()
	if err := r.Patch(ctx, written, client.RawPatch(types.JSONPatchType, raw)); err != nil {
		if specMoved(err) {
			return staleError{fmt.Errorf("recording the reboot of %s: spec written since generation %d: %w", ln.Name, ln.Generation, err)}
		}
		return ignoreStale(ctx, fmt.Errorf("recording the reboot of %s: %w", ln.Name, err))
	}
	return nil
}

// cordon sets or clears the node's spec.unschedulable, and nothing else.
func (r *rebooter) cordon(ctx context.Context, n *corev1.Node, on bool) error {
	if n == nil {
		return nil
	}
	var v any
	if on {
		v = true
	}
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"unschedulable": v}})
	if err != nil {
		return err
	}
	patched := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
	if err := r.Patch(ctx, patched, client.RawPatch(types.MergePatchType, raw)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("cordoning node %s (%v): %w", n.Name, on, err)
	}
	return nil
}

// drain evicts the pods a drain takes from n. It reports whether none is
// left, and the first pod whose eviction a PodDisruptionBudget refused.
func (r *rebooter) drain(ctx context.Context, n *corev1.Node) (bool, string, error) {
	var pods corev1.PodList
	if err := r.Live.List(ctx, &pods, client.MatchingFields{"spec.nodeName": n.Name}); err != nil {
		return false, "", fmt.Errorf("listing the pods of node %s: %w", n.Name, err)
	}
	left, blocked := 0, ""
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !drains(pod) {
			continue
		}
		left++
		if !pod.DeletionTimestamp.IsZero() {
			continue
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
		err := r.SubResource("eviction").Create(ctx, pod, ev)
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			if blocked == "" {
				blocked = pod.Namespace + "/" + pod.Name
			}
		default:
			return false, "", fmt.Errorf("evicting %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	return left == 0, blocked, nil
}

// drains: a drain evicts pod (see the top of this file for what stays).
func drains(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if _, mirror := pod.Annotations[mirrorPodAnnotation]; mirror {
		return false
	}
	if c := metav1.GetControllerOf(pod); c != nil && c.Kind == "DaemonSet" {
		return false
	}
	for _, t := range pod.Spec.Tolerations {
		if toleratesPending(t) {
			return false
		}
	}
	return true
}

// toleratesPending: t tolerates the tuning-pending taint (its key, or every
// key with operator Exists; its effect or every effect).
func toleratesPending(t corev1.Toleration) bool {
	if t.Effect != "" && t.Effect != pendingTaint.Effect {
		return false
	}
	if t.Key == "" {
		return t.Operator == corev1.TolerationOpExists
	}
	return t.Key == pendingTaint.Key && (t.Operator == corev1.TolerationOpExists || t.Value == pendingTaint.Value)
}

// record writes status.reboots into the profile at once when it changed:
// a pause must be on record before the node it pauses for is let go.
func (r *rebooter) record(ctx context.Context, p *v1alpha1.LatencyProfile, st *v1alpha1.RebootRolloutStatus) error {
	if equality.Semantic.DeepEqual(p.Status.Reboots, st) {
		return nil
	}
	patched := p.DeepCopy()
	patched.Status.Reboots = st.DeepCopy()
	if err := r.Status().Patch(ctx, patched, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{})); err != nil {
		return ignoreStale(ctx, fmt.Errorf("recording reboots status: %w", err))
	}
	p.Status.Reboots, p.ResourceVersion = patched.Status.Reboots, patched.ResourceVersion
	return nil
}

func truncateReboot(s string) string {
	if len(s) > 1024 {
		return s[:1021] + "..."
	}
	return s
}
