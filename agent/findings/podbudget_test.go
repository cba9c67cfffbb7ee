package findings

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/api/v1alpha1"
)

var (
	webPod   = BudgetPod{Namespace: "shop", Name: "web-0", Labels: map[string]string{"app": "web"}}
	batchPod = BudgetPod{Namespace: "shop", Name: "batch-0", Labels: map[string]string{"app": "batch"}}
)

func budgets() []v1alpha1.PodBudget {
	ratio := "0.05"
	return []v1alpha1.PodBudget{
		{Name: "web", PodSelector: v1alpha1.BudgetPodSelector{MatchLabels: map[string]string{"app": "web"}},
			WaitPerSecond: &metav1.Duration{Duration: 10 * time.Millisecond}},
		{Name: "rest", ThrottledRatio: &ratio},
	}
}

// budgetWindow is a window of 1s in which web-0 waited wait (split as
// classes says: class=share of the wait) and batch-0 was throttled in
// batchRatio of its periods.
func budgetWindow(i int, wait time.Duration, batchRatio string) PodBudgetWindow {
	a := measure.PodAttribution{Namespace: "shop", Name: "web-0", Wait: wait, ByClass: map[measure.OffenderClass]time.Duration{
		v1alpha1.OffenderIdle: wait / 10, v1alpha1.OffenderPod: wait / 2, v1alpha1.OffenderSamePod: wait / 5,
		v1alpha1.OffenderSelfThrottling: wait / 10, v1alpha1.OffenderUnattributed: wait / 10}}
	return PodBudgetWindow{Budgets: budgets(), Pods: []BudgetPod{webPod, batchPod}, Attributed: measure.AttributedPods,
		Window: time.Second, Attribution: []measure.PodAttribution{a}, Traced: map[string]bool{"shop/web-0": true, "shop/batch-0": true},
		Throttling: []v1alpha1.PodThrottling{{Namespace: "shop", Name: "batch-0", Ratio: batchRatio}},
		Now:        time.Unix(1_000_000+int64(i)*30, 0)}
}

func verdicts(rs []v1alpha1.PodBudgetResult) string {
	var s []string
	for _, r := range rs {
		s = append(s, r.Name+"="+string(r.Verdict)+"/"+r.Reason)
	}
	return strings.Join(s, " ")
}

