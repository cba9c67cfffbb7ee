//go:build privileged

package desired

import (
	"os"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/kernellock"
)

// TestRealLoweredRTPeriodRefusesRuntimeAtPeriod lowers this kernel's
// sched_rt_period_us to 960ms (its runtime, 950ms by default, stays below): the kernel itself would take a runtime of
// 960ms (runtime == period: no throttling), the CRD passed it (below 1s),
// and the agent reads the real period and refuses it Invalid, with no knob.
func TestRealLoweredRTPeriodRefusesRuntimeAtPeriod(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	const period, runtime = "/proc/sys/kernel/sched_rt_period_us", "/proc/sys/kernel/sched_rt_runtime_us"
	for _, p := range []string{period, runtime} {
		was, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := os.WriteFile(p, was, 0); err != nil {
				t.Errorf("restore %s: %v", p, err)
			}
		})
	}
	before, err := os.ReadFile(runtime)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(period, []byte("960000"), 0); err != nil {
		t.Fatal(err)
	}
	s := Render(root, sysctl.Layout{}, v1alpha1.TuningSpec{Scheduler: &v1alpha1.SchedulerSpec{RTRuntime: ptr.To("960ms")}}, nil, nil)
	for _, k := range s.Knobs {
		if k.ID == "scheduler/rtRuntime" {
			t.Fatalf("a runtime equal to the node's lowered period became a knob: %+v", k)
		}
	}
	found := false
	for _, r := range s.Results {
		found = found || (r.Setting == "scheduler/rtRuntime" && r.State == v1alpha1.SettingInvalid && strings.Contains(r.Message, "sched_rt_period_us is 960000"))
	}
	if !found {
		t.Fatalf("no Invalid result naming the period 960000: %+v", s.Results)
	}
	if b, _ := os.ReadFile(runtime); string(b) != string(before) {
		t.Fatalf("sched_rt_runtime_us changed by a render: %s", b)
	}
}
