package findings

import (
	"fmt"
	"strings"

	"latencytier.io/latencytier/agent/schedext"
	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
)

// schedExtLoaded: a sched_ext BPF scheduler someone else loaded runs the
// node's tasks (the agent loads none today, so every attached one is
// someone else's). It names the scheduler, and says what the profile's
// settings do under it: the fair-class knobs stay written but act only on
// the tasks left in the fair class (none when it switched every task),
// rtRuntime still bounds real-time tasks (they run above sched_ext), and
// pod CPU limits (cpu.max) hold only if that scheduler enforces them. The
// agent never unloads it: another writer on the node is a peer.
func schedExtLoaded(o Observation) *v1alpha1.Finding {
	s := o.SchedExt
	if s.Class() != schedext.ClassExt {
		return nil
	}
	name := "a sched_ext scheduler"
	it := "it"
	if s.Ops != "" {
		name = `sched_ext scheduler "` + s.Ops + `"` // escaped by schedext
		it = `"` + s.Ops + `"`
	}
	var scope string
	switch {
	case s.State != schedext.StateEnabled:
		scope = "is " + s.State
	case s.Partial():
		scope = "runs the tasks that asked for SCHED_EXT (partial mode)"
	default:
		scope = "runs every normal task"
	}
	loaded := "loaded outside latencytier"
	if s.EnableSeq >= 0 {
		loaded += fmt.Sprintf(", enable_seq %d", s.EnableSeq)
	}
	parts := []string{fmt.Sprintf("%s %s (%s)", name, scope, loaded)}
	fair, rt := setSchedulerKnobs(o.Scheduler)
	switch {
	case len(fair) == 0:
	case s.Partial():
		parts = append(parts, fmt.Sprintf("this profile's fair-class settings (%s) act only on the tasks it left in the fair class", strings.Join(fair, ", ")))
	default:
		parts = append(parts, fmt.Sprintf("this profile's fair-class settings (%s) stay written but do not act on the tasks %s runs; they act again if it exits",
			strings.Join(fair, ", "), it))
	}
	if rt {
		parts = append(parts, "rtRuntime still bounds real-time tasks, which run above it")
	}
	limits := "pod CPU limits (cpu.max) hold for its tasks only if " + it + " enforces them, so throttling can read 0"
	if o.CPUQuota {
		limits += ", and this profile's cpuQuota changes limits it may not enforce"
	}
	parts = append(parts, limits, "the run-queue latency measured is its scheduling, not the fair class's")
	return finding(FindingSchedExtLoaded, SeverityWarning, "%s", strings.Join(parts, "; "))
}

// setSchedulerKnobs are the fields the profile sets among the fair-class
// knobs, in the catalogue's order, and whether it sets rtRuntime.
func setSchedulerKnobs(s v1alpha1.SchedulerSpec) (fair []string, rtRuntime bool) {
	set := map[string]bool{
		knobs.Autogroup.Field:         s.Autogroup != nil,
		knobs.NumaBalancing.Field:     s.NumaBalancing != nil,
		knobs.MigrationCost.Field:     s.MigrationCost != nil,
		knobs.BaseSlice.Field:         s.BaseSlice != nil,
		knobs.Latency.Field:           s.Latency != nil,
		knobs.WakeupGranularity.Field: s.WakeupGranularity != nil,
		knobs.RTRuntime.Field:         s.RTRuntime != nil,
	}
	for _, k := range knobs.SchedulerKnobs {
		switch {
		case !set[k.Field]:
		case k.FairOnly:
			fair = append(fair, k.Field)
		default:
			rtRuntime = true
		}
	}
	return fair, rtRuntime
}
