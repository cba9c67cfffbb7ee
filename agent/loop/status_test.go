package loop

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/journal"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func node(gen int64, isolated *string) *v1alpha1.LatencyNode {
	ln := &v1alpha1.LatencyNode{Spec: v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionApply, Profile: "gw", ProfileGeneration: 3}}
	ln.Generation = gen
	if isolated != nil {
		r := "0"
		ln.Spec.Tuning.CPUs = &v1alpha1.CPUSpec{Reserved: &r, Isolated: isolated}
	}
	return ln
}

func res(id string, s v1alpha1.SettingState) v1alpha1.SettingResult {
	return v1alpha1.SettingResult{Setting: id, State: s}
}

func TestApplyStatusConditions(t *testing.T) {
	one := "1"
	now := metav1.NewTime(time.Unix(1000, 0))
	cases := []struct {
		name                       string
		in                         applyInput
		applied, drifted, reboot   metav1.ConditionStatus
		appliedReason, driftReason string
		observed                   int64
	}{
		{name: "all applied", in: applyInput{Node: node(2, nil), Report: apply.Report{Written: 2,
			Results: []v1alpha1.SettingResult{res("a", v1alpha1.SettingApplied)}},
			Results: []v1alpha1.SettingResult{res("b", v1alpha1.SettingUnsupported)}},
			applied: metav1.ConditionTrue, appliedReason: v1alpha1.ReasonApplied, drifted: metav1.ConditionFalse,
			driftReason: v1alpha1.ReasonNoDrift, reboot: metav1.ConditionFalse, observed: 2},
		{name: "immovable IRQ still counts as applied", in: applyInput{Node: node(2, nil), Report: apply.Report{
			Results: []v1alpha1.SettingResult{res("irq/36", v1alpha1.SettingImmovable)}}},
			applied: metav1.ConditionTrue, appliedReason: v1alpha1.ReasonApplied, drifted: metav1.ConditionFalse,
			driftReason: v1alpha1.ReasonNoDrift, reboot: metav1.ConditionFalse, observed: 2},
		{name: "invalid value: partially applied", in: applyInput{Node: node(2, nil), Report: apply.Report{
			Results: []v1alpha1.SettingResult{res("a", v1alpha1.SettingApplied), res("b", v1alpha1.SettingInvalid)}}},
			applied: metav1.ConditionFalse, appliedReason: v1alpha1.ReasonPartiallyApplied, drifted: metav1.ConditionFalse,
			driftReason: v1alpha1.ReasonNoDrift, reboot: metav1.ConditionFalse, observed: 2},
		{name: "drift", in: applyInput{Node: node(2, nil), IRQBalancePID: 77, Report: apply.Report{
			Drifts: []apply.Drift{{ID: "irq/24", Ours: "0", Theirs: "0-1"}}}},
			applied: metav1.ConditionTrue, appliedReason: v1alpha1.ReasonApplied, drifted: metav1.ConditionTrue,
			driftReason: v1alpha1.ReasonDriftDetected, reboot: metav1.ConditionFalse, observed: 2},
		{name: "corrupt journal: nothing applied, generation not observed", in: applyInput{Node: node(2, nil),
			Err: fmt.Errorf("load: %w", journal.ErrCorrupt)},
			applied: metav1.ConditionFalse, appliedReason: v1alpha1.ReasonJournalCorrupt, drifted: metav1.ConditionFalse,
			driftReason: v1alpha1.ReasonNoDrift, reboot: metav1.ConditionFalse, observed: 0},
		{name: "isolated CPUs without cmdline flags", in: applyInput{Node: node(2, &one),
			Kernel: v1alpha1.KernelFacts{CmdlineIsolation: []string{"isolcpus=1"}}},
			applied: metav1.ConditionTrue, appliedReason: v1alpha1.ReasonApplied, drifted: metav1.ConditionFalse,
			driftReason: v1alpha1.ReasonNoDrift, reboot: metav1.ConditionTrue, observed: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = now
			st := applyStatus(v1alpha1.LatencyNodeStatus{}, tc.in)
			check := func(typ string, want metav1.ConditionStatus, reason string) {
				c := meta.FindStatusCondition(st.Conditions, typ)
				if c == nil || c.Status != want || (reason != "" && c.Reason != reason) {
					t.Errorf("%s = %+v, want %s %s", typ, c, want, reason)
				}
			}
			check(v1alpha1.NodeApplied, tc.applied, tc.appliedReason)
			check(v1alpha1.NodeDrifted, tc.drifted, tc.driftReason)
			check(v1alpha1.NodeRebootRequired, tc.reboot, "")
			if st.ObservedGeneration != tc.observed {
				t.Errorf("observedGeneration = %d, want %d", st.ObservedGeneration, tc.observed)
			}
		})
	}
}

