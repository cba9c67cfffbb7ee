package measure

import (
	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
)

func (c *checker) sysctl(name string) (string, bool) {
	p, err := c.root.SysctlPath(name)
	if err != nil {
		return "", false
	}
	v, err := c.root.ReadString(p)
	return v, err == nil
}

func (c *checker) scheduler() v1alpha1.SchedulerSpec {
	if c.in.Tuning.Scheduler == nil {
		return v1alpha1.SchedulerSpec{}
	}
	return *c.in.Tuning.Scheduler
}

// autogroup: field note 004, a cron tar in its own session got the CPU share
// of a 500-thread gateway.
func (c *checker) autogroup() *v1alpha1.Finding {
	return c.toggleOn(knobs.Autogroup, c.scheduler().Autogroup, FindingAutogroup,
		"each session (a cron job, an ssh login) gets as much CPU as a whole many-threaded server")
}

func (c *checker) numaBalancing() *v1alpha1.Finding {
	return c.toggleOn(knobs.NumaBalancing, c.scheduler().NumaBalancing, FindingNumaBalancing,
		"the kernel migrates pages and tasks between NUMA nodes under load")
}

// toggleOn finds an on/off scheduler knob switched on although the profile
// does not ask for it (Enabled); why says what that costs.
func (c *checker) toggleOn(k knobs.Scheduler, want *v1alpha1.Toggle, typ, why string) *v1alpha1.Finding {
	v, ok := c.sysctl(k.Sysctl())
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
func (c *checker) rtThrottlingOff() *v1alpha1.Finding {
	v, ok := c.sysctl(knobs.RTRuntime.Sysctl())
	if !ok || v != "-1" {
		return nil
	}
	isolatedByKernel := facts.FlagCPUs(c.view().Isolation(), "isolcpus")
	if !c.cls.isolated.IsEmpty() && c.cls.isolated.IsSubsetOf(isolatedByKernel) {
		return nil
	}
	return finding(FindingRTThrottlingOff, SeverityWarning,
		"%s=-1 (RT throttling off) without isolated CPUs (profile isolated %q, kernel isolcpus %q): a runaway real-time task can starve every CFS task on its CPU; keep 950000 or isolate the CPUs first",
		knobs.RTRuntime.Sysctl(), c.cls.isolated.String(), isolatedByKernel.String())
}
