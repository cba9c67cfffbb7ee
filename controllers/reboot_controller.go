package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
	"latencytier.io/latencytier/controllers/planner"
	"latencytier.io/latencytier/controllers/profilestatus"
)

// Managed reboots, the acting half: the profile reconciler runs one step
// of its nodes' reboots after each rollout step. It cordons a node
// (spec.unschedulable), evicts its pods through the Eviction API (policy/v1,
// so PodDisruptionBudgets hold: a refused eviction, 429, is tried again at
// the next poll; kubectl drain's rules, executor/drain.go), records each
// phase in the LatencyNode's spec.reboot before acting on it, and
// uncordons. It never deletes a pod and never writes a node's other
// fields; the agent does the reboot itself.
//
// This file holds the pass (step) and the budget across profiles;
// reboot_act.go carries out one node's act and writes its record; the
// executor (executor/cordon.go, executor/drain.go) cordons and drains; the
// planner (planner/reboot.go, planner/release.go, planner/status.go)
// decides each act, the release and status.reboots; reboot_release.go
// lifts a released node's cordon.

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

// rebootStep is one pass's managed reboots of a profile, decided: the
// status.reboots that records them, then the acts.
type rebootStep struct {
	Status *v1alpha1.RebootRolloutStatus
	pass   rebootPass
	lns    []*v1alpha1.LatencyNode
	nodes  map[string]*corev1.Node
}

// plan decides one pass of p's managed reboots (draining the nodes being
// drained, which is no record's). classes are the rollout's classes of p's
// nodes (nil when the rollout did not run). Its status.reboots goes into
// the pass's one status patch, which is written before act carries the
// acts out: a pause is on record before the node it pauses for is let go,
// and a restart between the two does not start the node again. p's status
// holds it from here on, as the profile's pass reads it.
func (r *rebooter) plan(ctx context.Context, p *v1alpha1.LatencyProfile, in profilestatus.Input, classes map[string]nodeClass) (rebootStep, error) {
	if r == nil {
		return rebootStep{Status: p.Status.Reboots}, nil
	}
	target := currentRevision(p)
	lns := sortedLatencyNodes(in.LatencyNodes, p.Name)
	nodes := make(map[string]*corev1.Node, len(in.Nodes))
	for i := range in.Nodes {
		nodes[in.Nodes[i].Name] = &in.Nodes[i]
	}
	// A node that left p's selection (a label changed, a profile of
	// higher priority or a tie, p deleted) is no longer p's to reboot.
	deselected := func(n *corev1.Node) bool { return n != nil && in.Resolution(n).Winner != p.Name }
	pass, err := r.decideRecords(ctx, p, in.Now, lns, nodes, target, classes, deselected)
	if err != nil {
		return rebootStep{}, err
	}
	if !pass.Paused {
		if err := r.decideStarts(ctx, p, lns, nodes, &pass, deselected); err != nil {
			return rebootStep{}, err
		}
	}
	if pass.Refused != "" && pass.Message == "" {
		if last := p.Status.Reboots; last == nil || last.Message != pass.Refused {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, eventRebootRefused, eventActionReboot, "%s; it stays cordoned until drainTimeout", pass.Refused)
		}
	}
	out := planner.RebootStatus(lns, pass.RebootPass)
	p.Status.Reboots = out.DeepCopy()
	return rebootStep{Status: out, pass: pass, lns: lns, nodes: nodes}, nil
}

// act carries out the acts of a planned pass, once its status.reboots is
// on record, and says when to look again.
func (r *rebooter) act(ctx context.Context, p *v1alpha1.LatencyProfile, s rebootStep, now time.Time) (time.Duration, error) {
	if r == nil {
		return 0, nil
	}
	for _, ln := range s.lns {
		if a, ok := s.pass.Acts[ln.Name]; ok {
			if err := r.carryOut(ctx, p, ln, s.nodes[ln.Name], a, s.pass.why[ln.Name], now); err != nil {
				return 0, err
			}
		}
	}
	if s.pass.inFlight || len(s.pass.Acts) > 0 {
		return r.poll(), nil
	}
	return 0, nil
}

// rebootPass is one pass's decisions before they are recorded and carried
// out: the planner's part, and why each act (for events and logs).
type rebootPass struct {
	planner.RebootPass
	why      map[string]string
	inFlight bool // some node holds a record
}

