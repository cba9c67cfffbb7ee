package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Managed reboots, the acting half: the profile reconciler runs one step
// of its nodes' reboots after each rollout step. It cordons a node
// (spec.unschedulable), evicts its pods through the Eviction API (policy/v1,
// so PodDisruptionBudgets hold: a refused eviction, 429, is tried again at
// the next poll; kubectl drain's rules, reboot_drain.go), records each phase in the LatencyNode's spec.reboot
// before acting on it, and uncordons. It never deletes a pod and never
// writes a node's other fields; the agent does the reboot itself.
//
// This file holds the pass (step), the budget across profiles and the
// profile's status.reboots; reboot_act.go carries out one node's act and
// writes its record; reboot_drain.go cordons and drains; reboot.go decides;
// reboot_release.go lets go of nodes that leave.

// Event reasons of the managed reboots (on the profile).
const (
	eventRebootDraining  = "RebootDraining"
	eventRebootRequested = "RebootRequested"
	eventRebootVerifying = "RebootVerifying"
	eventRebootDone      = "RebootDone"
	eventRebootPaused    = "RebootPaused"
	eventRebootBlocked   = "RebootEvictionBlocked"
	eventRebootRefused   = "RebootDrainRefused"
	eventRebootWithdrawn = "RebootWithdrawn"
	eventActionReboot    = "Reboot"
)

// defaultRebootPoll is how often a reboot in flight is looked at (drain
// progress, timeouts) when no event comes.
const defaultRebootPoll = 5 * time.Second

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
	// A pause (and its reason) lasts for the revision; any other message
	// says what is in flight and is worked out again below.
	if last := p.Status.Reboots; last != nil && last.Revision == target && last.Paused && !strings.HasPrefix(last.Message, backWaitPrefix) {
		st.Paused, st.Message = true, last.Message
	}
	// A node that left p's selection (a label changed, a profile of
	// higher priority or a tie, p deleted) is no longer p's to reboot.
	deselected := func(n *corev1.Node) bool { return n != nil && in.resolution(n).Winner != p.Name }
	acts, why := map[string]rebootAct{}, map[string]string{}
	inFlight := false
	refusedMsg := "" // the first drain that refuses a pod
	for _, ln := range lns {
		if ln.Spec.Reboot == nil {
			continue
		}
		inFlight = true
		v := rebootView{LN: ln, Node: nodes[ln.Name], Limits: rebootLimitsOf(p), Now: in.Now}
		v.Deselected = deselected(v.Node) || !recordOf(ln.Spec.Reboot, p.Name)
		v.Class, v.Judged = classes[ln.Name]
		v.Judged = v.Judged && p.Spec.Rollout != nil && ln.Spec.Reboot.Revision == target
		// Drained only while cordoned: evicted from an uncordoned node,
		// a pod could be scheduled right back (nextDraining cordons
		// first). A node that left, or whose request was taken back, is
		// not drained: it is not to be rebooted.
		if ln.Spec.Reboot.Phase == v1alpha1.RebootDraining && v.Node != nil && v.Node.Spec.Unschedulable &&
			!v.Deselected && !withdrawn(ln.Spec.Reboot) {
			d, err := r.drain(ctx, v.Node, drainOptionsOf(p))
			if err != nil {
				return rebootStep{}, err
			}
			if d.PDB != "" {
				r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, eventRebootBlocked, eventActionReboot,
					"Eviction of %s from node %s refused (a PodDisruptionBudget); retrying", d.PDB, ln.Name)
			}
			if len(d.Refused) > 0 && refusedMsg == "" {
				refusedMsg = truncateReboot(fmt.Sprintf("the drain of node %s will not evict %s", ln.Name, strings.Join(d.Refused, ", ")))
			}
			v.Drained = d.Drained
		}
		acts[ln.Name], why[ln.Name] = nextReboot(v)
		if a := acts[ln.Name]; a == rebootAbandon || a == rebootStall {
			st.Paused, st.Message = true, truncateReboot(why[ln.Name])
		}
	}
	if !st.Paused {
		waiting, err := r.chooseStarts(ctx, p, lns, nodes, target, acts, deselected)
		if err != nil {
			return rebootStep{}, err
		}
		if len(waiting) > 0 {
			st.Paused, st.Message = true, truncateReboot(backWaitMessage(target, waiting))
			if last := p.Status.Reboots; last == nil || last.Message != st.Message {
				r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, eventRebootPaused, eventActionReboot, "%s", st.Message)
			}
		}
	}
	counts := rebootCounts(lns, acts, target)
	counts.Revision, counts.Paused, counts.Message = target, st.Paused, st.Message
	if counts.Message == "" && refusedMsg != "" {
		counts.Message = refusedMsg
		if last := p.Status.Reboots; last == nil || last.Message != refusedMsg {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, eventRebootRefused, eventActionReboot, "%s; it stays cordoned until drainTimeout", refusedMsg)
		}
	}
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
//
// After a rollback every start is a reboot back, and those wait for a
// person (rebootBackAllowed): chooseStarts returns the nodes that wait.
func (r *rebooter) chooseStarts(ctx context.Context, p *v1alpha1.LatencyProfile, lns []*v1alpha1.LatencyNode,
	nodes map[string]*corev1.Node, target string, acts map[string]rebootAct, deselected func(*corev1.Node) bool) ([]string, error) {
	rolledBack := p.Status.Rollout != nil && p.Status.Rollout.Phase == v1alpha1.RolloutRolledBack
	backsWait := rolledBack && !rebootBackAllowed(p, target)
	var used int
	var waiting []string
	counted := false
	for _, ln := range lns {
		n := nodes[ln.Name]
		if ln.Spec.Reboot != nil || !startable(ln, n, target, rolledBack, deselected(n)) {
			continue
		}
		if backsWait {
			waiting = append(waiting, ln.Name)
			continue
		}
		if !counted {
			var err error
			if used, err = r.inUse(ctx); err != nil {
				return nil, err
			}
			counted = true
		}
		if used >= r.Max {
			return nil, nil
		}
		acts[ln.Name] = rebootStart
		used++
	}
	return waiting, nil
}

