package findings

import (
	"cmp"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/figures"
	"latencytier.io/latencytier/internal/ratio"
)

// Latency budgets per workload (issue 45 item 2): each measured pod that a
// measurement.budgets entry matches (the first that does) gets a verdict,
// Within, Outside or Unknown, judged over windows in a row so that a
// figure wandering around the budget does not turn the verdict every
// window: Outside after v1alpha1.PodBudgetOutsideAfter windows in a row
// over the budget, Within again after v1alpha1.PodBudgetWithinAfter
// windows in a row inside it. A window that cannot tell (no attribution
// for a wait budget; for a run-queue p99 budget, no histogram of the pod
// or fewer than v1alpha1.PodBudgetMinSamples waits in it) makes the
// verdict Unknown and the counts start again; so does a pod's first
// window, which did not trace all of it.

// BudgetPod is a measured pod as the budget rule sees it.
type BudgetPod struct {
	Namespace, Name string
	Labels          map[string]string
}

// PodBudgetWindow is one measurement window as the budget rule sees it.
type PodBudgetWindow struct {
	// Budgets is the profile's measurement.budgets.
	Budgets []v1alpha1.PodBudget
	// Pods are the measured pods in the window.
	Pods []BudgetPod
	// Attributed, Window and Attribution are measure.Result's.
	Attributed  measure.AttributionCover
	Window      time.Duration
	Attribution []measure.PodAttribution
	// Traced are the pods (namespace/name) measured through the window
	// (measure.Result.Traced): only their wait is known, a pod missing
	// from Attribution then waited nothing.
	Traced map[string]bool
	// RunQueue is each traced pod's own run-queue latency, by
	// namespace/name (measure.Result.PodRunQueue): a pod missing from it
	// had no histogram of its own.
	RunQueue map[string]measure.PodRunQueue
	// Throttling is every pod with a CFS quota or opted in
	// (measure.Result.AllThrottling); a pod not in it has no quota and
	// is never throttled.
	Throttling []v1alpha1.PodThrottling
	// Now stamps a verdict that changes.
	Now time.Time
}

// PodBudgets holds, per measured pod, the windows in a row its verdict
// needs. The zero value has seen no pod.
type PodBudgets struct {
	pods map[string]*podBudgetState
}

type podBudgetState struct {
	budget       string
	verdict      v1alpha1.PodBudgetVerdict
	reason       string
	since        time.Time
	over, inside int
}

// Judge counts window w for every measured pod a budget matches and
// returns their verdicts, Outside first, then Unknown, then Within, each
// by namespace and name. Pods gone from w.Pods, or no longer matched by a
// budget, are forgotten.
func (b *PodBudgets) Judge(w PodBudgetWindow) []v1alpha1.PodBudgetResult {
	sels := budgetSelectors(w.Budgets)
	waits := make(map[string]measure.PodAttribution, len(w.Attribution))
	for _, a := range w.Attribution {
		waits[a.Namespace+"/"+a.Name] = a
	}
	throttled := make(map[string]v1alpha1.PodThrottling, len(w.Throttling))
	for _, t := range w.Throttling {
		throttled[t.Namespace+"/"+t.Name] = t
	}
	prev := b.pods
	b.pods = map[string]*podBudgetState{}
	var out []v1alpha1.PodBudgetResult
	for _, p := range w.Pods {
		budget := matchBudget(w.Budgets, sels, p.Labels)
		if budget == nil {
			continue
		}
		key := p.Namespace + "/" + p.Name
		st, seen := prev[key]
		if !seen || st.budget != budget.Name {
			st = &podBudgetState{budget: budget.Name, verdict: v1alpha1.PodBudgetUnknown, since: w.Now}
		}
		b.pods[key] = st
		res := v1alpha1.PodBudgetResult{Namespace: p.Namespace, Name: p.Name, Budget: budget.Name}
		t, hasQuota := throttled[key]
		if hasQuota {
			res.ThrottledRatio = t.Ratio
		}
		attributed := w.Attributed == measure.AttributedPods && w.Window > 0 && w.Traced[key]
		if attributed {
			fillBreakdown(&res, waits[key], w.Window)
		}
		rq, hasHist := w.RunQueue[key]
		hasHist = hasHist && w.Traced[key]
		if hasHist && rq.Samples > 0 {
			res.RunQueueP99, res.RunQueueSamples = &metav1.Duration{Duration: roundWait(rq.P99)}, rq.Samples
		}
		switch {
		case !validBudget(*budget):
			st.unknown(v1alpha1.ReasonInvalidBudget, w.Now)
		case !seen:
			st.reason = v1alpha1.ReasonFirstWindow
		case budget.WaitPerSecond != nil && !attributed:
			st.unknown(v1alpha1.ReasonNoAttribution, w.Now)
		case budget.RunQueueP99 != nil && !hasHist:
			st.unknown(v1alpha1.ReasonNoPodHistogram, w.Now)
		case budget.RunQueueP99 != nil && rq.Samples < v1alpha1.PodBudgetMinSamples:
			st.unknown(v1alpha1.ReasonTooFewSamples, w.Now)
		default:
			st.count(overReason(*budget, res, rq, t, hasQuota), w.Now)
		}
		res.Verdict, res.Reason, res.Since = st.verdict, st.reason, &metav1.Time{Time: st.since}
		out = append(out, res)
	}
	slices.SortFunc(out, func(x, y v1alpha1.PodBudgetResult) int {
		return cmp.Or(cmp.Compare(verdictRank(x.Verdict), verdictRank(y.Verdict)),
			cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(x.Name, y.Name))
	})
	return out
}

