package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Real-time scheduling is the cluster admin's grant (namespaceSelector),
// bounded (policies, maxPriority), and refused outright where a spinning RT
// thread would starve the node: RT throttling off without isolated CPUs.
func TestRealtimeProfilesAreRejectedNamingTheField(t *testing.T) {
	grant := "realtime:\n  namespaceSelector: {}\n"
	cases := []struct {
		name, spec string
		want       []string
	}{
		{"no-namespace-selector", "realtime:\n  maxPriority: 10", []string{"spec.realtime", "realtime.namespaceSelector is required"}},
		{"empty-realtime", "realtime: {}", []string{"spec.realtime", "realtime.namespaceSelector is required"}},
		{"priority-zero", grant + "  maxPriority: 0", []string{"spec.realtime.maxPriority"}},
		{"priority-over-99", grant + "  maxPriority: 100", []string{"spec.realtime.maxPriority"}},
		{"policy-unknown", grant + "  policies: [DEADLINE]", []string{"spec.realtime.policies"}},
		{"policy-lowercase", grant + "  policies: [fifo]", []string{"spec.realtime.policies"}},
		{"policies-empty", grant + "  policies: []", []string{"spec.realtime.policies"}},
		{"policies-duplicate", grant + "  policies: [FIFO, FIFO]", []string{"spec.realtime.policies"}},
		{"unlimited-without-isolated", grant + "scheduler:\n  rtRuntime: Unlimited",
			[]string{"realtime with scheduler.rtRuntime Unlimited needs cpus.isolated"}},
		{"unlimited-reserved-only", grant + "scheduler:\n  rtRuntime: Unlimited\ncpus:\n  reserved: \"0\"",
			[]string{"realtime with scheduler.rtRuntime Unlimited needs cpus.isolated"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := selector + tc.spec
			obj := profile(t, fmt.Sprintf("bad-rt-%d", i), spec)
			err := k8s.Create(context.Background(), obj)
			if err == nil {
				_ = k8s.Delete(context.Background(), obj)
				t.Fatalf("API server accepted an invalid profile:\n%s", spec)
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

// TestRealtimeBoundariesAreAccepted pins the other side of each rule.
func TestRealtimeBoundariesAreAccepted(t *testing.T) {
	specs := map[string]string{
		"minimal":  "realtime:\n  namespaceSelector: {}",
		"bounds":   "realtime:\n  namespaceSelector:\n    matchLabels: {rt: \"yes\"}\n  policies: [RR]\n  maxPriority: 99",
		"lowest":   "realtime:\n  namespaceSelector: {}\n  policies: [FIFO, RR]\n  maxPriority: 1",
		"throttle": "realtime:\n  namespaceSelector: {}\nscheduler:\n  rtRuntime: 950ms",
		"unlimited-isolated": "realtime:\n  namespaceSelector: {}\nscheduler:\n  rtRuntime: Unlimited\n" +
			"cpus:\n  reserved: \"0\"\n  isolated: \"1\"\n  namespaceSelector: {}",
		"unlimited-without-realtime": "scheduler:\n  rtRuntime: Unlimited",
	}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			obj := profile(t, "ok-rt-"+name, selector+spec)
			if err := k8s.Create(context.Background(), obj); err != nil {
				t.Fatalf("valid profile rejected: %v\n%s", err, spec)
			}
			t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
		})
	}
}

func TestRealtimeDefaultsAreApplied(t *testing.T) {
	obj := profile(t, "rt-defaults", selector+"realtime:\n  namespaceSelector: {}")
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
	var got v1alpha1.LatencyProfile
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: "rt-defaults"}, &got); err != nil {
		t.Fatal(err)
	}
	rt := got.Spec.Realtime
	if rt == nil || rt.MaxPriority != 50 || len(rt.Policies) != 2 || rt.Policies[0] != v1alpha1.RealtimeFIFO || rt.Policies[1] != v1alpha1.RealtimeRR {
		t.Fatalf("defaults not applied: %+v", rt)
	}
}
