package measure

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

func TestChangedMaterially(t *testing.T) {
	lat := func(p99 time.Duration) *v1alpha1.LatencyStatus {
		return &v1alpha1.LatencyStatus{Source: SourceEBPF, Classes: []v1alpha1.ClassLatency{{Class: ClassNode, P99: &metav1.Duration{Duration: p99}}}}
	}
	base := &Result{Latency: lat(100 * time.Microsecond), ThrottledRatio: "0.0000",
		Findings: []v1alpha1.Finding{{Type: "AutogroupEnabled", Severity: "Warning", Message: "a"}},
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
			r.Findings = []v1alpha1.Finding{{Type: "AutogroupEnabled", Severity: "Warning", Message: "b"}}
		}), false},
		{"finding gone", with(func(r *Result) { r.Findings = nil }), true},
		{"budget", with(func(r *Result) { r.Budget.Status = metav1.ConditionFalse }), true},
		{"contention", with(func(r *Result) { r.Contention.Status = metav1.ConditionTrue }), true},
		{"nil", nil, true},
	} {
		if got := ChangedMaterially(base, tc.cur); got != tc.want {
			t.Errorf("%s: ChangedMaterially = %v, want %v", tc.name, got, tc.want)
		}
	}
}
