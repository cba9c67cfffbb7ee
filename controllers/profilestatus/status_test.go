package profilestatus

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/planner"
)

var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

func tnode(name string, lbls map[string]string, ready corev1.ConditionStatus, since time.Duration) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
	if ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(t0.Add(-since)),
		}}
	}
	return n
}

// lnFor is a LatencyNode applying p whose agent reports conds for it.
func lnFor(node string, p *v1alpha1.LatencyProfile, p99 time.Duration, ratio string, conds ...metav1.Condition) *v1alpha1.LatencyNode {
	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: node, Generation: 1}, Spec: applySpec(p)}
	ln.Status = v1alpha1.LatencyNodeStatus{
		ObservedGeneration: 1, Profile: p.Name, ProfileGeneration: p.Generation,
		Conditions: conds, ThrottledRatio: ratio,
	}
	if p99 > 0 {
		ln.Status.RunQueueP99 = &metav1.Duration{Duration: p99}
	}
	return ln
}

func cond(typ string, s metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: reason + " happened"}
}

var (
	applied      = cond(v1alpha1.NodeApplied, metav1.ConditionTrue, v1alpha1.ReasonApplied)
	applyFailed  = cond(v1alpha1.NodeApplied, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed)
	drifted      = cond(v1alpha1.NodeDrifted, metav1.ConditionTrue, v1alpha1.ReasonDriftDetected)
	outOfBudget  = cond(v1alpha1.NodeWithinBudget, metav1.ConditionFalse, v1alpha1.ReasonOutsideBudget)
	needsReboot  = cond(v1alpha1.NodeRebootRequired, metav1.ConditionTrue, v1alpha1.ReasonCmdlineMissingFlags)
	contended    = cond(v1alpha1.NodeRunQueueContention, metav1.ConditionTrue, v1alpha1.ReasonWaitBehindOthers)
	uncontended  = cond(v1alpha1.NodeRunQueueContention, metav1.ConditionFalse, v1alpha1.ReasonBelowThreshold)
	revertedCond = cond(v1alpha1.NodeReverted, metav1.ConditionTrue, v1alpha1.ReasonRevertComplete)
)

var rt = map[string]string{"tier": "rt"}

type statusCase struct {
	name     string
	profile  v1alpha1.LatencyProfile
	others   []v1alpha1.LatencyProfile
	nodes    []corev1.Node
	lns      func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode
	check    func(t *testing.T, st v1alpha1.LatencyProfileStatus)
	wantCond map[string]string // condition type -> "Status/Reason"
	now      time.Time         // the controller's clock; t0 when zero
	rollout  *v1alpha1.RolloutStatus
}

func runStatus(tc statusCase) v1alpha1.LatencyProfileStatus {
	p := tc.profile
	all := append([]v1alpha1.LatencyProfile{p}, tc.others...)
	cands, _ := planner.CompileProfiles(all)
	byName := map[string]*v1alpha1.LatencyNode{}
	if tc.lns != nil {
		for _, ln := range tc.lns(&p) {
			byName[ln.Name] = ln
		}
	}
	now := tc.now
	if now.IsZero() {
		now = t0
	}
	st, _ := Compute(p.Status, Input{
		Profile: &p, Nodes: tc.nodes, Candidates: cands, LatencyNodes: byName,
		Now: now, UnreachableAfter: 5 * time.Minute, Rollout: tc.rollout,
	})
	return st
}

