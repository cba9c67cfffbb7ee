package profilestatus

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/planner"
	"latencytier.io/latencytier/internal/figures"
	"latencytier.io/latencytier/internal/ratio"
)

// maxStatusNodes caps status.nodes and status.waitingFor (the CRD's MaxItems).
const maxStatusNodes = 32

// maxMessage is the CRD bound on a node line's message.
const maxMessage = 512

// Input is everything a LatencyProfile's status is computed from.
type Input struct {
	Profile      *v1alpha1.LatencyProfile
	Nodes        []corev1.Node
	Candidates   []planner.Candidate
	LatencyNodes map[string]*v1alpha1.LatencyNode
	Now          time.Time
	// UnreachableAfter is how long a NotReady node counts as still coming back.
	UnreachableAfter time.Duration
	// Rollout is this pass's rollout status (nil without spec.rollout).
	Rollout *v1alpha1.RolloutStatus
	// Revision is the profile's current revision ("": computed on use).
	// It is computed once per pass: encoding and hashing the spec for each
	// of 1000 nodes was a tenth of the manager's CPU during a change.
	Revision string
	// Resolved memoizes planner.ResolveNode per node for one pass: status,
	// the rollout and the metrics each ask who owns every node (nil: no
	// memo).
	Resolved map[string]planner.Resolution
}

// Resolution is who owns node, resolved once per pass.
func (in Input) Resolution(node *corev1.Node) planner.Resolution {
	if r, ok := in.Resolved[node.Name]; ok {
		return r
	}
	r := planner.ResolveNode(node.Labels, in.Candidates)
	if in.Resolved != nil {
		in.Resolved[node.Name] = r
	}
	return r
}

// nodeLine is one node's state for the profile plus the facts counted from it.
type nodeLine struct {
	v1alpha1.ProfileNodeStatus
	won           bool // the profile owns the node
	applied       bool // the agent reports the current generation Applied
	outsideBudget bool
	reboot        bool
	contended     bool      // RunQueueContention True
	since         time.Time // when RunQueueContention turned True
	tainted       bool      // the node carries the contention taint
	podsOutside   int32     // measured pods Outside their budget (status.podBudgets)
	throttled     float64
}

// severity orders node states worst first in status.nodes.
var severity = map[v1alpha1.ProfileNodeState]int{
	v1alpha1.NodeStateDegraded:    0,
	v1alpha1.NodeStateUnreachable: 1,
	v1alpha1.NodeStateStale:       2,
	v1alpha1.NodeStateConflicted:  3,
	v1alpha1.NodeStateDrifted:     4,
	v1alpha1.NodeStateReverting:   5,
	v1alpha1.NodeStatePending:     6,
	v1alpha1.NodeStateApplied:     7,
	v1alpha1.NodeStateReverted:    8,
}

// profileNodeLines lists every node the profile owns, is conflicted on, or
// still has a LatencyNode on (being reverted), in no particular order.
func profileNodeLines(in Input) []nodeLine {
	if in.Revision == "" {
		in.Revision = planner.CurrentRevision(in.Profile)
	}
	name := in.Profile.Name
	seen := map[string]bool{}
	var lines []nodeLine
	for i := range in.Nodes {
		node := &in.Nodes[i]
		ln := in.LatencyNodes[node.Name]
		res := in.Resolution(node)
		var line nodeLine
		switch {
		case res.Conflicted() && res.Involves(name):
			line = conflictLine(node.Name, name, res.Conflict)
		case res.Winner == name:
			line = ownedLine(in, node, ln)
		case ln != nil && ln.Spec.Profile == name:
			line = revertLine(node.Name, ln, "node no longer selected")
		default:
			continue
		}
		seen[node.Name] = true
		lines = append(lines, line)
	}
	for nodeName, ln := range in.LatencyNodes {
		if !seen[nodeName] && ln.Spec.Profile == name {
			lines = append(lines, revertLine(nodeName, ln, "node is gone"))
		}
	}
	return lines
}

func conflictLine(node, self string, tied []string) nodeLine {
	others := make([]string, 0, len(tied))
	for _, t := range tied {
		if t != self {
			others = append(others, t)
		}
	}
	return nodeLine{ProfileNodeStatus: v1alpha1.ProfileNodeStatus{
		Name:    node,
		State:   v1alpha1.NodeStateConflicted,
		Message: Truncate("selected with equal priority by " + strings.Join(others, ", ")),
	}}
}

func revertLine(node string, ln *v1alpha1.LatencyNode, why string) nodeLine {
	state := v1alpha1.NodeStateReverting
	if planner.RevertDone(ln) {
		state = v1alpha1.NodeStateReverted
	}
	return nodeLine{ProfileNodeStatus: v1alpha1.ProfileNodeStatus{
		Name: node, State: state, Message: why,
	}}
}