// Applying the same outcome twice gives an identical status: the loop only
// patches when something changed.
func TestApplyStatusIsStable(t *testing.T) {
	in := applyInput{Node: node(1, nil), Report: apply.Report{Written: 1,
		Results: []v1alpha1.SettingResult{res("a", v1alpha1.SettingApplied)}}, Now: metav1.NewTime(time.Unix(1000, 0))}
	first := applyStatus(v1alpha1.LatencyNodeStatus{}, in)
	in.Report.Written = 0
	in.Now = metav1.NewTime(time.Unix(2000, 0))
	second := applyStatus(first, in)
	if !equalStatus(first, second) {
		t.Fatalf("status changed without a change:\n%+v\n%+v", first, second)
	}
}

func TestRevertStatus(t *testing.T) {
	now := metav1.NewTime(time.Unix(1000, 0))
	cases := []struct {
		name   string
		rep    apply.Report
		err    error
		status metav1.ConditionStatus
		reason string
	}{
		{"complete", apply.Report{Written: 2, Results: []v1alpha1.SettingResult{res("a", v1alpha1.SettingReverted)}}, nil,
			metav1.ConditionTrue, v1alpha1.ReasonRevertComplete},
		{"conflict", apply.Report{Results: []v1alpha1.SettingResult{res("a", v1alpha1.SettingConflict)}}, nil,
			metav1.ConditionTrue, v1alpha1.ReasonRevertConflict},
		{"failed restore", apply.Report{Results: []v1alpha1.SettingResult{res("a", v1alpha1.SettingFailed)}}, nil,
			metav1.ConditionFalse, v1alpha1.ReasonReverting},
		{"corrupt", apply.Report{}, fmt.Errorf("x: %w", journal.ErrCorrupt), metav1.ConditionFalse, v1alpha1.ReasonJournalCorrupt},
		{"error", apply.Report{}, errors.New("boom"), metav1.ConditionFalse, v1alpha1.ReasonReverting},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := revertStatus(v1alpha1.LatencyNodeStatus{Profile: "gw"}, revertInput{Node: node(4, nil), Report: tc.rep, Err: tc.err, Now: now})
			c := meta.FindStatusCondition(st.Conditions, v1alpha1.NodeReverted)
			if c == nil || c.Status != tc.status || c.Reason != tc.reason {
				t.Fatalf("Reverted = %+v, want %s %s", c, tc.status, tc.reason)
			}
			if (tc.status == metav1.ConditionTrue) != (st.Profile == "") {
				t.Errorf("profile = %q with Reverted %s", st.Profile, tc.status)
			}
		})
	}
}

func TestCulprit(t *testing.T) {
	if got := culprit("irq/24", 77); got != "irqbalance, pid 77" {
		t.Errorf("culprit = %q", got)
	}
	if got := culprit("rtsched/ns/p/uid/12@34", 0); strings.Contains(got, "sysctl") || !strings.Contains(got, "pod") {
		t.Errorf("a thread policy's culprit = %q, want the pod, not a sysctl writer", got)
	}
	if got := culprit("cpuquota/ns/p", 0); got != "kubelet or the container runtime" {
		t.Errorf("culprit = %q", got)
	}
}