func TestComputeStatus(t *testing.T) {
	deleting := profile("p", 0, rt)
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	cases := []statusCase{{
		name:    "no node matches",
		profile: profile("p", 0, rt),
		nodes:   []corev1.Node{tnode("web", map[string]string{"tier": "web"}, "", 0)},
		check: func(t *testing.T, st v1alpha1.LatencyProfileStatus) {
			expectCounts(t, st, 0, 0, 0, 0)
		},
		wantCond: map[string]string{"Ready": "False/NoNodesMatched", "Progressing": "False/AsExpected", "Degraded": "False/AsExpected"},
	}, {
		name:    "all applied",
		profile: profile("p", 0, rt),
		nodes:   []corev1.Node{tnode("a", rt, corev1.ConditionTrue, time.Hour), tnode("b", rt, "", 0)},
		lns: func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
			return []*v1alpha1.LatencyNode{lnFor("a", p, 0, "", applied), lnFor("b", p, 0, "", applied)}
		},
		check: func(t *testing.T, st v1alpha1.LatencyProfileStatus) {
			expectCounts(t, st, 2, 2, 0, 0)
			if st.ObservedGeneration != 1 {
				t.Errorf("observedGeneration = %d", st.ObservedGeneration)
			}
		},
		wantCond: map[string]string{"Ready": "True/AllNodesApplied", "Progressing": "False/AsExpected", "Degraded": "False/AsExpected"},
	}, {
		name:    "pending: no LatencyNode yet, and one reporting an older generation",
		profile: profile("p", 0, rt),
		nodes:   []corev1.Node{tnode("a", rt, "", 0), tnode("b", rt, "", 0)},
		lns: func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
			old := lnFor("b", p, 0, "", applied)
			old.Status.ObservedGeneration = 0
			return []*v1alpha1.LatencyNode{old}
		},
		check: func(t *testing.T, st v1alpha1.LatencyProfileStatus) {
			expectCounts(t, st, 2, 0, 0, 0)
			expectStates(t, st, "a=Pending", "b=Pending")
		},
		wantCond: map[string]string{"Ready": "False/Applying", "Progressing": "True/Applying", "Degraded": "False/AsExpected"},
	}, {
		name:    "degraded and drifted nodes, worst first",
		profile: profile("p", 0, rt),
		nodes:   []corev1.Node{tnode("ok", rt, "", 0), tnode("failed", rt, "", 0), tnode("drift", rt, "", 0)},
		lns: func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
			return []*v1alpha1.LatencyNode{
				lnFor("ok", p, time.Millisecond, "", applied),
				lnFor("failed", p, 0, "", applyFailed),
				lnFor("drift", p, 0, "", applied, drifted),
			}
		},
		check: func(t *testing.T, st v1alpha1.LatencyProfileStatus) {
			expectCounts(t, st, 3, 2, 2, 0)
			expectStates(t, st, "failed=Degraded", "drift=Drifted", "ok=Applied")
			if st.Nodes[0].Message != "ApplyFailed: ApplyFailed happened" {
				t.Errorf("message = %q", st.Nodes[0].Message)
			}
		},
		wantCond: map[string]string{"Ready": "False/NodesDegraded", "Degraded": "True/NodesDegraded"},
	}, {
		name:    "equal priority conflict on one node",
		profile: profile("p", 3, rt),
		others:  []v1alpha1.LatencyProfile{profile("q", 3, map[string]string{"zone": "z"})},
		nodes:   []corev1.Node{tnode("both", map[string]string{"tier": "rt", "zone": "z"}, "", 0), tnode("mine", rt, "", 0)},
		lns: func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
			return []*v1alpha1.LatencyNode{lnFor("mine", p, 0, "", applied)}
		},
		check: func(t *testing.T, st v1alpha1.LatencyProfileStatus) {
			expectCounts(t, st, 2, 1, 0, 1)
			expectStates(t, st, "both=Conflicted", "mine=Applied")
			if st.Nodes[0].Message != "selected with equal priority by q" {
				t.Errorf("message = %q", st.Nodes[0].Message)
			}
		},
		wantCond: map[string]string{"Ready": "False/NodeConflict", "Degraded": "True/NodeConflict"},
	}, {
		name:    "lost to a higher priority profile: not counted",
		profile: profile("p", 0, rt),
		others:  []v1alpha1.LatencyProfile{profile("q", 9, rt)},
		nodes:   []corev1.Node{tnode("a", rt, "", 0)},
		check: func(t *testing.T, st v1alpha1.LatencyProfileStatus) {
			expectCounts(t, st, 0, 0, 0, 0)
		},
		wantCond: map[string]string{"Ready": "False/NoNodesMatched"},
	}, {
		// After a rollback the node holds the older revision and is
		// Pending for the rollout; its pods still wait behind others, and
		// the profile counts that (the e2e saw contended 0 beside a True
		// condition).
		name:    "contention counted on a node pending on another revision of the profile",
		profile: profile("p", 0, rt),
		nodes:   []corev1.Node{tnode("a", rt, "", 0)},
		lns: func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
			ln := lnFor("a", p, 80*time.Microsecond, "0.002", applied, contended)
			ln.Spec.ProfileGeneration = p.Generation - 1
			ln.Status.ProfileGeneration = p.Generation - 1
			return []*v1alpha1.LatencyNode{ln}
		},
		check: func(t *testing.T, st v1alpha1.LatencyProfileStatus) {
			if len(st.Nodes) != 1 || st.Nodes[0].State != v1alpha1.NodeStatePending {
				t.Fatalf("nodes %+v, want a Pending", st.Nodes)
			}
			if st.Contended != 1 {
				t.Errorf("contended = %d, want 1 (the pending node's RunQueueContention True)", st.Contended)
			}
		},
	}, {
		// The pass that decides a rollback writes its status before it
		// moves the nodes back, so that status still sees every node on
		// the regressed revision. With a one-node fleet (the e2e's) all
		// nodes "held" it and Ready said True/AllNodesApplied beside
		// phase RolledBack until a later pass: CI's e2e read it there.
		name:    "rolled back: Ready False even while every node still holds the regressed revision",
		profile: profile("p", 0, rt),
		nodes:   []corev1.Node{tnode("a", rt, "", 0)},
		lns: func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
			return []*v1alpha1.LatencyNode{lnFor("a", p, 0, "", applied)}
		},
		rollout:  &v1alpha1.RolloutStatus{Revision: "r2", PreviousRevision: "r1", Phase: v1alpha1.RolloutRolledBack, Message: "node a regressed; rolled back 1 node(s) to r1"},
		wantCond: map[string]string{"Ready": "False/RolledBack", "Progressing": "False/RolledBack", "Degraded": "False/AsExpected"},
	}, {
		// Paused with every node on the revision is not a stop that
		// leaves nodes behind: Ready.
		name:    "paused with every node applied: Ready",
		profile: profile("p", 0, rt),
		nodes:   []corev1.Node{tnode("a", rt, "", 0)},
		lns: func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
			return []*v1alpha1.LatencyNode{lnFor("a", p, 0, "", applied)}
		},
		rollout:  &v1alpha1.RolloutStatus{Revision: "r2", Phase: v1alpha1.RolloutPaused, Message: "paused"},
		wantCond: map[string]string{"Ready": "True/AllNodesApplied", "Progressing": "False/Paused"},
	}, {
		name:    "measurements: worst p99, max throttling, budget, reboot, contention",
		profile: profile("p", 0, rt),
		nodes:   []corev1.Node{tnode("a", rt, "", 0), tnode("b", rt, "", 0), tnode("c", rt, "", 0)},
		lns: func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
			return []*v1alpha1.LatencyNode{
				lnFor("a", p, 80*time.Microsecond, "0.002", applied, uncontended),
				lnFor("b", p, 4500*time.Microsecond, "0.01", applied, outOfBudget, contended),
				lnFor("c", p, 200*time.Microsecond, "0.25", applied, needsReboot),
			}
		},
		check: func(t *testing.T, st v1alpha1.LatencyProfileStatus) {
			if st.Contended != 1 {
				t.Errorf("contended = %d, want 1 (b's RunQueueContention True; a's False)", st.Contended)
			}
			if st.WorstRunQueueP99 == nil || st.WorstRunQueueP99.Duration != 4500*time.Microsecond {
				t.Errorf("worst p99 = %v", st.WorstRunQueueP99)
			}
			if st.MaxThrottledRatio != "0.25" {
				t.Errorf("max throttled = %q", st.MaxThrottledRatio)
			}
			if st.OutsideBudget != 1 || st.RebootRequired != 1 {
				t.Errorf("outsideBudget=%d rebootRequired=%d", st.OutsideBudget, st.RebootRequired)
			}
			expectStates(t, st, "b=Applied", "c=Applied", "a=Applied")
		},
		wantCond: map[string]string{"Ready": "True/AllNodesApplied", "Degraded": "True/OutsideBudget"},
	}, {
		// Pods outside their budget are summed over the profile's nodes,
		// also a node pending for a rollout; a stale node's are not (what
		// its agent last said may no longer hold), nor a node lost to
		// another profile's.
		name:    "pods outside their budget",
		profile: profile("p", 0, rt),
		others:  []v1alpha1.LatencyProfile{profile("q", 9, map[string]string{"tier": "rt", "team": "q"})},
		nodes: []corev1.Node{tnode("a", rt, "", 0), tnode("b", rt, "", 0), tnode("c", rt, "", 0), tnode("d", rt, "", 0),
			tnode("e", map[string]string{"tier": "rt", "team": "q"}, "", 0)},
		lns: func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
			outside := func(ln *v1alpha1.LatencyNode, n int32) *v1alpha1.LatencyNode {
				ln.Status.PodBudgets = &v1alpha1.PodBudgetsStatus{Outside: n, Within: 5, Unknown: 1}
				return ln
			}
			pending := outside(lnFor("b", p, 0, "", applied), 1)
			pending.Spec.ProfileGeneration = p.Generation - 1
			pending.Status.ProfileGeneration = p.Generation - 1
			stale := outside(lnFor("c", p, 0, "", applied), 7)
			stale.Status.ReportedAt, stale.Status.HeartbeatInterval = &metav1.Time{Time: t0.Add(-time.Hour)}, &metav1.Duration{Duration: 5 * time.Minute}
			return []*v1alpha1.LatencyNode{outside(lnFor("a", p, 0, "", applied), 2), pending, stale,
				lnFor("d", p, 0, "", applied), outside(lnFor("e", p, 0, "", applied), 4)}
		},
		check: func(t *testing.T, st v1alpha1.LatencyProfileStatus) {
			if st.PodsOutsideBudget != 3 {
				t.Errorf("podsOutsideBudget = %d, want 3 (a's 2 and pending b's 1; not stale c's 7, not e's, q's node)", st.PodsOutsideBudget)
			}
			expectStates(t, st, "c=Stale", "e=Reverting", "b=Pending", "a=Applied", "d=Applied")
		},
	}, {
		// The contention taint's counts: the tainted nodes as they are,
		// the contended ones the cap (25% of 4: one) holds back.
		name: "contention taint: tainted and held back",
		profile: func() v1alpha1.LatencyProfile {
			p := profile("p", 0, rt)
			p.Spec.Measurement = &v1alpha1.MeasurementSpec{Contention: &v1alpha1.ContentionSpec{Taint: v1alpha1.ContentionTaintPreferNoSchedule}}
			return p
		}(),
		nodes: func() []corev1.Node {
			a := tnode("a", rt, "", 0)
			a.Spec.Taints = []corev1.Taint{planner.ContentionTaint}
			return []corev1.Node{a, tnode("b", rt, "", 0), tnode("c", rt, "", 0), tnode("d", rt, "", 0)}
		}(),
		lns: func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
			return []*v1alpha1.LatencyNode{lnFor("a", p, 0, "", applied, contended), lnFor("b", p, 0, "", applied, contended),
				lnFor("c", p, 0, "", applied, contended), lnFor("d", p, 0, "", applied, uncontended)}
		},
		check: func(t *testing.T, st v1alpha1.LatencyProfileStatus) {
			if st.Contended != 3 || st.ContentionTainted != 1 || st.ContentionHeldBack != 2 {
				t.Errorf("contended %d, tainted %d, held back %d; want 3, 1, 2", st.Contended, st.ContentionTainted, st.ContentionHeldBack)
			}
		},
		wantCond: map[string]string{"Ready": "True/AllNodesApplied"},
	}, {
		name:    "unreachable past the timeout",
		profile: profile("p", 0, rt),
		nodes:   []corev1.Node{tnode("down", rt, corev1.ConditionUnknown, time.Hour), tnode("flaky", rt, corev1.ConditionFalse, time.Minute)},
		lns: func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
			return []*v1alpha1.LatencyNode{lnFor("down", p, 0, "", applied), lnFor("flaky", p, 0, "", applied)}
		},
		check: func(t *testing.T, st v1alpha1.LatencyProfileStatus) {
			expectStates(t, st, "down=Unreachable", "flaky=Applied")
			expectCounts(t, st, 2, 1, 1, 0)
		},
		wantCond: map[string]string{"Degraded": "True/NodesDegraded"},
	}, {
		name:    "deletion waits for reverting nodes, not for reverted ones",
		profile: deleting,
		nodes:   []corev1.Node{tnode("a", rt, "", 0), tnode("b", rt, "", 0)},
		lns: func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
			a := lnFor("a", p, 0, "", applied)
			a.Spec.Action = v1alpha1.ActionRevert
			b := lnFor("b", p, 0, "", revertedCond)
			b.Spec.Action = v1alpha1.ActionRevert
			gone := lnFor("gone", p, 0, "", applied)
			return []*v1alpha1.LatencyNode{a, b, gone}
		},
		check: func(t *testing.T, st v1alpha1.LatencyProfileStatus) {
			if !reflect.DeepEqual(st.WaitingFor, []string{"a", "gone"}) {
				t.Errorf("waitingFor = %v", st.WaitingFor)
			}
			expectStates(t, st, "a=Reverting", "gone=Reverting", "b=Reverted")
		},
		wantCond: map[string]string{"Ready": "False/Reverting", "Progressing": "True/Reverting"},
	}, {
		name:    "stale: silent for more than two heartbeats; an older agent (no heartbeat) and a recent report are not",
		profile: profile("p", 0, rt),
		nodes:   []corev1.Node{tnode("silent", rt, "", 0), tnode("old-agent", rt, "", 0), tnode("recent", rt, "", 0)},
		lns: func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
			silent, old, recent := lnFor("silent", p, 0, "", applied), lnFor("old-agent", p, 0, "", applied), lnFor("recent", p, 0, "", applied)
			silent.Status.ReportedAt, silent.Status.HeartbeatInterval = &metav1.Time{Time: t0.Add(-11 * time.Minute)}, &metav1.Duration{Duration: 5 * time.Minute}
			old.Status.ReportedAt = &metav1.Time{Time: t0.Add(-time.Hour)}
			recent.Status.ReportedAt, recent.Status.HeartbeatInterval = &metav1.Time{Time: t0.Add(-9 * time.Minute)}, &metav1.Duration{Duration: 5 * time.Minute}
			return []*v1alpha1.LatencyNode{silent, old, recent}
		},
		check: func(t *testing.T, st v1alpha1.LatencyProfileStatus) {
			expectCounts(t, st, 3, 2, 1, 0)
			if st.Stale != 1 {
				t.Errorf("stale = %d, want 1", st.Stale)
			}
			expectStates(t, st, "silent=Stale", "old-agent=Applied", "recent=Applied")
			if !strings.Contains(st.Nodes[0].Message, "no report since 2026-11-30T07:49:00Z (heartbeat 5m0s)") {
				t.Errorf("stale message %q", st.Nodes[0].Message)
			}
		},
		wantCond: map[string]string{"Ready": "False/StaleReports", "Degraded": "True/StaleReports"},
	}, {
		name:    "stale next to a failed node: Degraded names both",
		profile: profile("p", 0, rt),
		nodes:   []corev1.Node{tnode("silent", rt, "", 0), tnode("failed", rt, "", 0)},
		lns: func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
			silent := lnFor("silent", p, 0, "", drifted)
			silent.Status.ReportedAt, silent.Status.HeartbeatInterval = &metav1.Time{Time: t0.Add(-time.Minute)}, &metav1.Duration{Duration: 30 * time.Second}
			return []*v1alpha1.LatencyNode{silent, lnFor("failed", p, 0, "", applyFailed)}
		},
		check: func(t *testing.T, st v1alpha1.LatencyProfileStatus) {
			expectCounts(t, st, 2, 0, 2, 0)
			expectStates(t, st, "failed=Degraded", "silent=Stale")
			if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ProfileDegraded); c == nil || !strings.Contains(c.Message, "1 node(s) stale") {
				t.Errorf("Degraded = %+v, want it to count the stale node", c)
			}
		},
		wantCond: map[string]string{"Ready": "False/NodesDegraded", "Degraded": "True/NodesDegraded"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := runStatus(tc)
			if tc.check != nil {
				tc.check(t, st)
			}
			for typ, want := range tc.wantCond {
				c := meta.FindStatusCondition(st.Conditions, typ)
				if c == nil {
					t.Errorf("condition %s missing", typ)
					continue
				}
				if got := string(c.Status) + "/" + c.Reason; got != want {
					t.Errorf("condition %s = %s, want %s (%s)", typ, got, want, c.Message)
				}
			}
		})
	}
}