// TestPodBudgetVerdicts: a sequence of windows in, verdicts out. A pod is
// Unknown in its first window, Outside only after PodBudgetOutsideAfter
// windows over its budget, Within again only after PodBudgetWithinAfter
// windows inside it, and Unknown when the window cannot measure a wait
// budget (a throttle-only budget does not need attribution).
func TestPodBudgetVerdicts(t *testing.T) {
	ms := time.Millisecond
	noAttr := func(w PodBudgetWindow) PodBudgetWindow {
		w.Attributed, w.Attribution = measure.AttributedNone, nil
		return w
	}
	untraced := func(w PodBudgetWindow) PodBudgetWindow {
		w.Traced, w.Attribution = map[string]bool{"shop/batch-0": true}, nil
		return w
	}
	steps := []struct {
		w    PodBudgetWindow
		want string
	}{
		{budgetWindow(0, 50*ms, "0.5"), "batch-0=Unknown/FirstWindow web-0=Unknown/FirstWindow"},
		{budgetWindow(1, 5*ms, "0.01"), "batch-0=Within/WithinBudget web-0=Within/WithinBudget"},
		// One window over is a burst, not a verdict.
		{budgetWindow(2, 50*ms, "0.5"), "batch-0=Within/ThrottledOverBudget web-0=Within/WaitOverBudget"},
		{budgetWindow(3, 50*ms, "0.5"), "batch-0=Outside/ThrottledOverBudget web-0=Outside/WaitOverBudget"},
		// Back inside: Outside holds for PodBudgetWithinAfter windows.
		{budgetWindow(4, 5*ms, "0.01"), "batch-0=Outside/ThrottledOverBudget web-0=Outside/WaitOverBudget"},
		{budgetWindow(5, 5*ms, "0.01"), "batch-0=Outside/ThrottledOverBudget web-0=Outside/WaitOverBudget"},
		// One over in between starts the count again.
		{budgetWindow(6, 50*ms, "0.01"), "web-0=Outside/WaitOverBudget batch-0=Within/WithinBudget"},
		{budgetWindow(7, 5*ms, "0.01"), "web-0=Outside/WaitOverBudget batch-0=Within/WithinBudget"},
		{budgetWindow(8, 5*ms, "0.01"), "web-0=Outside/WaitOverBudget batch-0=Within/WithinBudget"},
		{budgetWindow(9, 5*ms, "0.01"), "batch-0=Within/WithinBudget web-0=Within/WithinBudget"},
		// No attribution: the wait budget cannot tell, the throttle one can.
		{noAttr(budgetWindow(10, 50*ms, "0.01")), "web-0=Unknown/NoAttribution batch-0=Within/WithinBudget"},
		{budgetWindow(11, 50*ms, "0.01"), "batch-0=Within/WithinBudget web-0=Within/WaitOverBudget"},
		// Not traced through the window (its cgroup not found, past the
		// tracer's limit): no wait to judge, which is not a wait of 0.
		{untraced(budgetWindow(12, 0, "0.01")), "web-0=Unknown/NoAttribution batch-0=Within/WithinBudget"},
		{budgetWindow(13, 50*ms, "0.01"), "batch-0=Within/WithinBudget web-0=Within/WaitOverBudget"},
		{budgetWindow(14, 50*ms, "0.01"), "web-0=Outside/WaitOverBudget batch-0=Within/WithinBudget"},
	}
	var b PodBudgets
	for i, s := range steps {
		if got := verdicts(b.Judge(s.w)); got != s.want {
			t.Fatalf("window %d: got %s, want %s", i, got, s.want)
		}
	}
}

// TestPodBudgetSinceMovesOnlyWithTheVerdict: since is when the verdict
// changed, not the window's end, so the status does not change with it.
func TestPodBudgetSinceMovesOnlyWithTheVerdict(t *testing.T) {
	var b PodBudgets
	b.Judge(budgetWindow(0, time.Millisecond, "0"))
	first := b.Judge(budgetWindow(1, time.Millisecond, "0"))
	later := b.Judge(budgetWindow(2, 2*time.Millisecond, "0"))
	if !first[0].Since.Equal(later[0].Since) || first[0].Since.Time != budgetWindow(1, 0, "").Now {
		t.Fatalf("since moved without the verdict: %v then %v", first[0].Since, later[0].Since)
	}
}

// TestPodBudgetFirstMatchWins: a pod takes the first budget whose selector
// matches it; a pod no budget matches has no verdict; a budget whose
// selector does not parse matches nothing.
func TestPodBudgetFirstMatchWins(t *testing.T) {
	w := budgetWindow(0, 0, "0")
	w.Pods = append(w.Pods, BudgetPod{Namespace: "x", Name: "plain"})
	w.Budgets = append([]v1alpha1.PodBudget{{Name: "broken", PodSelector: v1alpha1.BudgetPodSelector{
		MatchExpressions: []v1alpha1.BudgetSelectorRequirement{{Key: "app", Operator: "Equals"}}}}}, w.Budgets...)
	w.Budgets[1].PodSelector.MatchLabels = nil // web: {} now matches every pod
	got := map[string]string{}
	for _, r := range new(PodBudgets).Judge(w) {
		got[r.Name] = r.Budget
	}
	if len(got) != 3 || got["web-0"] != "web" || got["batch-0"] != "web" || got["plain"] != "web" {
		t.Fatalf("budgets by pod: %v, want every pod under web, the first that matches", got)
	}
	w.Budgets = budgets()
	w.Budgets[1].PodSelector.MatchLabels = map[string]string{"app": "batch"}
	got = map[string]string{}
	for _, r := range new(PodBudgets).Judge(w) {
		got[r.Name] = r.Budget
	}
	if len(got) != 2 || got["plain"] != "" || got["batch-0"] != "rest" {
		t.Fatalf("budgets by pod: %v, want web-0 web, batch-0 rest, plain none", got)
	}
}

