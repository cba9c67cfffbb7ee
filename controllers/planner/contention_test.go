package planner

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// The contention taint's golden sequences: a profile's nodes as the
// writer reads them, an event, the plan, and the taints after the writer
// carried it out, step by step. The cap holds after every step.

// fleet is a profile's nodes: which are contended since when, which are
// tainted, and the profile's contention settings.
type fleet struct {
	contention *v1alpha1.ContentionSpec
	nodes      []string
	since      map[string]time.Time // contended nodes
	tainted    map[string]bool
	now        time.Time
}

func newFleet(n int, contention *v1alpha1.ContentionSpec) *fleet {
	f := &fleet{contention: contention, since: map[string]time.Time{}, tainted: map[string]bool{}, now: goldenT0}
	for i := range n {
		f.nodes = append(f.nodes, fmt.Sprintf("n%02d", i))
	}
	return f
}

func (f *fleet) input() []ContentionNode {
	var out []ContentionNode
	for _, n := range f.nodes {
		since, contended := f.since[n]
		out = append(out, ContentionNode{Name: n, Tainted: f.tainted[n], Contended: contended, Since: since})
	}
	return out
}

// apply is the writer carrying out plan; a taint on a node the fleet no
// longer holds stays (another pass's business).
func (f *fleet) apply(plan ContentionPlan) {
	for _, n := range plan.Untaint {
		delete(f.tainted, n)
	}
	for _, n := range plan.Taint {
		f.tainted[n] = true
	}
}