func TestComputeStatusBoundsNodeList(t *testing.T) {
	p := profile("p", 0, rt)
	var nodes []corev1.Node
	lns := map[string]*v1alpha1.LatencyNode{}
	for i := range 40 {
		name := fmt.Sprintf("n%02d", i)
		nodes = append(nodes, tnode(name, rt, "", 0))
		lns[name] = lnFor(name, &p, time.Duration(i+1)*time.Microsecond, "", applied)
	}
	cands, _ := planner.CompileProfiles([]v1alpha1.LatencyProfile{p})
	st, counts := Compute(p.Status, Input{Profile: &p, Nodes: nodes, Candidates: cands, LatencyNodes: lns, Now: t0, UnreachableAfter: time.Minute})
	if len(st.Nodes) != maxStatusNodes || st.NodesOmitted != 8 {
		t.Fatalf("nodes listed %d, omitted %d; want %d and 8", len(st.Nodes), st.NodesOmitted, maxStatusNodes)
	}
	if st.Nodes[0].Name != "n39" || st.Nodes[31].Name != "n08" {
		t.Fatalf("list not worst first: first %s, last %s", st.Nodes[0].Name, st.Nodes[31].Name)
	}
	if counts[v1alpha1.NodeStateApplied] != 40 || st.Applied != 40 || st.Matched != 40 {
		t.Fatalf("counts %v applied %d matched %d, want all 40", counts, st.Applied, st.Matched)
	}
}

