package findings

import (
	"strconv"
	"time"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/ratio"
)

// podPressureWarn is the cgroup v2 cpu.pressure "some avg10" (percent) from
// which an opted-in pod is reported as waiting for CPU.
const podPressureWarn = 10.0

// PodThrottle is one pod's CFS throttling over the window.
type PodThrottle struct {
	Namespace, Name string
	// OptedIn says the pod asked for quota removal.
	OptedIn            bool
	Periods, Throttled int64
	Time               time.Duration
	Ratio              float64
	// Pressure is the pod cgroup's cpu.pressure "some avg10" (cgroup v2
	// only; "" otherwise).
	Pressure string
}

// optedInThrottled: a pod that asked for quota removal and is still
// throttled means the removal failed or was undone.
func optedInThrottled(o Observation) []v1alpha1.Finding {
	var out []v1alpha1.Finding
	for _, t := range o.Throttles {
		if !t.OptedIn || t.Throttled <= 0 {
			continue
		}
		out = append(out, *finding(FindingOptedInThrottled, SeverityCritical,
			"pod %s/%s opted into CFS quota removal but was throttled in %d of %d periods (ratio %s, %s throttled): the quota is back or was never removed",
			t.Namespace, t.Name, t.Throttled, t.Periods, ratio.Format(t.Ratio), t.Time))
	}
	return out
}

// podPressure: on cgroup v2, an opted-in pod whose tasks were runnable but
// waiting for CPU a noticeable share of the last 10 s.
func podPressure(o Observation) []v1alpha1.Finding {
	var out []v1alpha1.Finding
	for _, t := range o.Throttles {
		v, err := strconv.ParseFloat(t.Pressure, 64)
		if !t.OptedIn || err != nil || v < podPressureWarn {
			continue
		}
		out = append(out, *finding(FindingPodCPUPressure, SeverityWarning,
			"pod %s/%s cpu.pressure some avg10=%s%%: its tasks waited for a CPU that share of the last 10s (run-queue latency inside the pod)",
			t.Namespace, t.Name, t.Pressure))
	}
	return out
}