// ownedLine is the state of a node the profile owns, from its LatencyNode.
func ownedLine(in Input, node *corev1.Node, ln *v1alpha1.LatencyNode) nodeLine {
	line := nodeLine{won: true, ProfileNodeStatus: v1alpha1.ProfileNodeStatus{Name: node.Name},
		tainted: planner.HasTaint(node.Spec.Taints, planner.ContentionTaint)}
	if ln != nil {
		line.RunQueueP99 = ln.Status.RunQueueP99.DeepCopy()
		line.ThrottledRatio = ln.Status.ThrottledRatio
		line.throttled = parseRatio(ln.Status.ThrottledRatio)
	}
	if gone, _ := planner.Unreachable(node, in.Now, in.UnreachableAfter); gone {
		line.State, line.Message = v1alpha1.NodeStateUnreachable, "node NotReady longer than "+in.UnreachableAfter.String()
		return line
	}
	if ln != nil && ln.Status.StaleAt(in.Now) {
		// Silent for two heartbeats: what the agent last said may no
		// longer hold, whatever it was.
		line.State, line.Message = v1alpha1.NodeStateStale, staleWhy(&ln.Status)
		return line
	}
	if ln != nil && ln.Spec.Profile == in.Profile.Name && ln.Status.Profile == in.Profile.Name {
		// What the node's measured pods wait behind others holds whatever
		// revision it runs: counted while the node is this profile's, also
		// when it is pending for a rollout (after a rollback).
		line.contended, line.since = planner.ContendedFor(ln, in.Profile.Name)
		// So do its measured pods' verdicts against measurement.budgets.
		line.podsOutside = podsOutsideBudget(ln)
	}
	if ln == nil || !holdsTarget(ln, in.Profile, in.Revision) {
		line.State, line.Message = v1alpha1.NodeStatePending, pendingWhy(ln, in.Profile)
		return line
	}
	if !reportsCurrent(ln, in.Profile) {
		line.State, line.Message = v1alpha1.NodeStatePending, "waiting for the node's agent"
		return line
	}
	conds := ln.Status.Conditions
	line.outsideBudget = meta.IsStatusConditionFalse(conds, v1alpha1.NodeWithinBudget)
	line.reboot = meta.IsStatusConditionTrue(conds, v1alpha1.NodeRebootRequired)
	applied := meta.FindStatusCondition(conds, v1alpha1.NodeApplied)
	switch {
	case applied != nil && applied.Status == metav1.ConditionFalse:
		line.State, line.Message = v1alpha1.NodeStateDegraded, Truncate(applied.Reason+": "+applied.Message)
	case meta.IsStatusConditionTrue(conds, v1alpha1.NodeDrifted):
		c := meta.FindStatusCondition(conds, v1alpha1.NodeDrifted)
		line.State, line.Message = v1alpha1.NodeStateDrifted, Truncate(c.Message)
		line.applied = applied != nil && applied.Status == metav1.ConditionTrue
	case applied != nil && applied.Status == metav1.ConditionTrue:
		line.State, line.applied = v1alpha1.NodeStateApplied, true
	default:
		line.State, line.Message = v1alpha1.NodeStatePending, "waiting for the node's agent"
	}
	return line
}

// podsOutsideBudget is how many of ln's measured pods its agent reports
// Outside their budget; 0 without status.podBudgets or with a count out
// of bounds (the status is the agent's, not trusted to be sane).
func podsOutsideBudget(ln *v1alpha1.LatencyNode) int32 {
	if b := ln.Status.PodBudgets; b != nil && b.Outside > 0 {
		return b.Outside
	}
	return 0
}

// staleWhy says since when a Stale node's agent has been silent.
func staleWhy(st *v1alpha1.LatencyNodeStatus) string {
	return fmt.Sprintf("no report since %s (heartbeat %s): the agent is stuck, gone or cannot write",
		st.ReportedAt.UTC().Format(time.RFC3339), st.HeartbeatInterval.Duration)
}

// StaleRecheck is when the first node of the profile that is not stale yet
// turns stale, so status says so without another event (0: none will).
func StaleRecheck(in Input) time.Duration {
	var soonest time.Duration
	for _, ln := range in.LatencyNodes {
		if ln.Spec.Profile != in.Profile.Name {
			continue
		}
		at, ok := ln.Status.StaleAfter()
		if wait := at.Sub(in.Now); ok && wait > 0 && (soonest == 0 || wait < soonest) {
			soonest = wait
		}
	}
	return soonest
}

