package metrics

import "strings"

// podScopedKinds start the IDs of settings made per pod incarnation and
// below it: "cpuquota/<ns>/<pod>/<uid>[/<container>]" (agent/cpuquota),
// "cpuset/pod/<ns>/<pod>/<uid>…" (agent/cpuset), "rtsched/<ns>/<pod>/<uid>/
// <tid>@<start>" (agent/rtsched). As label values those would mint a series
// per thread and per pod UID (every restart, every StatefulSet recreation).
// TestSettingSeriesAreBounded builds the IDs with those packages' own constructors, so it
// fails when one changes shape.
var podScopedKinds = []string{"cpuquota/", "cpuset/pod/", "rtsched/"}

// seriesKey is the bounded label value of setting id: a pod-scoped setting
// is named by its kind and pod ("rtsched/<ns>/<pod>"), never its UID,
// container or thread; every other ID (sysctls, IRQs, units) is already
// bounded by the node and stays as it is.
func seriesKey(id string) string {
	for _, kind := range podScopedKinds {
		rest, ok := strings.CutPrefix(id, kind)
		if !ok {
			continue
		}
		ns, rest, _ := strings.Cut(rest, "/")
		name, _, _ := strings.Cut(rest, "/")
		return kind + ns + "/" + name
	}
	return id
}
