package loop

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
)

// A scheduler/class the kernel ejected (Fallback) makes the node not
// Applied, with its own reason and the kernel's words, even beside
// settings the kernel refused as Invalid (which alone a rollout excuses):
// the rollout fails the node on it, so a canary stops the fleet.
func TestAppliedConditionCountsFallback(t *testing.T) {
	const why = "kernel ejected latencytier: runnable task stall (kworker/1:2[812] failed to run for 5.004s)"
	fallback := v1alpha1.SettingResult{Setting: knobs.SchedulerClassID, Desired: "ext:latencytier", Actual: "fair",
		State: v1alpha1.SettingFallback, Message: why}
	applied := v1alpha1.SettingResult{Setting: knobs.Autogroup.ID(), State: v1alpha1.SettingApplied}
	invalid := v1alpha1.SettingResult{Setting: "sysctl/vm.swappiness", State: v1alpha1.SettingInvalid}
	for _, settings := range [][]v1alpha1.SettingResult{{applied, fallback}, {fallback, invalid, applied}} {
		c := appliedCondition(nil, settings, 0)
		if c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonSchedulerFallback ||
			!strings.Contains(c.Message, why) || !strings.Contains(c.Message, "scheduler/class (Fallback)") {
			t.Errorf("%d settings: %+v; want False, %s, naming the kernel's reason", len(settings), c, v1alpha1.ReasonSchedulerFallback)
		}
	}
	if c := appliedCondition(nil, []v1alpha1.SettingResult{applied, invalid}, 0); c.Reason != v1alpha1.ReasonPartiallyApplied {
		t.Errorf("without Fallback: %+v, want %s as before", c, v1alpha1.ReasonPartiallyApplied)
	}
}