func (f *fleet) taintedNames() string {
	var out []string
	for _, n := range f.nodes {
		if f.tainted[n] {
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}

// The events.
func contended(names ...string) func(*fleet) {
	return func(f *fleet) {
		for _, n := range names {
			f.now = f.now.Add(time.Minute)
			f.since[n] = f.now
		}
	}
}

func quiet(names ...string) func(*fleet) {
	return func(f *fleet) {
		for _, n := range names {
			delete(f.since, n)
		}
	}
}

func optIn(pct int32) func(*fleet) {
	return func(f *fleet) {
		f.contention = &v1alpha1.ContentionSpec{Taint: v1alpha1.ContentionTaintPreferNoSchedule, MaxTaintedPercent: pct}
	}
}

func optOut(f *fleet) { f.contention = &v1alpha1.ContentionSpec{Taint: v1alpha1.ContentionTaintNone} }

// profileGone: the profile is deleted (the writer plans with nil).
func profileGone(f *fleet) { f.contention = nil }

// leaves: node n leaves the profile; it is another pass's (the "" pass
// plans it with nil and untaints it).
func leaves(n string) func(*fleet) {
	return func(f *fleet) {
		f.nodes = slices.DeleteFunc(f.nodes, func(m string) bool { return m == n })
		plan := PlanContentionTaints(nil, []ContentionNode{{Name: n, Tainted: f.tainted[n]}})
		f.apply(plan)
	}
}

func joins(n string) func(*fleet) {
	return func(f *fleet) { f.nodes = append(f.nodes, n) }
}

// joinsContended: node n joins the profile contended since an hour before
// the fleet's start, longer than any node of the profile.
func joinsContended(n string) func(*fleet) {
	return func(f *fleet) {
		f.nodes = append(f.nodes, n)
		f.since[n] = goldenT0.Add(-time.Hour)
	}
}

// contentionStep is one row: the event, then the tainted nodes, the taints
// written and the contended nodes held back after the writer's pass.
type contentionStep struct {
	what     string
	event    func(*fleet)
	tainted  string // after the pass, by name
	taint    string // the plan's Taint
	untaint  string // the plan's Untaint
	heldBack int
}

func runContention(t *testing.T, f *fleet, steps []contentionStep) {
	t.Helper()
	for i, s := range steps {
		s.event(f)
		plan := PlanContentionTaints(f.contention, f.input())
		f.apply(plan)
		got := fmt.Sprintf("taint [%s] untaint [%s] tainted [%s] held back %d",
			strings.Join(plan.Taint, ","), strings.Join(plan.Untaint, ","), f.taintedNames(), plan.HeldBack)
		want := fmt.Sprintf("taint [%s] untaint [%s] tainted [%s] held back %d", s.taint, s.untaint, s.tainted, s.heldBack)
		if got != want {
			t.Errorf("step %d (%s):\n got %s\nwant %s", i, s.what, got, want)
		}
		if n := len(strings.Split(f.taintedNames(), ",")); f.taintedNames() != "" && n > plan.Cap {
			t.Errorf("step %d (%s): %d nodes tainted, over the cap %d", i, s.what, n, plan.Cap)
		}
		// A second pass over what the first wrote changes nothing.
		if again := PlanContentionTaints(f.contention, f.input()); len(again.Taint)+len(again.Untaint) > 0 {
			t.Errorf("step %d (%s): a second pass writes again: %+v", i, s.what, again)
		}
	}
}

// TestGoldenContentionTaintOptIn: without the opt-in no node is tainted,
// however contended; with it the contended node is, and the taint follows
// the condition off, and comes off when the opt-in goes.
func TestGoldenContentionTaintOptIn(t *testing.T) {
	runContention(t, newFleet(4, nil), []contentionStep{
		{what: "contended, no contention settings", event: contended("n01")},
		{what: "taint None", event: optOut},
		{what: "opt in", event: optIn(0), taint: "n01", tainted: "n01"},
		{what: "condition False", event: quiet("n01"), untaint: "n01"},
		{what: "contended again", event: contended("n02"), taint: "n02", tainted: "n02"},
		{what: "opt-in removed", event: optOut, untaint: "n02"},
	})
}

// TestGoldenContentionTaintCap: at the default 25% of 8 nodes two may be
// tainted; a third contended node is held back, the first two keep the
// taint even beside a node contended longer than they (the taint does not
// move from node to node), and the longest waiting is tainted once one of
// them clears.
func TestGoldenContentionTaintCap(t *testing.T) {
	runContention(t, newFleet(8, nil), []contentionStep{
		{what: "opt in, default 25%", event: optIn(0)},
		{what: "two contended", event: contended("n05", "n03"), taint: "n05,n03", tainted: "n03,n05"},
		{what: "a third", event: contended("n01"), tainted: "n03,n05", heldBack: 1},
		{what: "a fourth", event: contended("n00"), tainted: "n03,n05", heldBack: 2},
		{what: "one joins contended longer than all: 9 nodes, still 2", event: joinsContended("n09"), tainted: "n03,n05", heldBack: 3},
		{what: "it clears", event: quiet("n09"), tainted: "n03,n05", heldBack: 2},
		{what: "one clears: the longest waiting goes in", event: quiet("n05"), untaint: "n05", taint: "n01", tainted: "n01,n03", heldBack: 1},
		{what: "all clear", event: quiet("n00", "n01", "n03"), untaint: "n01,n03"},
	})
}

// TestGoldenContentionTaintAtLeastOne: 25% of three nodes rounds down to
// none, and one is allowed anyway; 100% taints every contended node.
func TestGoldenContentionTaintAtLeastOne(t *testing.T) {
	runContention(t, newFleet(3, nil), []contentionStep{
		{what: "opt in", event: optIn(25)},
		{what: "two contended", event: contended("n02", "n00"), taint: "n02", tainted: "n02", heldBack: 1},
		{what: "100%", event: optIn(100), taint: "n00", tainted: "n00,n02"},
	})
}

// TestGoldenContentionTaintCapShrinks: the cap holds when it shrinks under
// the tainted nodes (lower percent, fewer nodes): the most recently
// contended lose the taint.
func TestGoldenContentionTaintCapShrinks(t *testing.T) {
	runContention(t, newFleet(4, nil), []contentionStep{
		{what: "opt in 50%", event: optIn(50)},
		{what: "three contended", event: contended("n00", "n01", "n02"), taint: "n00,n01", tainted: "n00,n01", heldBack: 1},
		{what: "25%", event: optIn(25), untaint: "n01", tainted: "n00", heldBack: 2},
		{what: "50% again", event: optIn(50), taint: "n01", tainted: "n00,n01", heldBack: 1},
		{what: "a node joins: 5 nodes, 50% is 2", event: joins("n09"), tainted: "n00,n01", heldBack: 1},
		{what: "a tainted node leaves", event: leaves("n00"), taint: "n02", tainted: "n01,n02"},
	})
}

// TestGoldenContentionTaintProfileGone: a deleted profile (or one being
// deleted) plans with no settings: every taint comes off.
func TestGoldenContentionTaintProfileGone(t *testing.T) {
	runContention(t, newFleet(2, nil), []contentionStep{
		{what: "opt in 100%", event: optIn(100)},
		{what: "both contended", event: contended("n00", "n01"), taint: "n00,n01", tainted: "n00,n01"},
		{what: "profile deleted", event: profileGone, untaint: "n00,n01"},
	})
}

// TestContentionTaintStableOrder: the same input plans the same nodes
// whatever order the nodes were listed in; ties in time go by name.
func TestContentionTaintStableOrder(t *testing.T) {
	spec := &v1alpha1.ContentionSpec{Taint: v1alpha1.ContentionTaintPreferNoSchedule, MaxTaintedPercent: 25}
	in := []ContentionNode{
		{Name: "d", Contended: true, Since: goldenT0},
		{Name: "c", Contended: true, Since: goldenT0},
		{Name: "b", Contended: true, Since: goldenT0.Add(-time.Hour)},
		{Name: "a", Contended: false, Tainted: true},
		{Name: "e"}, {Name: "f"}, {Name: "g"}, {Name: "h"},
	}
	want := PlanContentionTaints(spec, in)
	if got := strings.Join(want.Keep, ","); got != "b,c" || want.HeldBack != 1 || !slices.Equal(want.Untaint, []string{"a"}) {
		t.Fatalf("kept %s, want the longest contended then by name", got)
	}
	for i := range 20 {
		shuffled := slices.Clone(in)
		slices.Reverse(shuffled)
		shuffled = append(shuffled[i%len(shuffled):], shuffled[:i%len(shuffled)]...)
		got := PlanContentionTaints(spec, shuffled)
		if !slices.Equal(got.Taint, want.Taint) || !slices.Equal(got.Untaint, want.Untaint) || got.HeldBack != want.HeldBack {
			t.Fatalf("rotation %d planned %+v, want %+v", i, got, want)
		}
	}
}

// TestContendedFor: only a True condition reported for the profile the
// LatencyNode asks for counts.
func TestContendedFor(t *testing.T) {
	at := metav1.NewTime(goldenT0)
	ln := func(spec, status string, st metav1.ConditionStatus) *v1alpha1.LatencyNode {
		l := &v1alpha1.LatencyNode{Spec: v1alpha1.LatencyNodeSpec{Profile: spec}}
		l.Status.Profile = status
		if st != "" {
			l.Status.Conditions = []metav1.Condition{{Type: v1alpha1.NodeRunQueueContention, Status: st, LastTransitionTime: at}}
		}
		return l
	}
	for _, c := range []struct {
		name string
		ln   *v1alpha1.LatencyNode
		want bool
	}{
		{"none", nil, false},
		{"True", ln("p", "p", metav1.ConditionTrue), true},
		{"False", ln("p", "p", metav1.ConditionFalse), false},
		{"Unknown", ln("p", "p", metav1.ConditionUnknown), false},
		{"absent", ln("p", "p", ""), false},
		{"reported for another profile", ln("p", "q", metav1.ConditionTrue), false},
		{"asks for another profile", ln("q", "p", metav1.ConditionTrue), false},
	} {
		got, since := ContendedFor(c.ln, "p")
		if got != c.want || (got && !since.Equal(goldenT0)) {
			t.Errorf("%s: contended %v since %v, want %v", c.name, got, since, c.want)
		}
	}
}

// TestNodeTuningLeavesOutTheTaint: the taint settings are not the node's:
// the tuning a node gets and the revision are the same with and without
// them, and the profile is not changed.
func TestNodeTuningLeavesOutTheTaint(t *testing.T) {
	plain := v1alpha1.TuningSpec{Measurement: &v1alpha1.MeasurementSpec{Contention: &v1alpha1.ContentionSpec{RaiseAfterWindows: 4}}}
	opted := *plain.DeepCopy()
	opted.Measurement.Contention.Taint = v1alpha1.ContentionTaintPreferNoSchedule
	opted.Measurement.Contention.MaxTaintedPercent = 50
	got := NodeTuning(&opted)
	if got.Measurement.Contention.Taint != "" || got.Measurement.Contention.MaxTaintedPercent != 0 || got.Measurement.Contention.RaiseAfterWindows != 4 {
		t.Fatalf("node tuning %+v", got.Measurement.Contention)
	}
	if opted.Measurement.Contention.Taint == "" {
		t.Fatal("NodeTuning changed the profile's spec")
	}
	p := func(t v1alpha1.TuningSpec) *v1alpha1.LatencyProfile {
		return &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "edge"}, Spec: v1alpha1.LatencyProfileSpec{TuningSpec: t}}
	}
	if a, b := CurrentRevision(p(plain)), CurrentRevision(p(opted)); a != b {
		t.Fatalf("the opt-in changed the revision: %s, %s", a, b)
	}
	if a, b := CurrentRevision(p(plain)), RevisionName("edge", &plain); a != b {
		t.Fatalf("revision of a profile without the opt-in moved: %s, %s", a, b)
	}
}