// count takes one judged window: over is the reason the pod is over its
// budget in it ("" when inside).
func (st *podBudgetState) count(over string, now time.Time) {
	if over != "" {
		st.over, st.inside = st.over+1, 0
	} else {
		st.over, st.inside = 0, st.inside+1
	}
	switch {
	case st.verdict == v1alpha1.PodOutsideBudget && st.inside < v1alpha1.PodBudgetWithinAfter:
		// Outside holds until enough windows inside; its reason stays
		// the last window's over it.
		if over != "" {
			st.reason = over
		}
		return
	case st.over >= v1alpha1.PodBudgetOutsideAfter:
		st.set(v1alpha1.PodOutsideBudget, now)
	default:
		st.set(v1alpha1.PodWithinBudget, now)
	}
	st.reason = cmp.Or(over, v1alpha1.ReasonPodWithinBudget)
}

// unknown takes a window that cannot judge the pod, for reason: the
// verdict is Unknown and the counts start again.
func (st *podBudgetState) unknown(reason string, now time.Time) {
	st.set(v1alpha1.PodBudgetUnknown, now)
	st.over, st.inside, st.reason = 0, 0, reason
}

func (st *podBudgetState) set(v v1alpha1.PodBudgetVerdict, now time.Time) {
	if st.verdict != v {
		st.verdict, st.since = v, now
	}
}

// overReason says which of budget's figures res (and rq, the pod's
// unrounded run-queue latency) is over ("" for none).
func overReason(budget v1alpha1.PodBudget, res v1alpha1.PodBudgetResult, rq measure.PodRunQueue, t v1alpha1.PodThrottling, hasQuota bool) string {
	wait := budget.WaitPerSecond != nil && res.WaitPerSecond != nil && res.WaitPerSecond.Duration > budget.WaitPerSecond.Duration
	p99 := budget.RunQueueP99 != nil && rq.P99 > budget.RunQueueP99.Duration
	var thr bool
	if budget.ThrottledRatio != nil && hasQuota {
		limit, ok := ratio.Parse(*budget.ThrottledRatio)
		got, gotOK := ratio.Parse(t.Ratio)
		thr = ok && gotOK && got > limit
	}
	return overReasons[[3]bool{wait, p99, thr}]
}

// overReasons names the figures over a budget: wait, run-queue p99,
// throttled.
var overReasons = map[[3]bool]string{
	{true, false, false}: v1alpha1.ReasonWaitOverBudget,
	{false, true, false}: v1alpha1.ReasonRunQueueP99OverBudget,
	{false, false, true}: v1alpha1.ReasonThrottledOverBudget,
	{true, true, false}:  v1alpha1.ReasonWaitAndRunQueueP99OverBudget,
	{true, false, true}:  v1alpha1.ReasonWaitAndThrottledOverBudget,
	{false, true, true}:  v1alpha1.ReasonRunQueueP99AndThrottledOverBudget,
	{true, true, true}:   v1alpha1.ReasonWaitAndRunQueueP99AndThrottledOverBudget,
}

// fillBreakdown sets res's wait and its parts per second from a (the zero
// PodAttribution for a pod that did not wait in the window).
func fillBreakdown(res *v1alpha1.PodBudgetResult, a measure.PodAttribution, window time.Duration) {
	var wakeUp, others, own, throttled time.Duration
	for class, d := range a.ByClass {
		switch {
		case class == v1alpha1.OffenderIdle:
			wakeUp += d
		case class == v1alpha1.OffenderSamePod:
			own += d
		case class == v1alpha1.OffenderSelfThrottling:
			throttled += d
		case class.IsNeighbour():
			others += d
		}
	}
	perSecond := func(d time.Duration) *metav1.Duration {
		return &metav1.Duration{Duration: roundWait(time.Duration(float64(d) / window.Seconds()))}
	}
	res.WaitPerSecond = perSecond(a.Wait)
	res.WakeUpPerSecond, res.QueuedBehindOthersPerSecond = perSecond(wakeUp), perSecond(others)
	res.QueuedBehindOwnPerSecond, res.ThrottledPerSecond = perSecond(own), perSecond(throttled)
}

