package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

func ms(n int) *metav1.Duration {
	return &metav1.Duration{Duration: time.Duration(n) * time.Millisecond}
}

// TestExplainNamesPodsOutsideTheirBudget: explain names each pod outside
// its budget with where its wait went (wake-up to run, queueing behind
// others and its own tasks, throttled, and what is left unsplit), lists
// every judged pod, says how many status left out, and prints nothing
// about pod budgets for a profile that sets none.
func TestExplainNamesPodsOutsideTheirBudget(t *testing.T) {
	ratio := "0.05"
	n := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "w-1"}}
	n.Spec.Tuning.Measurement = &v1alpha1.MeasurementSpec{Budgets: []v1alpha1.PodBudget{
		{Name: "web", WaitPerSecond: ms(10), RunQueueP99: ms(1)}, {Name: "rest", ThrottledRatio: &ratio}}}
	at := metav1.NewTime(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	n.Status.PodBudgets = &v1alpha1.PodBudgetsStatus{Outside: 1, Within: 1, Unknown: 1, Omitted: 2, Pods: []v1alpha1.PodBudgetResult{
		{Namespace: "shop", Name: "web-0", Budget: "web", Verdict: v1alpha1.PodOutsideBudget, Reason: v1alpha1.ReasonWaitAndRunQueueP99OverBudget,
			Since: &at, WaitPerSecond: ms(50), WakeUpPerSecond: ms(2), QueuedBehindOthersPerSecond: ms(40),
			QueuedBehindOwnPerSecond: ms(3), ThrottledPerSecond: ms(1), RunQueueP99: ms(4), RunQueueSamples: 812},
		{Namespace: "shop", Name: "web-1", Budget: "web", Verdict: v1alpha1.PodBudgetUnknown, Reason: v1alpha1.ReasonFirstWindow},
		{Namespace: "shop", Name: "batch-0", Budget: "rest", Verdict: v1alpha1.PodWithinBudget, Reason: v1alpha1.ReasonPodWithinBudget,
			Since: &at, ThrottledRatio: "0.0100"},
	}}
	var out bytes.Buffer
	if err := explain(&out, n, verdicts{}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"Pod budgets (measurement.budgets, the first that matches a pod applies):",
		"  web: wait 10ms a second, run-queue p99 1ms, throttled ratio -\n",
		"  rest: wait - a second, run-queue p99 -, throttled ratio 0.05\n",
		"  1 outside, 1 unknown, 1 within\n",
		"  OUTSIDE shop/web-0 (budget web, WaitAndRunQueueP99OverBudget): wait 50ms a second (budget 10ms): wake-up to run 2ms, " +
			"queueing behind others 40ms, behind its own tasks 3ms, throttled 1ms, unsplit 4ms; run-queue p99 4ms of 812 waits (budget 1ms); throttled ratio -\n",
		" P99 ", " WAITS ", " 812 ",
		"(+2 pods omitted from status)",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("explain lacks %q:\n%s", want, s)
		}
	}
	if strings.Count(s, "OUTSIDE") != 1 {
		t.Errorf("only the pod outside its budget is named OUTSIDE:\n%s", s)
	}
	for _, pod := range []string{"shop/web-1", "shop/batch-0"} {
		if !strings.Contains(s, "  "+pod+" ") {
			t.Errorf("the table lacks %s:\n%s", pod, s)
		}
	}

	n.Spec.Tuning.Measurement, n.Status.PodBudgets = nil, nil
	out.Reset()
	if err := explain(&out, n, verdicts{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "Pod budgets") {
		t.Errorf("a profile without budgets prints a pod budgets section:\n%s", out.String())
	}
}