// holdsTarget reports whether ln asks for p's current tuning: p's current
// revision (planner.CurrentRevision, passed in as revision, computed once
// per status pass), and without spec.rollout p's generation too (a profile
// with spec.rollout moves its nodes, so their profileGeneration may lag).
// The revision, a hash of the tuning, stands for the tuning itself:
// comparing each node's whole tuning was a tenth of the status pass's CPU
// at 1000 nodes. A tuning edited by hand under the same revision is the
// selection's to restore (specUpToDate in controllers/ compares all
// of it).
func holdsTarget(ln *v1alpha1.LatencyNode, p *v1alpha1.LatencyProfile, revision string) bool {
	s := &ln.Spec
	if s.Profile != p.Name || s.Action != v1alpha1.ActionApply || s.Revision != revision {
		return false
	}
	return p.Spec.Rollout != nil || s.ProfileGeneration == p.Generation
}

// reportsCurrent reports whether the agent's status describes the current
// spec of ln (which holdsTarget checked against p).
func reportsCurrent(ln *v1alpha1.LatencyNode, p *v1alpha1.LatencyProfile) bool {
	return ln.Status.ObservedGeneration >= ln.Generation &&
		ln.Status.Profile == p.Name && ln.Status.ProfileGeneration == ln.Spec.ProfileGeneration
}

// pendingWhy says why a node of p does not ask for p's current tuning yet.
func pendingWhy(ln *v1alpha1.LatencyNode, p *v1alpha1.LatencyProfile) string {
	switch {
	case ln == nil || p.Spec.Rollout == nil || ln.Spec.Profile != p.Name:
		return "LatencyNode not yet written"
	case ln.Spec.Action == v1alpha1.ActionBaseline:
		return "measuring its baseline; waiting for the rollout"
	case ln.Spec.Action == v1alpha1.ActionRevert:
		return "reverted by the rollout; waiting for it to resume"
	default:
		return "holds revision " + ln.Spec.Revision + "; waiting for the rollout"
	}
}

// sortLines puts the worst nodes first: by state severity, then highest
// p99, then highest throttling, then name.
// It sorts pointers and moves each line once: sort.SliceStable's
// reflective swaps of whole lines, and two lines copied per comparison,
// were a tenth of the manager's CPU during a 1000-node change.
func sortLines(lines []nodeLine) {
	ptrs := make([]*nodeLine, len(lines))
	for i := range lines {
		ptrs[i] = &lines[i]
	}
	slices.SortStableFunc(ptrs, compareLines)
	sorted := make([]nodeLine, len(lines))
	for i, l := range ptrs {
		sorted[i] = *l
	}
	copy(lines, sorted)
}

func compareLines(a, b *nodeLine) int {
	if sa, sb := severity[a.State], severity[b.State]; sa != sb {
		return cmp.Compare(sa, sb)
	}
	if pa, pb := p99(a.RunQueueP99), p99(b.RunQueueP99); pa != pb {
		return cmp.Compare(pb, pa)
	}
	if a.throttled != b.throttled {
		return cmp.Compare(b.throttled, a.throttled)
	}
	return strings.Compare(a.Name, b.Name)
}

// Compute is the profile's status from its node lines, and the number
// of nodes in each state (all of them, where status.nodes is capped).
// Conditions keep their lastTransitionTime from old when their status does
// not change, and take in.Now when it does.
func Compute(old v1alpha1.LatencyProfileStatus, in Input) (v1alpha1.LatencyProfileStatus, map[v1alpha1.ProfileNodeState]int) {
	lines := profileNodeLines(in)
	keepWrittenFigures(lines, old)
	counts := map[v1alpha1.ProfileNodeState]int{}
	for _, l := range lines {
		counts[l.State]++
	}
	sortLines(lines)
	st := v1alpha1.LatencyProfileStatus{ObservedGeneration: in.Profile.Generation, Rollout: in.Rollout}
	tally := countLines(&st, lines)
	st.ContentionHeldBack = int32(contentionPlan(in.Profile, lines).HeldBack)
	for i, l := range lines {
		if i == maxStatusNodes {
			st.NodesOmitted = int32(len(lines) - maxStatusNodes)
			break
		}
		st.Nodes = append(st.Nodes, l.ProfileNodeStatus)
	}
	if !in.Profile.DeletionTimestamp.IsZero() {
		st.WaitingFor = waitingFor(lines)
	}
	if !figures.DurationMoved(old.WorstRunQueueP99, st.WorstRunQueueP99) {
		st.WorstRunQueueP99 = old.WorstRunQueueP99.DeepCopy()
	}
	if !figures.RatioMoved(old.MaxThrottledRatio, st.MaxThrottledRatio) {
		st.MaxThrottledRatio = old.MaxThrottledRatio
	}
	st.Conditions = append([]metav1.Condition(nil), old.Conditions...)
	for _, c := range profileConditions(in.Profile, &st, tally, in.Now) {
		meta.SetStatusCondition(&st.Conditions, c)
	}
	st.Summary = v1alpha1.SummarizeProfile(st)
	return st, counts
}

