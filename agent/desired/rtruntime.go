package desired

import (
	"fmt"
	"slices"
	"strconv"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
)

// rtPeriodDefault is kernel.sched_rt_period_us unless someone lowered it.
const rtPeriodDefault = 1000000

// holdRTThrottling refuses, on this node, a scheduler.rtRuntime that turns
// RT throttling off without cpus.isolated: -1 (Unlimited) or a runtime at
// or above the node's own kernel.sched_rt_period_us. The CRD refuses
// Unlimited and >= 1s against the default period; a node whose period was
// lowered (say to 500ms) makes a 600ms runtime just as unthrottled, so the
// agent compares with the period it reads. Such a knob is dropped (no
// write; an earlier value is restored) and reported Invalid: it is the
// profile author's to fix.
func (s *State) holdRTThrottling(root *host.Root, t v1alpha1.TuningSpec) {
	i := slices.IndexFunc(s.Knobs, func(k knob.Knob) bool { return k.ID == knobs.RTRuntime.ID() })
	if i < 0 || (t.CPUs != nil && t.CPUs.Isolated != nil) {
		return
	}
	k := s.Knobs[i]
	runtime, err := strconv.ParseInt(k.Desired, 10, 64)
	if err != nil {
		return // the kernel refuses it; the engine reports Invalid
	}
	period, where := int64(rtPeriodDefault), "the kernel default"
	if v, err := root.ReadString(root.Proc("sys", "kernel", "sched_rt_period_us")); err == nil {
		if p, err := strconv.ParseInt(v, 10, 64); err == nil && p > 0 {
			period, where = p, "this node's"
		}
	}
	if runtime >= 0 && runtime < period {
		return
	}
	s.Knobs = slices.Delete(s.Knobs, i, i+1)
	s.Results = append(s.Results, v1alpha1.SettingResult{Setting: k.ID, Desired: k.Desired, State: v1alpha1.SettingInvalid,
		Message: fmt.Sprintf("sched_rt_runtime_us %s turns RT throttling off (%s sched_rt_period_us is %d): a spinning real-time thread would starve every other task on its CPU; allowed only with cpus.isolated, not written",
			k.Desired, where, period)})
}