// validBudget says b's figures are within the CRD's bounds: a wait
// between figures.WaitFloor and ContentionMaxWaitPerSecond, a run-queue
// p99 between PodBudgetMinRunQueueP99 and PodBudgetMaxRunQueueP99, a
// ratio between 0 and 1, at least one of them. The LatencyNode's spec is
// not trusted to have passed the profile's validation; a budget outside
// them judges nothing (its pods are Unknown, InvalidBudget).
func validBudget(b v1alpha1.PodBudget) bool {
	if b.WaitPerSecond == nil && b.RunQueueP99 == nil && b.ThrottledRatio == nil {
		return false
	}
	if w := b.WaitPerSecond; w != nil && (w.Duration < time.Duration(figures.WaitFloor) || w.Duration > v1alpha1.ContentionMaxWaitPerSecond) {
		return false
	}
	if p := b.RunQueueP99; p != nil && (p.Duration < v1alpha1.PodBudgetMinRunQueueP99 || p.Duration > v1alpha1.PodBudgetMaxRunQueueP99) {
		return false
	}
	if r := b.ThrottledRatio; r != nil {
		v, ok := ratio.Parse(*r)
		return ok && v >= 0 && v <= 1
	}
	return true
}

// budgetSelectors are the budgets' selectors; nil for one that does not
// parse (the spec is not trusted to have passed the CRD's validation): it
// matches nothing.
func budgetSelectors(budgets []v1alpha1.PodBudget) []labels.Selector {
	out := make([]labels.Selector, len(budgets))
	for i, b := range budgets {
		if sel, err := metav1.LabelSelectorAsSelector(b.PodSelector.LabelSelector()); err == nil {
			out[i] = sel
		}
	}
	return out
}

// matchBudget is the first budget whose selector matches the labels.
func matchBudget(budgets []v1alpha1.PodBudget, sels []labels.Selector, podLabels map[string]string) *v1alpha1.PodBudget {
	for i := range budgets {
		if sels[i] != nil && sels[i].Matches(labels.Set(podLabels)) {
			return &budgets[i]
		}
	}
	return nil
}

func verdictRank(v v1alpha1.PodBudgetVerdict) int {
	switch v {
	case v1alpha1.PodOutsideBudget:
		return 0
	case v1alpha1.PodBudgetUnknown:
		return 1
	}
	return 2
}

// PodBudgetsStatus is the verdicts as status.podBudgets holds them: every
// verdict counted, the first v1alpha1.MaxPodBudgetResults listed (rs is
// Judge's order, Outside first) and the rest counted as omitted; nil when
// no pod has a verdict.
func PodBudgetsStatus(rs []v1alpha1.PodBudgetResult) *v1alpha1.PodBudgetsStatus {
	if len(rs) == 0 {
		return nil
	}
	st := &v1alpha1.PodBudgetsStatus{}
	for _, r := range rs {
		switch r.Verdict {
		case v1alpha1.PodWithinBudget:
			st.Within++
		case v1alpha1.PodOutsideBudget:
			st.Outside++
		default:
			st.Unknown++
		}
	}
	n := min(len(rs), v1alpha1.MaxPodBudgetResults)
	st.Pods = slices.Clone(rs[:n])
	st.Omitted = int32(len(rs) - n)
	return st
}

// WaitBudgets is each pod's own wait budget by namespace/name: the
// waitPerSecond of the first budget whose selector matches it (Judge's
// rule), where that budget is valid and bounds the wait. Pods without one
// are left out. The contention rule raises a pod's bar with it.
func WaitBudgets(budgets []v1alpha1.PodBudget, pods []BudgetPod) map[string]time.Duration {
	if len(budgets) == 0 {
		return nil
	}
	sels := budgetSelectors(budgets)
	out := map[string]time.Duration{}
	for _, p := range pods {
		if b := matchBudget(budgets, sels, p.Labels); b != nil && b.WaitPerSecond != nil && validBudget(*b) {
			out[p.Namespace+"/"+p.Name] = b.WaitPerSecond.Duration
		}
	}
	return out
}
