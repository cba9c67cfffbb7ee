package window

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/power"
	"latencytier.io/latencytier/api/v1alpha1"
)

// The power package's deep-idle check is part of the window's findings.
func TestFindingsIncludeDeepIdle(t *testing.T) {
	root := testroot.New(t, map[string]string{
		"sys/devices/system/cpu/cpu1/cpuidle/state0/name":    "POLL\n",
		"sys/devices/system/cpu/cpu1/cpuidle/state0/latency": "0\n",
		"sys/devices/system/cpu/cpu1/cpuidle/state0/disable": "0\n",
		"sys/devices/system/cpu/cpu1/cpuidle/state1/name":    "C6\n",
		"sys/devices/system/cpu/cpu1/cpuidle/state1/latency": "133\n",
		"sys/devices/system/cpu/cpu1/cpuidle/state1/disable": "0\n",
	})
	reserved, isolated := "0", "1"
	spec := v1alpha1.TuningSpec{CPUs: &v1alpha1.CPUSpec{Reserved: &reserved, Isolated: &isolated},
		LatencyBudget: &v1alpha1.LatencyBudget{RunQueueP99: &metav1.Duration{Duration: 100 * time.Microsecond}}}
	fs := findingsOf(root, Input{Tuning: spec})
	for _, f := range fs {
		if f.Type == power.FindingDeepIdle {
			return
		}
	}
	t.Fatalf("no %s finding in %+v", power.FindingDeepIdle, fs)
}