// TestComputeStatusIsStable: recomputing from an unchanged world gives the
// same status (same condition times), so a resync writes nothing.
func TestComputeStatusIsStable(t *testing.T) {
	tc := statusCase{
		profile: profile("p", 0, rt),
		nodes:   []corev1.Node{tnode("a", rt, "", 0), tnode("b", rt, "", 0)},
		lns: func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
			return []*v1alpha1.LatencyNode{lnFor("a", p, time.Millisecond, "0.1", applied)}
		},
	}
	first := runStatus(tc)
	tc.profile.Status = first
	tc.now = t0.Add(time.Hour) // the clock moved on; nothing else did
	second := runStatus(tc)
	if !equality.Semantic.DeepEqual(first, second) {
		t.Fatalf("status changed on recompute:\n%+v\n%+v", first, second)
	}
}

// TestProfileConditionsUseTheInjectedClock: a condition that changes status
// takes its lastTransitionTime from the controller's clock, not the wall
// clock, and one that keeps its status keeps its time.
func TestProfileConditionsUseTheInjectedClock(t *testing.T) {
	tc := statusCase{
		profile: profile("p", 0, rt),
		nodes:   []corev1.Node{tnode("a", rt, "", 0)},
		lns: func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
			return []*v1alpha1.LatencyNode{lnFor("a", p, time.Millisecond, "0.1")}
		},
	}
	first := runStatus(tc)
	for _, c := range first.Conditions {
		if !c.LastTransitionTime.Time.Equal(t0) {
			t.Fatalf("%s lastTransitionTime = %v, want the injected %v", c.Type, c.LastTransitionTime.Time, t0)
		}
	}
	later := t0.Add(time.Hour)
	tc.profile.Status, tc.now = first, later
	tc.lns = func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
		return []*v1alpha1.LatencyNode{lnFor("a", p, time.Millisecond, "0.1", applied)}
	}
	second := runStatus(tc)
	want := map[string]time.Time{v1alpha1.ProfileReady: later, v1alpha1.ProfileProgressing: later, v1alpha1.ProfileDegraded: t0}
	for typ, at := range want {
		c := meta.FindStatusCondition(second.Conditions, typ)
		if c == nil || !c.LastTransitionTime.Time.Equal(at) {
			t.Errorf("%s after the node applied = %+v, want lastTransitionTime %v", typ, c, at)
		}
	}
}