// The resync after a revert finds no journal: it must neither rewrite status
// nor erase the conflicts the revert reported (setting, ours, theirs).
func TestRevertStatusIsStable(t *testing.T) {
	conflict := v1alpha1.SettingResult{Setting: "scheduler/rtRuntime", Desired: "950000", Actual: "990000",
		State: v1alpha1.SettingConflict, Message: "changed by someone else"}
	in := revertInput{Node: node(4, nil), Report: apply.Report{Written: 1,
		Results: []v1alpha1.SettingResult{res("a", v1alpha1.SettingReverted), conflict}}, Now: metav1.NewTime(time.Unix(1000, 0))}
	first := revertStatus(v1alpha1.LatencyNodeStatus{Profile: "gw"}, in)
	second := revertStatus(first, revertInput{Node: node(4, nil), Now: metav1.NewTime(time.Unix(2000, 0))})
	if !equalStatus(first, second) {
		t.Fatalf("the pass after the revert changed status:\n%+v\n%+v", first, second)
	}
	// A new generation while reverted is observed, nothing else changes.
	third := revertStatus(second, revertInput{Node: node(5, nil), Now: metav1.NewTime(time.Unix(3000, 0))})
	if third.ObservedGeneration != 5 || len(third.Settings) != 2 {
		t.Fatalf("after a new generation: observed %d, settings %+v", third.ObservedGeneration, third.Settings)
	}
	if c := meta.FindStatusCondition(third.Conditions, v1alpha1.NodeReverted); c == nil || c.Reason != v1alpha1.ReasonRevertConflict || c.ObservedGeneration != 5 {
		t.Fatalf("Reverted = %+v", c)
	}
}

func TestWithHeld(t *testing.T) {
	held := func(id string) v1alpha1.SettingResult {
		return v1alpha1.SettingResult{Setting: id, Desired: "0", State: v1alpha1.SettingFailed, Message: apply.HeldMessage}
	}
	podMissing := v1alpha1.SettingResult{Setting: "cpuquota/a/gw", State: v1alpha1.SettingFailed, Message: "no cgroup for pod uid 1"}
	cases := []struct {
		name    string
		results []v1alpha1.SettingResult
		held    []v1alpha1.SettingResult
		want    []string // setting: message
	}{
		{"nothing held", []v1alpha1.SettingResult{podMissing}, nil, []string{"cpuquota/a/gw: no cgroup for pod uid 1"}},
		{"held setting the render reports", []v1alpha1.SettingResult{podMissing}, []v1alpha1.SettingResult{held("cpuquota/a/gw")},
			[]string{"cpuquota/a/gw: no cgroup for pod uid 1; " + apply.HeldMessage}},
		{"held setting of its own", []v1alpha1.SettingResult{podMissing}, []v1alpha1.SettingResult{held("irq/24")},
			[]string{"cpuquota/a/gw: no cgroup for pod uid 1", "irq/24: " + apply.HeldMessage}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := withHeld(c.results, c.held)
			var msgs []string
			for _, r := range got {
				msgs = append(msgs, r.Setting+": "+r.Message)
				if r.State != v1alpha1.SettingFailed {
					t.Errorf("%s state %s, want Failed", r.Setting, r.State)
				}
			}
			if fmt.Sprint(msgs) != fmt.Sprint(c.want) {
				t.Errorf("got %q, want %q", msgs, c.want)
			}
			if c.results[0].Message != "no cgroup for pod uid 1" {
				t.Error("withHeld modified its input")
			}
		})
	}
}

// The settings cap keeps the settings a human must act on, says how many it
// left out, and Applied counts them all: a failure past the 256th setting
// is not hidden.
func TestSettingsCapKeepsProblemsFirst(t *testing.T) {
	var results []v1alpha1.SettingResult
	for i := range 300 {
		results = append(results, res(fmt.Sprintf("cpuquota/ns/pod-%03d", i), v1alpha1.SettingApplied))
	}
	results = append(results, res("zz/failed", v1alpha1.SettingFailed), res("zz/invalid", v1alpha1.SettingInvalid))
	in := applyInput{Node: node(1, nil), Report: apply.Report{Results: results,
		Restored: []v1alpha1.SettingResult{res("zz/theirs", v1alpha1.SettingConflict)}},
		Results: []v1alpha1.SettingResult{res("zz/unsupported", v1alpha1.SettingUnsupported)}, Now: metav1.NewTime(time.Unix(1000, 0))}
	st := applyStatus(v1alpha1.LatencyNodeStatus{}, in)
	if len(st.Settings) != 256 || st.SettingsOmitted != 304-256 {
		t.Fatalf("%d settings, %d omitted; want 256, 48", len(st.Settings), st.SettingsOmitted)
	}
	var head []string
	for _, s := range st.Settings[:4] {
		head = append(head, s.Setting)
	}
	if fmt.Sprint(head) != "[zz/failed zz/invalid zz/theirs zz/unsupported]" {
		t.Errorf("settings start with %v; want the failed, invalid, conflicting, then unsupported ones", head)
	}
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.NodeApplied)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonPartiallyApplied ||
		!strings.Contains(c.Message, "300 applied") || !strings.Contains(c.Message, "48 not listed") ||
		!strings.Contains(c.Message, "zz/failed (Failed)") {
		t.Errorf("Applied = %+v", c)
	}
}

