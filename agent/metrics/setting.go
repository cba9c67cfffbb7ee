package metrics

import "latencytier.io/latencytier/internal/settingid"

// seriesKey is the bounded label value of setting id: a setting of a
// pod-scoped kind (settingid: cpuquota, cpuset/pod, rtsched), made per pod
// incarnation and below it, is named by its kind and pod
// ("rtsched/<ns>/<pod>"), never its UID, container or thread, which as label
// values would mint a series per thread and per pod UID (every restart,
// every StatefulSet recreation). Every other ID (sysctls, IRQs, units) is
// already bounded by the node and stays as it is.
// TestSettingSeriesAreBounded builds the IDs with the agent's own
// constructors, so it fails when one changes shape.
func seriesKey(id string) string {
	if scope, ok := settingid.PodScope(id); ok {
		return scope
	}
	return id
}
