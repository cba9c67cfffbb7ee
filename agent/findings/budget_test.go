package findings

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
		in         BudgetInput
		status     metav1.ConditionStatus
		reason     string
		msgContain []string
	}{
		{"no budget", BudgetInput{}, metav1.ConditionTrue, v1alpha1.ReasonNoBudget, nil},
		{"empty budget", BudgetInput{Budget: &v1alpha1.LatencyBudget{}}, metav1.ConditionTrue, v1alpha1.ReasonNoBudget, nil},
		{"p99 within",
			BudgetInput{Budget: &v1alpha1.LatencyBudget{RunQueueP99: dur(100 * time.Microsecond)}, P99: dur(40 * time.Microsecond)},
			metav1.ConditionTrue, v1alpha1.ReasonWithinBudget, []string{"40µs <= budget 100µs"}},
		{"p99 outside",
			BudgetInput{Budget: &v1alpha1.LatencyBudget{RunQueueP99: dur(100 * time.Microsecond)}, P99: dur(3 * time.Millisecond)},
			metav1.ConditionFalse, v1alpha1.ReasonOutsideBudget, []string{"3ms > budget 100µs"}},
		{"p99 not measured",
			BudgetInput{Budget: &v1alpha1.LatencyBudget{RunQueueP99: dur(100 * time.Microsecond)}},
			metav1.ConditionUnknown, v1alpha1.ReasonNotMeasured, nil},
		{"ratio outside, p99 within",
			BudgetInput{Budget: &v1alpha1.LatencyBudget{RunQueueP99: dur(time.Millisecond), ThrottledRatio: ratio("0.01")},
				P99: dur(50 * time.Microsecond), Throttled: 0.25, ThrottledPod: "shop/api"},
			metav1.ConditionFalse, v1alpha1.ReasonOutsideBudget, []string{"0.2500 (shop/api) > budget 0.01", "50µs <= budget 1ms"}},
		{"ratio only, within",
			BudgetInput{Budget: &v1alpha1.LatencyBudget{ThrottledRatio: ratio("0.01")}},
			metav1.ConditionTrue, v1alpha1.ReasonWithinBudget, []string{"0.0000 <= budget 0.01"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Budget(tc.in)
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