func expectCounts(t *testing.T, st v1alpha1.LatencyProfileStatus, matched, applied, degraded, conflicted int32) {
	t.Helper()
	if st.Matched != matched || st.Applied != applied || st.Degraded != degraded || st.Conflicted != conflicted {
		t.Errorf("matched/applied/degraded/conflicted = %d/%d/%d/%d, want %d/%d/%d/%d",
			st.Matched, st.Applied, st.Degraded, st.Conflicted, matched, applied, degraded, conflicted)
	}
}

func expectStates(t *testing.T, st v1alpha1.LatencyProfileStatus, want ...string) {
	t.Helper()
	var got []string
	for _, n := range st.Nodes {
		got = append(got, n.Name+"="+string(n.State))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("nodes = %v, want %v", got, want)
	}
}

// TestComputeStatusOrderIgnoresInputOrder: the node list comes from an
// informer cache (map order), so the status must not depend on it, even
// when an agent reports a ratio that is not a finite number.
func TestComputeStatusOrderIgnoresInputOrder(t *testing.T) {
	p := profile("p", 0, rt)
	names := []string{"a", "b", "c", "d"}
	ratios := map[string]string{"a": "NaN", "b": "0.5000", "c": "+Inf", "d": "0.2000"}
	lns := map[string]*v1alpha1.LatencyNode{}
	for _, n := range names {
		lns[n] = lnFor(n, &p, time.Millisecond, ratios[n], applied)
	}
	cands, _ := planner.CompileProfiles([]v1alpha1.LatencyProfile{p})
	var first []v1alpha1.ProfileNodeStatus
	for _, perm := range [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {1, 3, 0, 2}, {2, 0, 3, 1}, {0, 2, 1, 3}, {3, 0, 2, 1}} {
		var nodes []corev1.Node
		for _, i := range perm {
			nodes = append(nodes, tnode(names[i], rt, "", 0))
		}
		st, _ := Compute(p.Status, Input{Profile: &p, Nodes: nodes, Candidates: cands, LatencyNodes: lns, Now: t0, UnreachableAfter: time.Minute})
		if first == nil {
			first = st.Nodes
			continue
		}
		if !reflect.DeepEqual(st.Nodes, first) {
			t.Fatalf("node order depends on input order %v:\n%v\n%v", perm, st.Nodes, first)
		}
	}
}

