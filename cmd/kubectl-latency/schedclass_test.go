package main

import (
	"testing"

	"k8s.io/utils/ptr"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func TestSchedulingClass(t *testing.T) {
	for _, tc := range []struct {
		k    v1alpha1.KernelFacts
		want string
	}{
		{v1alpha1.KernelFacts{SchedulerClass: "EEVDF"}, ""}, // an agent that does not report it
		{v1alpha1.KernelFacts{ActiveClass: "fair", SchedExt: &v1alpha1.SchedExtFacts{Note: "sched_ext is not built into this kernel"}},
			"fair (sched_ext is not built into this kernel)"},
		{v1alpha1.KernelFacts{ActiveClass: "fair", SchedExt: &v1alpha1.SchedExtFacts{Supported: true, State: "disabled", EnableSeq: ptr.To[int64](0)}}, "fair"},
		{v1alpha1.KernelFacts{ActiveClass: "ext", SchedExt: &v1alpha1.SchedExtFacts{Supported: true, State: "enabled", Ops: "scx_bpfland", Partial: true, EnableSeq: ptr.To[int64](2)}},
			"ext: scx_bpfland (enabled, partial: SCHED_EXT tasks only, enable_seq 2)"},
		{v1alpha1.KernelFacts{ActiveClass: "ext", SchedExt: &v1alpha1.SchedExtFacts{Supported: true, State: "disabling"}}, "ext: - (disabling)"},
		{v1alpha1.KernelFacts{ActiveClass: "unknown", SchedExt: &v1alpha1.SchedExtFacts{Supported: true, Note: `state: "on fire" is not one of enabling, enabled, disabling, disabled`}},
			`unknown (state: "on fire" is not one of enabling, enabled, disabling, disabled)`},
	} {
		if got := schedulingClass(&tc.k); got != tc.want {
			t.Errorf("schedulingClass(%+v) = %q, want %q", tc.k, got, tc.want)
		}
	}
}