// TestPodBudgetBreakdown: the wait is split by where it was spent, as
// wake-up to run (Idle), queueing behind others (neighbours) and behind
// its own tasks, throttled; the rest is what the tracer could not split.
func TestPodBudgetBreakdown(t *testing.T) {
	w := budgetWindow(0, 40*time.Millisecond, "0")
	w.Window = 2 * time.Second
	r := new(PodBudgets).Judge(w)
	var web v1alpha1.PodBudgetResult
	for _, x := range r {
		if x.Name == "web-0" {
			web = x
		}
	}
	ms := func(d *metav1.Duration) time.Duration { return d.Duration }
	if ms(web.WaitPerSecond) != 20*time.Millisecond || ms(web.WakeUpPerSecond) != 2*time.Millisecond ||
		ms(web.QueuedBehindOthersPerSecond) != 10*time.Millisecond || ms(web.QueuedBehindOwnPerSecond) != 4*time.Millisecond ||
		ms(web.ThrottledPerSecond) != 2*time.Millisecond {
		t.Fatalf("breakdown: wait %v wake %v others %v own %v throttled %v", web.WaitPerSecond, web.WakeUpPerSecond,
			web.QueuedBehindOthersPerSecond, web.QueuedBehindOwnPerSecond, web.ThrottledPerSecond)
	}
}

// TestPodBudgetsStatusIsBounded: every verdict is counted, at most
// MaxPodBudgetResults are listed, and the rest is counted as omitted.
func TestPodBudgetsStatusIsBounded(t *testing.T) {
	if PodBudgetsStatus(nil) != nil {
		t.Fatal("no verdict must leave status.podBudgets out")
	}
	var rs []v1alpha1.PodBudgetResult
	for i := range 40 {
		v := v1alpha1.PodWithinBudget
		if i < 3 {
			v = v1alpha1.PodOutsideBudget
		}
		rs = append(rs, v1alpha1.PodBudgetResult{Name: string(rune('a' + i)), Verdict: v})
	}
	st := PodBudgetsStatus(rs)
	if st.Outside != 3 || st.Within != 37 || len(st.Pods) != v1alpha1.MaxPodBudgetResults || st.Omitted != 40-v1alpha1.MaxPodBudgetResults {
		t.Fatalf("status: outside %d within %d listed %d omitted %d", st.Outside, st.Within, len(st.Pods), st.Omitted)
	}
	if st.Pods[0].Verdict != v1alpha1.PodOutsideBudget {
		t.Fatal("the Outside pods must be listed first")
	}
}

// TestPodBudgetOutOfBoundsJudgesNothing: a LatencyNode spec is not trusted
// to have passed the CRD's validation; a budget with a wait below the
// floor (every pod would be Outside), a ratio that does not parse or no
// figure makes its pods Unknown, naming why, instead of judging them.
func TestPodBudgetOutOfBoundsJudgesNothing(t *testing.T) {
	bad, over := "1%", "1.5"
	for name, b := range map[string]v1alpha1.PodBudget{
		"wait 0":        {Name: "web", WaitPerSecond: &metav1.Duration{}},
		"wait negative": {Name: "web", WaitPerSecond: &metav1.Duration{Duration: -time.Second}},
		"wait 1h":       {Name: "web", WaitPerSecond: &metav1.Duration{Duration: time.Hour}},
		"ratio 1%":      {Name: "web", ThrottledRatio: &bad},
		"ratio 1.5":     {Name: "web", ThrottledRatio: &over},
		"no figure":     {Name: "web"},
		"p99 1us":       {Name: "web", RunQueueP99: &metav1.Duration{Duration: time.Microsecond}},
		"p99 1h":        {Name: "web", RunQueueP99: &metav1.Duration{Duration: time.Hour}},
	} {
		var rule PodBudgets
		for i := range 4 {
			w := budgetWindow(i, 50*time.Millisecond, "0.5")
			w.Budgets = []v1alpha1.PodBudget{b}
			for _, r := range rule.Judge(w) {
				if r.Verdict != v1alpha1.PodBudgetUnknown || r.Reason != v1alpha1.ReasonInvalidBudget {
					t.Fatalf("%s: window %d: %s %s/%s, want Unknown/InvalidBudget", name, i, r.Name, r.Verdict, r.Reason)
				}
			}
		}
	}
}