// TestTruncateKeepsUTF8: a long agent message in a multi-byte script is cut
// on a character boundary; invalid UTF-8 would come back from the API server
// as U+FFFD and differ from the recomputed status on every resync.
func TestTruncateKeepsUTF8(t *testing.T) {
	msg := strings.Repeat("调度延迟", 100) // 1200 bytes
	for _, prefix := range []string{"", "a", "ab"} {
		got := Truncate(prefix + msg)
		if !utf8.ValidString(got) || len(got) > maxMessage || !strings.HasSuffix(got, "...") {
			t.Fatalf("truncate(%q+...) = %d bytes, valid UTF-8 %v", prefix, len(got), utf8.ValidString(got))
		}
	}
}

// TestStaleRecheck: the profile is requeued for the moment its first node
// turns stale; nodes already stale, or with no heartbeat, ask for nothing.
func TestStaleRecheck(t *testing.T) {
	p := profile("p", 0, rt)
	at := func(name string, ago, hb time.Duration) *v1alpha1.LatencyNode {
		ln := lnFor(name, &p, 0, "", applied)
		ln.Status.ReportedAt = &metav1.Time{Time: t0.Add(-ago)}
		if hb > 0 {
			ln.Status.HeartbeatInterval = &metav1.Duration{Duration: hb}
		}
		return ln
	}
	in := Input{Profile: &p, Now: t0, LatencyNodes: map[string]*v1alpha1.LatencyNode{
		"soon": at("soon", 50*time.Second, 30*time.Second), "later": at("later", 0, time.Minute),
		"already": at("already", time.Hour, time.Second), "no-heartbeat": at("no-heartbeat", time.Hour, 0),
	}}
	if got := StaleRecheck(in); got != 10*time.Second {
		t.Fatalf("staleRecheck = %s, want 10s (soon: reported 50s ago, heartbeat 30s)", got)
	}
}