// The same results in another order (pods listed in another order) give the
// same status.
func TestSettingsOrderIgnoresInputOrder(t *testing.T) {
	var results []v1alpha1.SettingResult
	for i := range 12 {
		state := v1alpha1.SettingApplied
		if i%5 == 0 {
			state = v1alpha1.SettingFailed
		}
		results = append(results, v1alpha1.SettingResult{Setting: fmt.Sprintf("cpuquota/ns/pod-%d", i), State: state, Desired: "max 100000"})
	}
	in := func(rs []v1alpha1.SettingResult) applyInput {
		return applyInput{Node: node(1, nil), Report: apply.Report{Results: rs}, Now: metav1.NewTime(time.Unix(1000, 0))}
	}
	want := applyStatus(v1alpha1.LatencyNodeStatus{}, in(results))
	rnd := rand.New(rand.NewSource(7))
	for range 20 {
		shuffled := slices.Clone(results)
		rnd.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := applyStatus(v1alpha1.LatencyNodeStatus{}, in(shuffled)); !equalStatus(got, want) {
			t.Fatalf("status depends on the input order:\n%+v\n%+v", got.Settings, want.Settings)
		}
	}
}

// The same drift found on later passes (irqbalance writing again, perhaps
// another mask) gives the same Drifted condition: no time, no new values.
func TestDriftHeldStable(t *testing.T) {
	r := &Reconciler{Resync: time.Second}
	t0 := time.Unix(1000, 0)
	status := func(found []apply.Drift, at time.Time) v1alpha1.LatencyNodeStatus {
		return applyStatus(v1alpha1.LatencyNodeStatus{}, applyInput{Node: node(1, nil),
			Report: apply.Report{Drifts: r.drifts(found, at), Written: len(found)}, Reasserted: len(found), Now: metav1.NewTime(at)})
	}
	first := status([]apply.Drift{{ID: "irq/41", Ours: "0", Theirs: "0-1"}, {ID: "irq/24", Ours: "0", Theirs: "0-1"}}, t0)
	later := status([]apply.Drift{{ID: "irq/24", Ours: "0", Theirs: "1"}}, t0.Add(20*time.Second))
	c1, c2 := meta.FindStatusCondition(first.Conditions, v1alpha1.NodeDrifted), meta.FindStatusCondition(later.Conditions, v1alpha1.NodeDrifted)
	if c1.Message != c2.Message || strings.Contains(c1.Message, "1970") {
		t.Errorf("Drifted message changed between passes:\n%s\n%s", c1.Message, c2.Message)
	}
	if !strings.HasPrefix(c1.Message, `re-asserted after someone else changed: irq/24 was "0-1"`) {
		t.Errorf("Drifted message = %s", c1.Message)
	}
	// Past the hold (a minute here) the drift is no longer reported.
	if gone := status(nil, t0.Add(90*time.Second)); meta.IsStatusConditionTrue(gone.Conditions, v1alpha1.NodeDrifted) {
		t.Error("drift still reported after its hold")
	}
}

