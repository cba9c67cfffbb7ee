package findings

import (
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/api/v1alpha1"
)

// Each check decides from an Observation alone: no host root.
func TestJudge(t *testing.T) {
	enabled := v1alpha1.Enabled
	iso := func(o Observation) Observation { o.Isolated, o.Reserved = cpuset.New(2, 3), cpuset.New(0, 1); return o }
	for _, tc := range []struct {
		name string
		obs  Observation
		typ  string
		want []string // nil: no finding of typ
	}{
		{"autogroup on", Observation{Sysctls: map[string]string{"kernel.sched_autogroup_enabled": "1"}},
			FindingAutogroup, []string{"kernel.sched_autogroup_enabled=1", "scheduler.autogroup: Disabled"}},
		{"autogroup asked for", Observation{Sysctls: map[string]string{"kernel.sched_autogroup_enabled": "1"},
			Scheduler: v1alpha1.SchedulerSpec{Autogroup: &enabled}}, FindingAutogroup, nil},
		{"autogroup unreadable", Observation{}, FindingAutogroup, nil},
		{"rt throttling off, nothing isolated", Observation{Sysctls: map[string]string{"kernel.sched_rt_runtime_us": "-1"}},
			FindingRTThrottlingOff, []string{"sched_rt_runtime_us=-1"}},
		{"rt throttling off on kernel-isolated CPUs", iso(Observation{Sysctls: map[string]string{"kernel.sched_rt_runtime_us": "-1"},
			Isolation: []string{"isolcpus=2-3"}}), FindingRTThrottlingOff, nil},
		{"run queue overloaded", Observation{Online: cpuset.New(0, 1), ProcsRunning: []int{9, 5, 7}},
			FindingRunQueueOverloaded, []string{"stayed at 4 or more", "2 online CPUs"}},
		{"run queue fine", Observation{Online: cpuset.New(0, 1), ProcsRunning: []int{9, 2, 7}}, FindingRunQueueOverloaded, nil},
		{"cmdline lacks isolation", iso(Observation{CmdlineRead: true}), FindingCmdline, []string{"isolcpus=2-3"}},
		{"cmdline unread", iso(Observation{}), FindingCmdline, nil},
		{"smt split", iso(Observation{Siblings: map[int]cpuset.CPUSet{2: cpuset.New(0, 2), 3: cpuset.New(3, 5)}}),
			FindingSMTSplit, []string{"2 with 0"}},
		{"rt task on isolated", iso(Observation{RTTasks: []RTTask{{Comm: "my\napp", TID: 7, Policy: SchedFIFO, RTPriority: 50, Allowed: cpuset.New(3)}}}),
			FindingRTTasksIsolated, []string{"(tid 7, SCHED_FIFO prio 50, cpus 3)"}},
		{"rt task on reserved", iso(Observation{RTTasks: []RTTask{{TID: 7, Policy: SchedRR, Allowed: cpuset.New(0)}}}), FindingRTTasksIsolated, nil},
		{"irqbalance unbanned", iso(Observation{IRQBalances: []facts.IRQBalance{{PID: 42, Banned: cpuset.New(2)}}}),
			FindingIRQBalance, []string{"pid 42", "CPUs 3 banned"}},
		{"irqbalance banned by the kernel", iso(Observation{IRQBalances: []facts.IRQBalance{{PID: 42}}, Isolation: []string{"nohz_full=2-3"}}),
			FindingIRQBalance, nil},
		{"cpu manager none", iso(Observation{CPUManagerNone: true, GuaranteedPods: []string{"shop/api"}}), FindingCPUManagerNone, []string{"shop/api"}},
		{"cpu manager none, no Guaranteed pod", iso(Observation{CPUManagerNone: true}), FindingCPUManagerNone, nil},
		{"opted-in pod throttled", Observation{Throttles: []PodThrottle{{Namespace: "shop", Name: "api", OptedIn: true, Periods: 100, Throttled: 50, Ratio: 0.5}}},
			FindingOptedInThrottled, []string{"50 of 100 periods", "ratio 0.5000"}},
		{"pod pressure", Observation{Throttles: []PodThrottle{{Namespace: "shop", Name: "api", OptedIn: true, Pressure: "23.50"}}},
			FindingPodCPUPressure, []string{"some avg10=23.50%"}},
		{"pressure of a pod not opted in", Observation{Throttles: []PodThrottle{{Namespace: "shop", Name: "api", Pressure: "23.50"}}},
			FindingPodCPUPressure, nil},
	} {
		var got *v1alpha1.Finding
		for _, f := range Judge(tc.obs) {
			if f.Type == tc.typ {
				got = &f
			}
		}
		switch {
		case tc.want == nil && got != nil:
			t.Errorf("%s: unexpected %s: %s", tc.name, tc.typ, got.Message)
		case tc.want != nil && got == nil:
			t.Errorf("%s: no %s finding", tc.name, tc.typ)
		case got != nil:
			for _, w := range tc.want {
				if !strings.Contains(got.Message, w) {
					t.Errorf("%s: message %q lacks %q", tc.name, got.Message, w)
				}
			}
		}
	}
}

// Critical findings come first; other packages' findings keep their place
// among their severity.
func TestJudgeOrder(t *testing.T) {
	got := Judge(Observation{
		Sysctls:   map[string]string{"kernel.numa_balancing": "1"},
		Other:     []v1alpha1.Finding{{Type: "Other", Severity: SeverityWarning}},
		Throttles: []PodThrottle{{Namespace: "a", Name: "b", OptedIn: true, Throttled: 1, Periods: 2, Ratio: 0.5}},
	})
	var types []string
	for _, f := range got {
		types = append(types, f.Type)
	}
	if strings.Join(types, ",") != FindingOptedInThrottled+",Other,"+FindingNumaBalancing {
		t.Errorf("order %v", types)
	}
}
