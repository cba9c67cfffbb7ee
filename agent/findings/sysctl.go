package findings

import (
	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
)

// Sysctls are the sysctls the checks look at, for the reader.
func Sysctls() []string {
	return []string{knobs.Autogroup.Sysctl(), knobs.NumaBalancing.Sysctl(), knobs.RTRuntime.Sysctl()}
}

// autogroup: with kernel.sched_autogroup_enabled=1 CFS first shares CPU
// between sessions, then within each, so a one-thread cron job in its own
// session gets as much as a 500-thread server started by systemd, whose
// threads then wait in the run queue although the CPUs are not full.
func autogroup(o Observation) *v1alpha1.Finding {
	return toggleOn(o, knobs.Autogroup, o.Scheduler.Autogroup, FindingAutogroup,
		"each session (a cron job, an ssh login) gets as much CPU as a whole many-threaded server")
}

func numaBalancing(o Observation) *v1alpha1.Finding {
	return toggleOn(o, knobs.NumaBalancing, o.Scheduler.NumaBalancing, FindingNumaBalancing,
		"the kernel migrates pages and tasks between NUMA nodes under load")
}

// toggleOn finds an on/off scheduler knob switched on although the profile
// does not ask for it (Enabled); why says what that costs.
func toggleOn(o Observation, k knobs.Scheduler, want *v1alpha1.Toggle, typ, why string) *v1alpha1.Finding {
	v, ok := o.Sysctls[k.Sysctl()]
	if !ok || v == "0" || togglePtr(want) == v1alpha1.Enabled {
		return nil
	}
	return finding(typ, SeverityWarning, "%s=%s: %s; set scheduler.%s: Disabled", k.Sysctl(), v, why, k.Field)
}

func togglePtr(t *v1alpha1.Toggle) v1alpha1.Toggle {
	if t == nil {
		return ""
	}
	return *t
}

// rtThrottlingOff: sched_rt_runtime_us=-1 lets a runaway RT task take a CPU
// forever; only sensible on isolated CPUs that the kernel keeps apart.
func rtThrottlingOff(o Observation) *v1alpha1.Finding {
	v, ok := o.Sysctls[knobs.RTRuntime.Sysctl()]
	if !ok || v != "-1" {
		return nil
	}
	isolatedByKernel := facts.FlagCPUs(o.Isolation, "isolcpus")
	if !o.Isolated.IsEmpty() && o.Isolated.IsSubsetOf(isolatedByKernel) {
		return nil
	}
	return finding(FindingRTThrottlingOff, SeverityWarning,
		"%s=-1 (RT throttling off) without isolated CPUs (profile isolated %q, kernel isolcpus %q): a runaway real-time task can starve every CFS task on its CPU; keep 950000 or isolate the CPUs first",
		knobs.RTRuntime.Sysctl(), o.Isolated.String(), isolatedByKernel.String())
}
