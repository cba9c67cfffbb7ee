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

// isolatedCPUs is the cpus block every realtime profile needs.
const isolatedCPUs = "cpus:\n  reserved: \"0\"\n  isolated: \"1\"\n  namespaceSelector: {}\n"

// Real-time scheduling is the cluster admin's grant (namespaceSelector),
// bounded (policies, maxPriority below the IRQ threads unless the ceiling
// is raised), and refused outright where a spinning RT thread would starve
// the node: realtime without isolated CPUs, and RT throttling off (however
// the runtime is spelled) without isolated CPUs.
func TestRealtimeProfilesAreRejectedNamingTheField(t *testing.T) {
	grant := "realtime:\n  namespaceSelector: {}\n"
	unthrottled := "scheduler.rtRuntime Unlimited turns RT throttling off and needs cpus.isolated"
	bounds := "rtRuntime must be Unlimited or a duration from 100ms to 990ms"
	cases := []struct {
		name, spec string
		want       []string
	}{
		{"no-namespace-selector", "realtime:\n  maxPriority: 10\n" + isolatedCPUs, []string{"spec.realtime", "realtime.namespaceSelector is required"}},
		{"empty-realtime", "realtime: {}\n" + isolatedCPUs, []string{"spec.realtime", "realtime.namespaceSelector is required"}},
		{"priority-zero", grant + "  maxPriority: 0\n" + isolatedCPUs, []string{"spec.realtime.maxPriority"}},
		{"priority-over-99", grant + "  maxPriority: 100\n" + isolatedCPUs, []string{"spec.realtime.maxPriority"}},
		{"priority-irq-threads", grant + "  maxPriority: 50\n" + isolatedCPUs,
			[]string{"spec.realtime", "realtime.maxPriority above 49 reaches the kernel's threaded IRQ handlers"}},
		{"priority-99-below-ceiling", grant + "  maxPriority: 99\n  priorityCeiling: BelowIRQThreads\n" + isolatedCPUs,
			[]string{"realtime.priorityCeiling AboveIRQThreads"}},
		{"ceiling-unknown", grant + "  priorityCeiling: Kernel\n" + isolatedCPUs, []string{"spec.realtime.priorityCeiling"}},
		{"policy-unknown", grant + "  policies: [DEADLINE]\n" + isolatedCPUs, []string{"spec.realtime.policies"}},
		{"policy-lowercase", grant + "  policies: [fifo]\n" + isolatedCPUs, []string{"spec.realtime.policies"}},
		{"policies-empty", grant + "  policies: []\n" + isolatedCPUs, []string{"spec.realtime.policies"}},
		{"policies-duplicate", grant + "  policies: [FIFO, FIFO]\n" + isolatedCPUs, []string{"spec.realtime.policies"}},
		{"realtime-without-isolated", grant, []string{"realtime needs cpus.isolated"}},
		{"realtime-reserved-only", grant + "cpus:\n  reserved: \"0\"", []string{"realtime needs cpus.isolated"}},
		{"unlimited-without-isolated", "scheduler:\n  rtRuntime: Unlimited", []string{unthrottled}},
		{"unlimited-reserved-only", "scheduler:\n  rtRuntime: Unlimited\ncpus:\n  reserved: \"0\"", []string{unthrottled}},
		// A runtime equal to the period is as unthrottled as Unlimited, and
		// above the ceiling (Unlimited is its one spelling), however spelled.
		{"period-1s", "scheduler:\n  rtRuntime: 1s", []string{"spec.scheduler.rtRuntime", bounds}},
		{"period-1000ms", "scheduler:\n  rtRuntime: 1000ms", []string{"spec.scheduler.rtRuntime", bounds}},
		{"period-1000000us", "scheduler:\n  rtRuntime: 1000000us", []string{"spec.scheduler.rtRuntime", bounds}},
		{"period-mixed", "scheduler:\n  rtRuntime: 999ms1000us", []string{"spec.scheduler.rtRuntime", bounds}},
		{"period-isolated", grant + "scheduler:\n  rtRuntime: 1s\n" + isolatedCPUs, []string{"spec.scheduler.rtRuntime", bounds}},
		{"period-with-realtime", grant + "scheduler:\n  rtRuntime: 1s", []string{bounds, "realtime needs cpus.isolated"}},
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
		"minimal":                             "realtime:\n  namespaceSelector: {}\n" + isolatedCPUs,
		"below-irq":                           "realtime:\n  namespaceSelector:\n    matchLabels: {rt: \"yes\"}\n  policies: [RR]\n  maxPriority: 49\n" + isolatedCPUs,
		"above-irq":                           "realtime:\n  namespaceSelector: {}\n  maxPriority: 99\n  priorityCeiling: AboveIRQThreads\n" + isolatedCPUs,
		"lowest":                              "realtime:\n  namespaceSelector: {}\n  policies: [FIFO, RR]\n  maxPriority: 1\n" + isolatedCPUs,
		"throttle":                            "realtime:\n  namespaceSelector: {}\nscheduler:\n  rtRuntime: 950ms\n" + isolatedCPUs,
		"at-the-ceiling":                      "scheduler:\n  rtRuntime: 990ms",
		"at-the-floor":                        "scheduler:\n  rtRuntime: 100000us",
		"unlimited-isolated":                  "realtime:\n  namespaceSelector: {}\nscheduler:\n  rtRuntime: Unlimited\n" + isolatedCPUs,
		"unlimited-isolated-without-realtime": "scheduler:\n  rtRuntime: Unlimited\n" + isolatedCPUs,
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
	obj := profile(t, "rt-defaults", selector+"realtime:\n  namespaceSelector: {}\n"+isolatedCPUs)
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
	var got v1alpha1.LatencyProfile
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: "rt-defaults"}, &got); err != nil {
		t.Fatal(err)
	}
	rt := got.Spec.Realtime
	if rt == nil || rt.MaxPriority != v1alpha1.DefaultMaxPriority || rt.PriorityCeiling != v1alpha1.CeilingBelowIRQThreads || len(rt.Policies) != 2 || rt.Policies[0] != v1alpha1.RealtimeFIFO || rt.Policies[1] != v1alpha1.RealtimeRR {
		t.Fatalf("defaults not applied: %+v", rt)
	}
}
