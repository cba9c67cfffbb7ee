package measure

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

func TestBudgetCondition(t *testing.T) {
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	ratio := func(s string) *string { return &s }
	for _, tc := range []struct {
		name       string
		in         budgetInput
		status     metav1.ConditionStatus
		reason     string
		msgContain []string
	}{
		{"no budget", budgetInput{}, metav1.ConditionTrue, v1alpha1.ReasonNoBudget, nil},
		{"empty budget", budgetInput{budget: &v1alpha1.LatencyBudget{}}, metav1.ConditionTrue, v1alpha1.ReasonNoBudget, nil},
		{"p99 within",
			budgetInput{budget: &v1alpha1.LatencyBudget{RunQueueP99: dur(100 * time.Microsecond)}, p99: dur(40 * time.Microsecond)},
			metav1.ConditionTrue, v1alpha1.ReasonWithinBudget, []string{"40µs <= budget 100µs"}},
		{"p99 outside",
			budgetInput{budget: &v1alpha1.LatencyBudget{RunQueueP99: dur(100 * time.Microsecond)}, p99: dur(3 * time.Millisecond)},
			metav1.ConditionFalse, v1alpha1.ReasonOutsideBudget, []string{"3ms > budget 100µs"}},
		{"p99 not measured",
			budgetInput{budget: &v1alpha1.LatencyBudget{RunQueueP99: dur(100 * time.Microsecond)}},
			metav1.ConditionUnknown, v1alpha1.ReasonNotMeasured, nil},
		{"ratio outside, p99 within",
			budgetInput{budget: &v1alpha1.LatencyBudget{RunQueueP99: dur(time.Millisecond), ThrottledRatio: ratio("0.01")},
				p99: dur(50 * time.Microsecond), throttled: 0.25, throttledPod: "shop/api"},
			metav1.ConditionFalse, v1alpha1.ReasonOutsideBudget, []string{"0.2500 (shop/api) > budget 0.01", "50µs <= budget 1ms"}},
		{"ratio only, within",
			budgetInput{budget: &v1alpha1.LatencyBudget{ThrottledRatio: ratio("0.01")}},
			metav1.ConditionTrue, v1alpha1.ReasonWithinBudget, []string{"0.0000 <= budget 0.01"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := budgetCondition(tc.in)
			if c.Type != v1alpha1.NodeWithinBudget || c.Status != tc.status || c.Reason != tc.reason {
				t.Fatalf("got %s=%s (%s) %q, want %s (%s)", c.Type, c.Status, c.Reason, c.Message, tc.status, tc.reason)
			}
			for _, s := range tc.msgContain {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message %q lacks %q", c.Message, s)
				}
			}
		})
	}
}

func TestChangedMaterially(t *testing.T) {
	lat := func(p99 time.Duration) *v1alpha1.LatencyStatus {
		return &v1alpha1.LatencyStatus{Source: SourceEBPF, Classes: []v1alpha1.ClassLatency{{Class: ClassNode, P99: &metav1.Duration{Duration: p99}}}}
	}
	base := &Result{Latency: lat(100 * time.Microsecond), ThrottledRatio: "0.0000",
		Findings: []v1alpha1.Finding{{Type: FindingAutogroup, Severity: SeverityWarning, Message: "a"}},
		Budget:   metav1.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonWithinBudget}}
	with := func(f func(r *Result)) *Result {
		r := *base
		f(&r)
		return &r
	}
	for _, tc := range []struct {
		name string
		cur  *Result
		want bool
	}{
		{"same", with(func(*Result) {}), false},
		{"p99 +5%", with(func(r *Result) { r.Latency = lat(105 * time.Microsecond) }), false},
		{"p99 +50%", with(func(r *Result) { r.Latency = lat(150 * time.Microsecond) }), true},
		{"p99 halved", with(func(r *Result) { r.Latency = lat(50 * time.Microsecond) }), true},
		{"latency gone", with(func(r *Result) { r.Latency = nil }), true},
		{"ratio", with(func(r *Result) { r.ThrottledRatio = "0.2000" }), true},
		{"finding evidence only", with(func(r *Result) {
			r.Findings = []v1alpha1.Finding{{Type: FindingAutogroup, Severity: SeverityWarning, Message: "b"}}
		}), false},
		{"finding gone", with(func(r *Result) { r.Findings = nil }), true},
		{"budget", with(func(r *Result) { r.Budget.Status = metav1.ConditionFalse }), true},
		{"nil", nil, true},
	} {
		if got := ChangedMaterially(base, tc.cur); got != tc.want {
			t.Errorf("%s: ChangedMaterially = %v, want %v", tc.name, got, tc.want)
		}
	}
}
