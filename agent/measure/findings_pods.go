package measure

import (
	"strconv"

	"latencytier.io/latencytier/api/v1alpha1"
)

// optedInThrottled: a pod that asked for quota removal and is still
// throttled means the removal failed or was undone.
func (c *checker) optedInThrottled() []v1alpha1.Finding {
	var out []v1alpha1.Finding
	for _, t := range c.throttles {
		if !t.pod.OptedIn || t.delta.throttled <= 0 {
			continue
		}
		out = append(out, *finding(FindingOptedInThrottled, SeverityCritical,
			"pod %s/%s opted into CFS quota removal but was throttled in %d of %d periods (ratio %s, %s throttled): the quota is back or was never removed",
			t.pod.Namespace, t.pod.Name, t.delta.throttled, t.delta.periods, formatRatio(t.delta.ratio()), t.delta.time))
	}
	return out
}

// podPressure: on cgroup v2, an opted-in pod whose tasks were runnable but
// waiting for CPU a noticeable share of the last 10 s.
func (c *checker) podPressure() []v1alpha1.Finding {
	var out []v1alpha1.Finding
	for _, t := range c.throttles {
		v, err := strconv.ParseFloat(t.pressure, 64)
		if !t.pod.OptedIn || err != nil || v < podPressureWarn {
			continue
		}
		out = append(out, *finding(FindingPodCPUPressure, SeverityWarning,
			"pod %s/%s cpu.pressure some avg10=%s%%: its tasks waited for a CPU that share of the last 10s (run-queue latency inside the pod)",
			t.pod.Namespace, t.pod.Name, t.pressure))
	}
	return out
}
