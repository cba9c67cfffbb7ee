package loop

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/findings"
	"latencytier.io/latencytier/agent/measure"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// TestWanderingPodWaitIsQuiet runs windows through the budget rule and the
// report's decision together: a pod whose wait wanders around its budget
// (over it one window, under it the next, for an hour) is written when it
// is first judged and never again before the heartbeat; a pod over its
// budget for windows in a row is written once, when it turns Outside.
func TestWanderingPodWaitIsQuiet(t *testing.T) {
	budget := []v1alpha1.PodBudget{{Name: "web", WaitPerSecond: &metav1.Duration{Duration: 10 * time.Millisecond}}}
	pods := []findings.BudgetPod{{Namespace: "shop", Name: "web-0"}}
	var rule findings.PodBudgets
	var written v1alpha1.LatencyNodeStatus
	t0 := time.Unix(2_000_000_000, 0)
	window := func(i int, wait time.Duration) (writes int) {
		rs := rule.Judge(findings.PodBudgetWindow{Budgets: budget, Pods: pods, Attributed: measure.AttributedPods,
			Window: 30 * time.Second, Traced: map[string]bool{"shop/web-0": true}, Now: t0.Add(time.Duration(i) * 30 * time.Second),
			Attribution: []measure.PodAttribution{{Namespace: "shop", Name: "web-0", Wait: 30 * wait,
				ByClass: map[measure.OffenderClass]time.Duration{v1alpha1.OffenderPod: 30 * wait}}}})
		next := written
		next.PodBudgets = podBudgets(rs)
		if why := material(written, next, v1alpha1.LatencyNodeSpec{}); why != "" {
			if why != "podBudgets" {
				t.Fatalf("window %d: material %q", i, why)
			}
			written = next
			return 1
		}
		return 0
	}
	writes := 0
	for i := range 120 { // an hour of 30 s windows: 6, 14, 6, 14 ms/s ...
		wait := 6 * time.Millisecond
		if i%2 == 1 {
			wait = 14 * time.Millisecond
		}
		writes += window(i, wait)
	}
	// First window (Unknown), then Within: two writes, no more.
	if writes != 2 {
		t.Fatalf("a wait wandering around its budget wrote %d times in an hour, want 2", writes)
	}
	if got := written.PodBudgets.Pods[0].Verdict; got != v1alpha1.PodWithinBudget {
		t.Fatalf("verdict %s, want Within", got)
	}
	writes = 0
	for i := 120; i < 130; i++ {
		writes += window(i, 20*time.Millisecond)
	}
	if writes != 1 || written.PodBudgets.Pods[0].Verdict != v1alpha1.PodOutsideBudget || written.PodBudgets.Outside != 1 {
		t.Fatalf("a pod over its budget for 10 windows: %d writes, status %+v; want 1 write, Outside", writes, written.PodBudgets)
	}
}