// TestComputeStatusKeepsWanderingFigures (issue 43): a node whose
// heartbeat carries another window of the same wander (p99 1 ms → 1.6 ms,
// throttled 0.1 → 0.15) leaves the profile's copies as written, so the
// profile's status is not rewritten; a doubling is copied at once.
func TestComputeStatusKeepsWanderingFigures(t *testing.T) {
	tc := statusCase{
		profile: profile("p", 0, rt),
		nodes:   []corev1.Node{tnode("a", rt, "", 0)},
		lns: func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
			return []*v1alpha1.LatencyNode{lnFor("a", p, time.Millisecond, "0.1", applied)}
		},
	}
	first := runStatus(tc)
	tc.profile.Status = first
	tc.lns = func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
		return []*v1alpha1.LatencyNode{lnFor("a", p, 1600*time.Microsecond, "0.15", applied)}
	}
	if second := runStatus(tc); !equality.Semantic.DeepEqual(first, second) {
		t.Errorf("wander rewrote the status:\n%+v\n%+v", first, second)
	}
	tc.lns = func(p *v1alpha1.LatencyProfile) []*v1alpha1.LatencyNode {
		return []*v1alpha1.LatencyNode{lnFor("a", p, 2*time.Millisecond, "0.2", applied)}
	}
	third := runStatus(tc)
	if p99 := third.Nodes[0].RunQueueP99; p99 == nil || p99.Duration != 2*time.Millisecond ||
		third.WorstRunQueueP99.Duration != 2*time.Millisecond || third.MaxThrottledRatio != "0.2" || third.Nodes[0].ThrottledRatio != "0.2" {
		t.Errorf("a doubling not copied: node %+v, worst %v, max throttled %s", third.Nodes[0], third.WorstRunQueueP99, third.MaxThrottledRatio)
	}
}
