package desired

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// A runtime at or above the node's own sched_rt_period_us is RT throttling
// off, like Unlimited: without cpus.isolated it is Invalid on that node and
// never written, whatever the CRD let through (a period lowered to 500ms
// makes 600ms unthrottled).
func TestRTRuntimeAtOrAbovePeriodIsInvalidOnTheNode(t *testing.T) {
	isolated := &v1alpha1.CPUSpec{Reserved: ptr.To("0"), Isolated: ptr.To("1"), NamespaceSelector: &v1alpha1.NamespaceSelector{}}
	cases := []struct {
		name, period, runtime string
		cpus                  *v1alpha1.CPUSpec
		written               bool
		why                   string // "" = the period's message
	}{
		{"below-default-period", "1000000", "950ms", nil, true, ""},
		// At the period is above the ceiling (v1alpha1.RTRuntimeMax) first.
		{"equal-default-period", "1000000", "1s", nil, false, "out of bounds"},
		{"equal-default-period-isolated", "1000000", "1s", isolated, false, "out of bounds"},
		{"unlimited", "1000000", "Unlimited", nil, false, ""},
		{"below-lowered-period", "500000", "400ms", nil, true, ""},
		{"equal-lowered-period", "500000", "500ms", nil, false, ""},
		{"above-lowered-period", "500000", "600ms", nil, false, ""},
		{"unlimited-isolated", "500000", "Unlimited", isolated, true, ""},
		{"above-lowered-period-isolated", "500000", "500ms", isolated, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := testroot.New(t, map[string]string{
				"proc/sys/kernel/sched_rt_period_us":  tc.period,
				"proc/sys/kernel/sched_rt_runtime_us": "950000",
			})
			spec := v1alpha1.TuningSpec{Scheduler: &v1alpha1.SchedulerSpec{RTRuntime: ptr.To(tc.runtime)}, CPUs: tc.cpus}
			s := Render(root, sysctl.Layout{}, spec, nil, nil)
			written := false
			for _, k := range s.Knobs {
				written = written || k.ID == "scheduler/rtRuntime"
			}
			if written != tc.written {
				t.Fatalf("rtRuntime %s with period %s: knob %v, want %v; results %+v", tc.runtime, tc.period, written, tc.written, s.Results)
			}
			if tc.written {
				return
			}
			var r *v1alpha1.SettingResult
			for i := range s.Results {
				if s.Results[i].Setting == "scheduler/rtRuntime" {
					r = &s.Results[i]
				}
			}
			if tc.why != "" {
				if r == nil || r.State != v1alpha1.SettingInvalid || !strings.Contains(r.Message, tc.why) {
					t.Fatalf("result %+v, want Invalid saying %q", r, tc.why)
				}
				return
			}
			if r == nil || r.State != v1alpha1.SettingInvalid || !strings.Contains(r.Message, "sched_rt_period_us is "+tc.period) ||
				!strings.Contains(r.Message, "cpus.isolated") {
				t.Fatalf("result %+v, want Invalid naming the node's period %s and cpus.isolated", r, tc.period)
			}
		})
	}
}