// keepWrittenFigures gives each line the run-queue p99 and throttled ratio
// old shows for its node unless the node's own figures moved from them by
// figures.Factor: the profile's copies follow the rule the agent writes
// its own by (issue 43), so a node's heartbeat that only carries another
// window of the same wander does not rewrite the profile's status.
func keepWrittenFigures(lines []nodeLine, old v1alpha1.LatencyProfileStatus) {
	written := make(map[string]*v1alpha1.ProfileNodeStatus, len(old.Nodes))
	for i := range old.Nodes {
		written[old.Nodes[i].Name] = &old.Nodes[i]
	}
	for i := range lines {
		w, l := written[lines[i].Name], &lines[i]
		if w == nil {
			continue
		}
		if !figures.DurationMoved(w.RunQueueP99, l.RunQueueP99) {
			l.RunQueueP99 = w.RunQueueP99.DeepCopy()
		}
		if !figures.RatioMoved(w.ThrottledRatio, l.ThrottledRatio) {
			l.ThrottledRatio, l.throttled = w.ThrottledRatio, parseRatio(w.ThrottledRatio)
		}
	}
}

// lineTally holds the counts that are not status fields.
type lineTally struct {
	won, pending, reverting int
}

// countLines fills the counters and worst figures of st from lines.
func countLines(st *v1alpha1.LatencyProfileStatus, lines []nodeLine) lineTally {
	var t lineTally
	maxRatio := -1.0
	for _, l := range lines {
		switch l.State {
		case v1alpha1.NodeStateConflicted:
			st.Conflicted++
		case v1alpha1.NodeStateDegraded, v1alpha1.NodeStateDrifted, v1alpha1.NodeStateUnreachable:
			st.Degraded++
		case v1alpha1.NodeStateStale:
			st.Degraded++
			st.Stale++
		case v1alpha1.NodeStatePending:
			t.pending++
		case v1alpha1.NodeStateReverting:
			t.reverting++
		}
		if !l.won {
			continue
		}
		t.won++
		if l.applied {
			st.Applied++
		}
		if l.outsideBudget {
			st.OutsideBudget++
		}
		if l.reboot {
			st.RebootRequired++
		}
		if l.contended {
			st.Contended++
		}
		if l.tainted {
			st.ContentionTainted++
		}
		st.PodsOutsideBudget += l.podsOutside
		if l.RunQueueP99 != nil && (st.WorstRunQueueP99 == nil || l.RunQueueP99.Duration > st.WorstRunQueueP99.Duration) {
			st.WorstRunQueueP99 = l.RunQueueP99.DeepCopy()
		}
		if l.ThrottledRatio != "" && l.throttled > maxRatio {
			maxRatio, st.MaxThrottledRatio = l.throttled, l.ThrottledRatio
		}
	}
	st.Matched = int32(t.won) + st.Conflicted
	return t
}

// contentionPlan is the contention taint's plan over the nodes the
// profile owns (planner.PlanContentionTaints), as the taint's writer
// (controllers/contention_taint.go) decides it from the same facts; the status pass
// reports how many it holds back.
func contentionPlan(p *v1alpha1.LatencyProfile, lines []nodeLine) planner.ContentionPlan {
	var nodes []planner.ContentionNode
	for _, l := range lines {
		if l.won {
			nodes = append(nodes, planner.ContentionNode{Name: l.Name, Tainted: l.tainted, Contended: l.contended, Since: l.since})
		}
	}
	return planner.PlanContentionTaints(ContentionOf(p), nodes)
}

// ContentionOf is p's contention settings as the taint reads them: none
// for a profile being deleted (its taints come off first).
func ContentionOf(p *v1alpha1.LatencyProfile) *v1alpha1.ContentionSpec {
	if p == nil || !p.DeletionTimestamp.IsZero() || p.Spec.Measurement == nil {
		return nil
	}
	return p.Spec.Measurement.Contention
}

// waitingFor names the nodes a deleted profile still waits to revert.
func waitingFor(lines []nodeLine) []string {
	var names []string
	for _, l := range lines {
		if l.State == v1alpha1.NodeStateReverting {
			names = append(names, l.Name)
		}
	}
	sort.Strings(names)
	if len(names) > maxStatusNodes {
		names = names[:maxStatusNodes]
	}
	return names
}

func p99(d *metav1.Duration) time.Duration {
	if d == nil {
		return -1
	}
	return d.Duration
}

// parseRatio reads an agent's throttled ratio; one that does not parse, or
// is NaN (which compares false with everything and would make the worst-first
// order depend on the cache's iteration order), counts as 0.
func parseRatio(s string) float64 {
	f, _ := ratio.Parse(s)
	return f
}

// Truncate cuts s to maxMessage bytes on a UTF-8 character boundary: a cut
// character would be stored as U+FFFD and never equal the recomputed status.
func Truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
