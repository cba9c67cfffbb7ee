package desired_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/desired"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// spec.power reaches the knob list (and so the journal and the engine), and
// a node without cpufreq reports the governor Unsupported.
func TestRenderIncludesPower(t *testing.T) {
	root := testroot.New(t, map[string]string{
		"sys/devices/system/cpu/online":                              "0\n",
		"sys/devices/system/cpu/cpu0/power/pm_qos_resume_latency_us": "0\n",
	})
	perf := v1alpha1.GovernorPerformance
	spec := v1alpha1.TuningSpec{Power: &v1alpha1.PowerSpec{All: &v1alpha1.CPUPower{
		MaxIdleExitLatency: &metav1.Duration{}, Governor: &perf}}}
	ds := desired.Render(root, sysctl.Layout{}, spec, nil, nil)
	if len(ds.Knobs) != 1 || ds.Knobs[0].ID != "power/cpu0/resume-latency" || ds.Knobs[0].Desired != "n/a" {
		t.Fatalf("knobs %+v", ds.Knobs)
	}
	if len(ds.Results) != 1 || ds.Results[0].Setting != "power/all/governor" || ds.Results[0].State != v1alpha1.SettingUnsupported {
		t.Fatalf("results %+v", ds.Results)
	}
}