// WaitBudgets gives a pod the waitPerSecond of the first budget that
// selects it, as the verdicts do: a pod whose first budget bounds only the
// throttled ratio, or is out of bounds, has no wait budget, even when a
// later budget has one.
func TestWaitBudgets(t *testing.T) {
	ratio := "0.05"
	wait := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	bs := []v1alpha1.PodBudget{
		{Name: "web", PodSelector: v1alpha1.BudgetPodSelector{MatchLabels: map[string]string{"app": "web"}}, WaitPerSecond: wait(400 * time.Millisecond)},
		{Name: "odd", PodSelector: v1alpha1.BudgetPodSelector{MatchLabels: map[string]string{"app": "odd"}}, WaitPerSecond: wait(20 * time.Second)},
		{Name: "batch", PodSelector: v1alpha1.BudgetPodSelector{MatchLabels: map[string]string{"app": "batch"}}, ThrottledRatio: &ratio},
		{Name: "rest", WaitPerSecond: wait(time.Second)},
	}
	odd := BudgetPod{Namespace: "shop", Name: "odd-0", Labels: map[string]string{"app": "odd"}}
	other := BudgetPod{Namespace: "shop", Name: "other-0"}
	got := WaitBudgets(bs, []BudgetPod{webPod, batchPod, odd, other})
	want := map[string]time.Duration{"shop/web-0": 400 * time.Millisecond, "shop/other-0": time.Second}
	if len(got) != len(want) {
		t.Fatalf("wait budgets %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if WaitBudgets(nil, []BudgetPod{webPod}) != nil {
		t.Error("no budgets: want no wait budgets")
	}
}

// p99Window is budgetWindow with web-0 under a budget of 100µs run-queue
// p99 (and its 10ms wait budget): web-0's own p99 is p99 over samples
// waits; samples < 0 leaves web-0 without a histogram of its own.
func p99Window(i int, p99 time.Duration, samples int64) PodBudgetWindow {
	w := budgetWindow(i, 5*time.Millisecond, "0.01")
	w.Budgets[0].RunQueueP99 = &metav1.Duration{Duration: 100 * time.Microsecond}
	w.RunQueue = map[string]measure.PodRunQueue{"shop/batch-0": {Samples: 500, P99: time.Second}}
	if samples >= 0 {
		w.RunQueue["shop/web-0"] = measure.PodRunQueue{Samples: samples, P99: p99}
	}
	return w
}

// TestPodBudgetRunQueueP99: a pod whose own run-queue p99 is over its
// budget's runQueueP99 turns Outside (RunQueueP99OverBudget) after
// PodBudgetOutsideAfter windows, judged on enough waits only: fewer than
// PodBudgetMinSamples, or no histogram of the pod (the schedstat
// fallback, or past the tracer's per-pod histograms), is Unknown and
// starts the count again. Another pod's p99 (batch-0's 1s, under a
// budget without runQueueP99) judges nothing.
func TestPodBudgetRunQueueP99(t *testing.T) {
	us := time.Microsecond
	steps := []struct {
		w    PodBudgetWindow
		want string
	}{
		{p99Window(0, 50*us, 500), "web-0=Unknown/FirstWindow"},
		{p99Window(1, 50*us, 500), "web-0=Within/WithinBudget"},
		{p99Window(2, 400*us, 500), "web-0=Within/RunQueueP99OverBudget"},
		{p99Window(3, 400*us, 500), "web-0=Outside/RunQueueP99OverBudget"},
		{p99Window(4, 50*us, 500), "web-0=Outside/RunQueueP99OverBudget"},
		// Too few waits for a p99, then no histogram: Unknown, counts reset.
		{p99Window(5, 400*us, v1alpha1.PodBudgetMinSamples-1), "web-0=Unknown/TooFewSamples"},
		{p99Window(6, 400*us, 500), "web-0=Within/RunQueueP99OverBudget"},
		{p99Window(7, 0, -1), "web-0=Unknown/NoPodHistogram"},
		{p99Window(8, 400*us, v1alpha1.PodBudgetMinSamples), "web-0=Within/RunQueueP99OverBudget"},
		{p99Window(9, 400*us, 500), "web-0=Outside/RunQueueP99OverBudget"},
	}
	var b PodBudgets
	for i, s := range steps {
		rs := b.Judge(s.w)
		var web v1alpha1.PodBudgetResult
		for _, r := range rs {
			if r.Name == "web-0" {
				web = r
			} else if r.Verdict == v1alpha1.PodOutsideBudget || r.Reason != v1alpha1.ReasonPodWithinBudget && i > 0 {
				t.Fatalf("window %d: %s %s/%s judged on a p99 its budget does not bound", i, r.Name, r.Verdict, r.Reason)
			}
		}
		if got := verdicts([]v1alpha1.PodBudgetResult{web}); got != s.want {
			t.Fatalf("window %d: got %s, want %s", i, got, s.want)
		}
		rq, ok := s.w.RunQueue["shop/web-0"]
		switch {
		case !ok && web.RunQueueP99 != nil:
			t.Errorf("window %d: a p99 %v without a histogram", i, web.RunQueueP99)
		case ok && (web.RunQueueP99 == nil || web.RunQueueP99.Duration != rq.P99 || web.RunQueueSamples != rq.Samples):
			t.Errorf("window %d: status p99 %v of %d waits, measured %v of %d", i, web.RunQueueP99, web.RunQueueSamples, rq.P99, rq.Samples)
		}
	}
}

// TestPodBudgetReasonsNameEveryFigureOver: the reason names each figure
// over the budget, in the order wait, run-queue p99, throttled.
func TestPodBudgetReasonsNameEveryFigureOver(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		wait  time.Duration
		p99   time.Duration
		ratio string
		want  string
	}{
		{50 * ms, 50 * time.Microsecond, "0.01", v1alpha1.ReasonWaitOverBudget},
		{5 * ms, 5 * ms, "0.01", v1alpha1.ReasonRunQueueP99OverBudget},
		{5 * ms, 50 * time.Microsecond, "0.5", v1alpha1.ReasonThrottledOverBudget},
		{50 * ms, 5 * ms, "0.01", v1alpha1.ReasonWaitAndRunQueueP99OverBudget},
		{50 * ms, 50 * time.Microsecond, "0.5", v1alpha1.ReasonWaitAndThrottledOverBudget},
		{5 * ms, 5 * ms, "0.5", v1alpha1.ReasonRunQueueP99AndThrottledOverBudget},
		{50 * ms, 5 * ms, "0.5", v1alpha1.ReasonWaitAndRunQueueP99AndThrottledOverBudget},
		{5 * ms, 50 * time.Microsecond, "0.01", v1alpha1.ReasonPodWithinBudget},
	} {
		var b PodBudgets
		var got string
		for i := range 2 {
			w := budgetWindow(i, c.wait, c.ratio)
			ratio := "0.05"
			w.Budgets = []v1alpha1.PodBudget{{Name: "all", WaitPerSecond: &metav1.Duration{Duration: 10 * ms},
				RunQueueP99: &metav1.Duration{Duration: 100 * time.Microsecond}, ThrottledRatio: &ratio}}
			w.Pods = []BudgetPod{webPod}
			w.Throttling = []v1alpha1.PodThrottling{{Namespace: "shop", Name: "web-0", Ratio: c.ratio}}
			w.RunQueue = map[string]measure.PodRunQueue{"shop/web-0": {Samples: 500, P99: c.p99}}
			got = b.Judge(w)[0].Reason
		}
		if got != c.want {
			t.Errorf("wait %v p99 %v ratio %s: reason %s, want %s", c.wait, c.p99, c.ratio, got, c.want)
		}
	}
}
