package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// TestPowerRulesRejectNamingTheField: every power rule, as the real API
// server enforces it on a LatencyProfile.
func TestPowerRulesRejectNamingTheField(t *testing.T) {
	const cpus = "cpus:\n  reserved: \"0\"\n  isolated: \"1\"\n  namespaceSelector: {}\n"
	cases := []struct {
		name, spec string
		want       []string
	}{
		{"all-and-isolated", cpus + "power:\n  all:\n    maxIdleExitLatency: 0us\n  isolated:\n    maxIdleExitLatency: 0us",
			[]string{"spec.power", "power.all excludes power.reserved and power.isolated"}},
		{"all-and-reserved", cpus + "power:\n  all:\n    governor: performance\n  reserved:\n    governor: performance",
			[]string{"spec.power", "power.all excludes"}},
		{"reserved-without-cpus", "power:\n  reserved:\n    maxIdleExitLatency: 10us",
			[]string{"power.reserved needs cpus.reserved"}},
		{"isolated-without-cpus", "cpus:\n  reserved: \"0\"\npower:\n  isolated:\n    maxIdleExitLatency: 0us",
			[]string{"power.isolated needs cpus.isolated"}},
		{"too-long", "power:\n  all:\n    maxIdleExitLatency: 11ms",
			[]string{"spec.power.all.maxIdleExitLatency", "at most 10ms"}},
		{"sub-microsecond", "power:\n  all:\n    maxIdleExitLatency: 500ns",
			[]string{"spec.power.all.maxIdleExitLatency", "whole microseconds"}},
		{"not-a-duration", "power:\n  all:\n    maxIdleExitLatency: fast",
			[]string{"spec.power.all.maxIdleExitLatency"}},
		{"negative", "power:\n  all:\n    maxIdleExitLatency: -1us",
			[]string{"spec.power.all.maxIdleExitLatency"}},
		{"governor-userspace", "power:\n  all:\n    governor: userspace",
			[]string{"spec.power.all.governor"}},
		{"empty-class", "power:\n  all: {}",
			[]string{"spec.power.all", "set maxIdleExitLatency, governor or both"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := profile(t, fmt.Sprintf("bad-power-%d", i), selector+tc.spec)
			err := k8s.Create(context.Background(), obj)
			if err == nil {
				_ = k8s.Delete(context.Background(), obj)
				t.Fatalf("API server accepted an invalid profile:\n%s", tc.spec)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message does not name %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestPowerBoundariesAreAccepted pins the other side of each power rule.
func TestPowerBoundariesAreAccepted(t *testing.T) {
	specs := map[string]string{
		"all-polling": "power:\n  all:\n    maxIdleExitLatency: 0us\n    governor: performance",
		"per-class":   "cpus:\n  reserved: \"0\"\n  isolated: \"1-3\"\n  namespaceSelector: {}\npower:\n  reserved:\n    maxIdleExitLatency: 10ms\n    governor: schedutil\n  isolated:\n    maxIdleExitLatency: 1us",
		"reserved":    "cpus:\n  reserved: \"0\"\npower:\n  reserved:\n    governor: powersave",
		"fraction":    "power:\n  all:\n    maxIdleExitLatency: 1.5us",
	}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			obj := profile(t, "ok-power-"+name, selector+spec)
			if err := k8s.Create(context.Background(), obj); err != nil {
				t.Fatalf("valid profile rejected: %v\n%s", err, spec)
			}
			t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
		})
	}
}

// TestLatencyNodePowerNeedsItsClass: the LatencyNode CRD carries the same
// rules under spec.tuning.power, the path the agent reads.
func TestLatencyNodePowerNeedsItsClass(t *testing.T) {
	ctx := context.Background()
	zero := metav1.Duration{}
	ln := &v1alpha1.LatencyNode{
		ObjectMeta: metav1.ObjectMeta{Name: "power-no-isolated"},
		Spec: v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionApply, Profile: "p", ProfileGeneration: 1,
			Tuning: v1alpha1.TuningSpec{Power: &v1alpha1.PowerSpec{Isolated: &v1alpha1.CPUPower{MaxIdleExitLatency: &zero}}}},
	}
	err := k8s.Create(ctx, ln)
	if err == nil || !strings.Contains(err.Error(), "spec.tuning") || !strings.Contains(err.Error(), "power.isolated needs cpus.isolated") {
		_ = k8s.Delete(ctx, ln)
		t.Fatalf("power.isolated without cpus.isolated: want rejection naming it, got %v", err)
	}
	ln.Spec.Tuning.Power = &v1alpha1.PowerSpec{All: ln.Spec.Tuning.Power.Isolated}
	if err := k8s.Create(ctx, ln); err != nil {
		t.Fatalf("power.all with 0us must be accepted: %v", err)
	}
	_ = k8s.Delete(ctx, ln)
}
