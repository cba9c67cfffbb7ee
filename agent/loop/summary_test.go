package loop

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// TestNodeSummary: every column kubectl get latencynodes prints is a figure
// of the status or "-", never empty.
func TestNodeSummary(t *testing.T) {
	d := func(s string) *metav1.Duration { v, _ := time.ParseDuration(s); return &metav1.Duration{Duration: v} }
	dash := v1alpha1.SummaryUnknown
	for name, c := range map[string]struct {
		st   v1alpha1.LatencyNodeStatus
		want v1alpha1.NodeSummary
	}{
		"no report yet": {v1alpha1.LatencyNodeStatus{}, v1alpha1.NodeSummary{Applied: dash, P99: dash, Drift: dash,
			BaselineP99: dash, PodBaselineP99: dash, PodP99: dash, Throttled: dash, Budget: dash, Reboot: dash,
			Partitions: dash, Boot: dash, NeedsBoot: dash, Kernel: dash, Class: dash}},
		"applied, measured, no pods measured": {v1alpha1.LatencyNodeStatus{
			Conditions: []metav1.Condition{{Type: v1alpha1.NodeApplied, Status: metav1.ConditionTrue},
				{Type: v1alpha1.NodeDrifted, Status: metav1.ConditionFalse}},
			RunQueueP99: d("409.481µs"), ThrottledRatio: "0.0000",
			Baseline:  &v1alpha1.LatencyEvidence{RunQueue: v1alpha1.LatencySummary{P99: d("6.4ms")}},
			Current:   &v1alpha1.LatencyEvidence{Pods: &v1alpha1.LatencySummary{P99: d("1ms")}},
			Isolation: &v1alpha1.IsolationStatus{NeedsBoot: []v1alpha1.BootIsolationGoal{"Tick", "RCU"}},
			Boot:      &v1alpha1.BootStatus{State: "NotNeeded"},
			Kernel:    &v1alpha1.KernelFacts{Version: "6.18.44", ActiveClass: "fair"},
		}, v1alpha1.NodeSummary{Applied: "True", P99: "409.481µs", Drift: "False",
			BaselineP99: "6.4ms", PodBaselineP99: dash, PodP99: "1ms", Throttled: "0.0000", Budget: dash, Reboot: dash,
			Partitions: dash, Boot: "NotNeeded", NeedsBoot: "Tick,RCU", Kernel: "6.18.44", Class: "fair"}},
		"a sched_ext scheduler, partial": {v1alpha1.LatencyNodeStatus{
			Kernel: &v1alpha1.KernelFacts{Version: "7.3.4", ActiveClass: "ext",
				SchedExt: &v1alpha1.SchedExtFacts{Supported: true, State: "enabled", Ops: "scx_lavd", Partial: true}},
		}, v1alpha1.NodeSummary{Applied: dash, P99: dash, Drift: dash,
			BaselineP99: dash, PodBaselineP99: dash, PodP99: dash, Throttled: dash, Budget: dash, Reboot: dash,
			Partitions: dash, Boot: dash, NeedsBoot: dash, Kernel: "7.3.4", Class: "ext:scx_lavd (partial)"}},
		"kernel facts of an agent without the class": {v1alpha1.LatencyNodeStatus{
			Kernel: &v1alpha1.KernelFacts{Version: "6.12.1"},
		}, v1alpha1.NodeSummary{Applied: dash, P99: dash, Drift: dash,
			BaselineP99: dash, PodBaselineP99: dash, PodP99: dash, Throttled: dash, Budget: dash, Reboot: dash,
			Partitions: dash, Boot: dash, NeedsBoot: dash, Kernel: "6.12.1", Class: dash}},
	} {
		if got := v1alpha1.SummarizeNode(c.st); got != c.want {
			t.Errorf("%s: got %+v\nwant %+v", name, got, c.want)
		}
	}
}