// decideRecords decides the next act of every node holding a reboot
// record, draining the cordoned ones first (the drain's outcome is what
// the decision reads). A pause (and its reason) lasts for the revision;
// any other message says what is in flight and is worked out again.
func (r *rebooter) decideRecords(ctx context.Context, p *v1alpha1.LatencyProfile, now time.Time, lns []*v1alpha1.LatencyNode,
	nodes map[string]*corev1.Node, target string, classes map[string]nodeClass, deselected func(*corev1.Node) bool) (rebootPass, error) {
	pass := rebootPass{RebootPass: planner.RebootPass{Target: target, Acts: map[string]rebootAct{}}, why: map[string]string{}}
	pass.Paused, pass.Message = planner.CarriedPause(p.Status.Reboots, target)
	for _, ln := range lns {
		if ln.Spec.Reboot == nil {
			continue
		}
		pass.inFlight = true
		v := planner.ViewOf(p, target, ln, nodes[ln.Name], deselected(nodes[ln.Name]), classes, now)
		// Drained only while cordoned: evicted from an uncordoned node,
		// a pod could be scheduled right back (nextDraining cordons
		// first). A node that left, or whose request was taken back, is
		// not drained: it is not to be rebooted.
		if ln.Spec.Reboot.Phase == v1alpha1.RebootDraining && v.Node != nil && v.Node.Spec.Unschedulable &&
			!v.Deselected && !withdrawn(ln.Spec.Reboot) {
			drained, err := r.drainFor(ctx, p, v.Node, &pass)
			if err != nil {
				return rebootPass{}, err
			}
			v.Drained = drained
		}
		a, why := nextReboot(v)
		pass.Acts[ln.Name], pass.why[ln.Name] = a, why
		if a == rebootAbandon || a == rebootStall {
			pass.Paused, pass.Message = true, truncateReboot(why)
		}
	}
	return pass, nil
}

// drainFor drains n for p's pass: an event for a PodDisruptionBudget's
// refusal, the first pod the drain will not evict in pass.Refused.
func (r *rebooter) drainFor(ctx context.Context, p *v1alpha1.LatencyProfile, n *corev1.Node, pass *rebootPass) (bool, error) {
	d, err := r.exec().Drain(ctx, n, drainOptionsOf(p))
	if err != nil {
		return false, err
	}
	if d.PDB != "" {
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, eventRebootBlocked, eventActionReboot,
			"Eviction of %s from node %s refused (a PodDisruptionBudget); retrying", d.PDB, n.Name)
	}
	if len(d.Refused) > 0 && pass.Refused == "" {
		pass.Refused = truncateReboot(fmt.Sprintf("the drain of node %s will not evict %s", n.Name, strings.Join(d.Refused, ", ")))
	}
	return d.Drained, nil
}

// decideStarts adds the reboots that start now to pass; reboot backs that
// wait for a person pause the reboots, with an event when that is news.
func (r *rebooter) decideStarts(ctx context.Context, p *v1alpha1.LatencyProfile, lns []*v1alpha1.LatencyNode,
	nodes map[string]*corev1.Node, pass *rebootPass, deselected func(*corev1.Node) bool) error {
	waiting, err := r.chooseStarts(ctx, p, lns, nodes, pass.Target, pass.Acts, deselected)
	if err != nil || len(waiting) == 0 {
		return err
	}
	pass.Paused, pass.Message = true, truncateReboot(backWaitMessage(pass.Target, waiting))
	if last := p.Status.Reboots; last == nil || last.Message != pass.Message {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, eventRebootPaused, eventActionReboot, "%s", pass.Message)
	}
	return nil
}

// exec is the executor of the reboots' writes: records, cordons, evictions.
func (r *rebooter) exec() *executor.Executor { return executor.New(r.Client, r.Live) }

func (r *rebooter) poll() time.Duration {
	if r.Poll > 0 {
		return r.Poll
	}
	return defaultRebootPoll
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

// backWaitPrefix starts the message of reboot backs that wait for a person.
const backWaitPrefix = planner.BackWaitPrefix

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
	used, keep := planner.SlotsInUse(r.started, all.Items)
	r.started = keep
	return used, nil
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

var truncateReboot = planner.TruncateReboot

// drainOptionsOf are p's spec.reboot.drain (none set: the zero value).
func drainOptionsOf(p *v1alpha1.LatencyProfile) v1alpha1.DrainSpec {
	if s := p.Spec.Reboot; s != nil && s.Drain != nil {
		return *s.Drain
	}
	return v1alpha1.DrainSpec{}
}
