package power

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/internal/knobs"
)

// cpuDir is /sys/devices/system/cpu/cpuN.
func cpuDir(root *host.Root, cpu int, elem ...string) string {
	return root.Sys(append([]string{"devices", "system", "cpu", "cpu" + strconv.Itoa(cpu)}, elem...)...)
}

// idleState is one cpuidle state of one CPU.
type idleState struct {
	index     string // K of stateK
	name      string
	latencyUS uint64 // exit latency, microseconds
	disabled  bool
}

// idleStates lists cpuN/cpuidle/stateK, by K. A CPU without cpuidle (no
// driver, "none") has none; a state whose latency cannot be read is left out.
func idleStates(root *host.Root, cpu int) []idleState {
	dir := cpuDir(root, cpu, "cpuidle")
	entries, err := root.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []idleState
	for _, e := range entries {
		k, ok := strings.CutPrefix(e.Name(), "state")
		if !ok {
			continue
		}
		if _, err := strconv.Atoi(k); err != nil {
			continue
		}
		lat, err := root.ReadString(dir + "/" + e.Name() + "/latency")
		if err != nil {
			continue
		}
		us, err := strconv.ParseUint(lat, 10, 64)
		if err != nil {
			continue
		}
		name, _ := root.ReadString(dir + "/" + e.Name() + "/name")
		dis, _ := root.ReadString(dir + "/" + e.Name() + "/disable")
		out = append(out, idleState{index: k, name: name, latencyUS: us, disabled: dis == "1"})
	}
	slices.SortFunc(out, func(a, b idleState) int {
		x, _ := strconv.Atoi(a.index)
		y, _ := strconv.Atoi(b.index)
		return x - y
	})
	return out
}

// noLimit is a PM QoS limit that excludes no state.
const noLimit = math.MaxUint64

// resumeLatencyValue is what pm_qos_resume_latency_us takes for a limit in
// microseconds: the kernel reads and takes "0" as no limit, so a limit of 0
// is "n/a" (no latency tolerated).
func resumeLatencyValue(us uint64) string {
	if us == 0 {
		return knobs.ResumeLatencyNone
	}
	return strconv.FormatUint(us, 10)
}

// parseResumeLatency turns a pm_qos_resume_latency_us reading into a limit
// in microseconds (noLimit for "0"); ok is false for anything else.
func parseResumeLatency(s string) (uint64, bool) {
	switch s {
	case knobs.ResumeLatencyNone:
		return 0, true
	case knobs.ResumeLatencyNoLimit:
		return noLimit, true
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}