// Strings cut to the CRD's limits are cut in characters, never inside one.
func TestSettingStringsCutInCharacters(t *testing.T) {
	long := strings.Repeat("é", 600)
	st := applyStatus(v1alpha1.LatencyNodeStatus{}, applyInput{Node: node(1, nil), Now: metav1.NewTime(time.Unix(1000, 0)),
		Report: apply.Report{Results: []v1alpha1.SettingResult{{Setting: "sysctl/x", State: v1alpha1.SettingFailed, Actual: long, Message: long}}}})
	s := st.Settings[0]
	if !utf8.ValidString(s.Actual) || !utf8.ValidString(s.Message) ||
		utf8.RuneCountInString(s.Actual) != 256 || utf8.RuneCountInString(s.Message) != 512 {
		t.Errorf("actual %d characters (valid %v), message %d (valid %v)", utf8.RuneCountInString(s.Actual),
			utf8.ValidString(s.Actual), utf8.RuneCountInString(s.Message), utf8.ValidString(s.Message))
	}
}

// status.heldThreads comes from the engine's journal count, not from the
// settings list: 300 refusals of a tenant's pods (sorted before and capped
// at 256, pushing any thread policy out) leave it as counted, the node
// stays Applied, and a revert that still holds a thread says so.
func TestHeldThreadsIsCountedNotListed(t *testing.T) {
	var refused []v1alpha1.SettingResult
	for i := range 300 {
		refused = append(refused, res(fmt.Sprintf("rtsched/tenant/p%03d/uid", i), v1alpha1.SettingRefused))
	}
	now := metav1.NewTime(time.Unix(1000, 0))
	st := applyStatus(v1alpha1.LatencyNodeStatus{}, applyInput{Node: node(2, nil), Results: refused,
		Report: apply.Report{HeldThreads: 3, Results: []v1alpha1.SettingResult{res("rtsched/rt/engine/uid/42@7", v1alpha1.SettingApplied)}}, Now: now})
	if st.HeldThreads != 3 || st.SettingsOmitted == 0 {
		t.Fatalf("heldThreads %d (want 3), settingsOmitted %d", st.HeldThreads, st.SettingsOmitted)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.NodeApplied); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("tenants' refusals changed Applied: %+v", c)
	}
	ln := node(3, nil)
	ln.Spec.Action = v1alpha1.ActionRevert
	st = revertStatus(st, revertInput{Node: ln, Report: apply.Report{HeldThreads: 1,
		Results: []v1alpha1.SettingResult{res("rtsched/rt/engine/uid/42@7", v1alpha1.SettingFailed)}}, Now: now})
	if st.HeldThreads != 1 {
		t.Errorf("revert holding a thread: heldThreads %d, want 1", st.HeldThreads)
	}
	// A pass that failed before reading the journal keeps the count.
	st = revertStatus(st, revertInput{Node: ln, Err: errors.New("journal locked"), Now: now})
	if st.HeldThreads != 1 {
		t.Errorf("failed revert pass: heldThreads %d, want the last count 1", st.HeldThreads)
	}
	st = revertStatus(st, revertInput{Node: ln, Now: now})
	if st.HeldThreads != 0 {
		t.Errorf("revert with nothing journaled: heldThreads %d, want 0", st.HeldThreads)
	}
}

// A pod's own settings drifting (kubelet rewriting its quota on an in-place
// resize, the pod changing its threads' policy) are re-asserted but leave
// Drifted False, so a tenant cannot mark the node drifted (and its profile
// Degraded); a node setting drifting beside them still does.
func TestPodSettingDriftDoesNotDriftTheNode(t *testing.T) {
	pods := []apply.Drift{{ID: "cpuquota/tenant/web/u1", Ours: "-1", Theirs: "100000"},
		{ID: "rtsched/tenant/spin/u2/42@7", Ours: "fifo:40", Theirs: "other:0"},
		{ID: "cpuset/pod/tenant/web/u1", Ours: "1", Theirs: "0-1"}}
	c := driftCondition(pods, 0)
	if c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonPodSettingsReasserted || !strings.Contains(c.Message, "cpuquota/tenant/web/u1") {
		t.Errorf("pod drifts only: %+v, want Drifted False %s naming them", c, v1alpha1.ReasonPodSettingsReasserted)
	}
	c = driftCondition(append(pods, apply.Drift{ID: "irq/24", Ours: "0", Theirs: "0-1"}), 0)
	if c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonDriftDetected || strings.Contains(c.Message, "cpuquota/") {
		t.Errorf("with a node drift: %+v, want Drifted True for irq/24 alone", c)
	}
}