// backWaitPrefix starts the status.reboots.message of reboot backs that
// wait for a person; that pause is worked out again each pass, not
// carried over, so the go-ahead lifts it.
const backWaitPrefix = "reboot back waits for a person: "

func backWaitMessage(target string, waiting []string) string {
	return fmt.Sprintf("%s%s rolled back; %s booted or staged arguments of it and would be rebooted again. "+
		"Annotate the profile %s=%s to reboot them back (spec.rollout.rebootBack Automatic does so without asking)",
		backWaitPrefix, target, names(waiting), v1alpha1.RebootBackAnnotation, target)
}

// rebootBackAllowed: the reboot backs after target's rollback may start:
// the profile opts into them (rebootBackAutomatic) or a person gave the
// go-ahead for target (v1alpha1.RebootBackAnnotation).
func rebootBackAllowed(p *v1alpha1.LatencyProfile, target string) bool {
	return rebootBackAutomatic(p) || p.Annotations[v1alpha1.RebootBackAnnotation] == target
}

// rebootBackAutomatic: the profile opts into reboot backs without a
// person's go-ahead (spec.rollout.rebootBack Automatic; Pause, the
// default, waits).
func rebootBackAutomatic(p *v1alpha1.LatencyProfile) bool {
	return p.Spec.Rollout != nil && p.Spec.Rollout.RebootBack == v1alpha1.RebootBackAutomatic
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
	seen, exists := map[string]bool{}, map[string]bool{}
	for i := range all.Items {
		exists[all.Items[i].Name] = true
		if all.Items[i].Spec.Reboot != nil {
			seen[all.Items[i].Name] = true
			delete(r.started, all.Items[i].Name)
		}
	}
	for name := range r.started {
		// A started node whose LatencyNode is gone was released (the
		// node controller uncordons it with the record): it holds no
		// slot, whether or not the cache ever showed its record.
		if !exists[name] {
			delete(r.started, name)
			continue
		}
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
