package power

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/bound"
	"latencytier.io/latencytier/agent/snapshot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Finding types.
const (
	// FindingDeepIdle: isolated CPUs may enter idle states whose exit
	// latency is a noticeable share of the run-queue budget.
	FindingDeepIdle = "DeepIdleOnIsolatedCPUs"
	// findingIdleLimitNotEnforced: the profile limits idle exit latency on
	// the isolated CPUs but the kernel has no cpuidle driver to honour it.
	findingIdleLimitNotEnforced = "IdleLimitNotEnforced"
	// FindingPollingEveryCPU: the profile's idle limit is 0 on every
	// online CPU, so none may enter an idle state: each spins when idle.
	FindingPollingEveryCPU = "IdlePollingOnEveryCPU"
)

// deepIdleShare: an idle state whose exit latency exceeds 1/deepIdleShare of
// latencyBudget.runQueueP99 counts as deep. A wakeup from it spends that
// long before the scheduler runs anything, on top of the run-queue wait the
// budget is for.
const deepIdleShare = 10

// haltpoll is the cpuidle governor that reads the PM QoS limit only to
// poll at 0 and otherwise picks its halt state, disabled or not
// (drivers/cpuidle/governors/haltpoll.c).
const haltpoll = "haltpoll"

// Findings checks the isolated CPUs' idle states as the kernel has them
// now: not enforced (a limit set but no cpuidle driver) or deep idle states
// reachable under the budget. Nothing without isolated CPUs or with
// idle=poll on the kernel command line.
func Findings(root *host.Root, t v1alpha1.TuningSpec) []v1alpha1.Finding {
	return FindingsOn(root, snapshot.Read(root, t), t)
}

// FindingsOn is Findings against a pass's node snapshot (its command line
// and CPU classes).
func FindingsOn(root *host.Root, node snapshot.Node, t v1alpha1.TuningSpec) []v1alpha1.Finding {
	var out []v1alpha1.Finding
	if online, err := root.ReadString(root.Sys("devices", "system", "cpu", "online")); err == nil {
		if cpus, err := cpulist.Parse(online); err == nil {
			if f := pollingEveryCPU(t, cpus); f != nil {
				out = append(out, *f)
			}
		}
	}
	return append(out, idleFindings(root, node, t)...)
}

// pollingEveryCPU reports a profile whose maxIdleExitLatency is 0 on every
// online CPU (power.all, or power.reserved and power.isolated together
// covering them): no CPU may idle, so every idle core spins at full power,
// housekeeping CPUs included, which gain nothing from it. The agent applies
// what the profile says; this says what it costs.
func pollingEveryCPU(t v1alpha1.TuningSpec, online cpuset.CPUSet) *v1alpha1.Finding {
	if t.Power == nil || online.IsEmpty() {
		return nil
	}
	zero := func(c *v1alpha1.CPUPower) bool {
		return c != nil && c.MaxIdleExitLatency != nil && c.MaxIdleExitLatency.Duration == 0
	}
	field := "power.all"
	if !zero(t.Power.All) {
		if !zero(t.Power.Reserved) || !zero(t.Power.Isolated) || t.CPUs == nil || t.CPUs.Reserved == nil || t.CPUs.Isolated == nil {
			return nil
		}
		if classes := snapshot.ParseCPUs(t.CPUs); classes.Err != nil || !online.IsSubsetOf(classes.Reserved.Union(classes.Isolated)) {
			return nil
		}
		field = "power.reserved and power.isolated"
	}
	return finding(FindingPollingEveryCPU,
		"%s set maxIdleExitLatency 0us on all %d online CPUs (%s): none may enter an idle state, so every idle CPU polls and burns a core's power (and thermal headroom that turbo frequencies need); keep 0us for power.isolated and give power.reserved a limit (e.g. 10us) or none",
		field, online.Size(), online)
}

// idleFindings are the isolated CPUs' idle checks.
func idleFindings(root *host.Root, node snapshot.Node, t v1alpha1.TuningSpec) []v1alpha1.Finding {
	isolated := node.CPUs.Isolated
	if isolated.IsEmpty() || node.HasArg("idle=poll") {
		return nil
	}
	if f := notEnforced(root, t, isolated); f != nil {
		return []v1alpha1.Finding{*f}
	}
	if f := deepIdle(root, t, isolated); f != nil {
		return []v1alpha1.Finding{*f}
	}
	return nil
}

func finding(typ, format string, args ...any) *v1alpha1.Finding {
	return &v1alpha1.Finding{Type: typ, Severity: "Warning",
		Message: bound.String(fmt.Sprintf(format, args...), bound.FindingMessage)}
}

// isolatedLimit is the maxIdleExitLatency the profile sets for the isolated
// CPUs (power.isolated, else power.all) and the field it came from.
func isolatedLimit(t v1alpha1.TuningSpec) (*time.Duration, string) {
	if t.Power == nil {
		return nil, ""
	}
	for _, c := range []struct {
		field string
		spec  *v1alpha1.CPUPower
	}{{"power.isolated", t.Power.Isolated}, {"power.all", t.Power.All}} {
		if c.spec != nil && c.spec.MaxIdleExitLatency != nil {
			return &c.spec.MaxIdleExitLatency.Duration, c.field
		}
	}
	return nil, ""
}

// notEnforced: with no cpuidle driver the idle loop runs the architecture's
// default routine (kernel/sched/idle.c default_idle_call: HLT on x86, an
// exit to the hypervisor in a VM), which no PM QoS limit or disable file
// reaches.
func notEnforced(root *host.Root, t v1alpha1.TuningSpec, isolated cpuset.CPUSet) *v1alpha1.Finding {
	limit, field := isolatedLimit(t)
	if limit == nil {
		return nil
	}
	driver, err := root.ReadString(root.Sys("devices", "system", "cpu", "cpuidle", "current_driver"))
	if err != nil || driver != "none" {
		return nil
	}
	return finding(findingIdleLimitNotEnforced,
		"%s.maxIdleExitLatency %s is written to PM QoS on isolated CPUs %s but nothing enforces it: the kernel has no cpuidle driver (current_driver none), so idle CPUs run the default idle routine (HLT; in a VM an exit to the hypervisor) that ignores PM QoS; boot with idle=poll or load a cpuidle driver (cpuidle-haltpoll in a KVM guest)",
		field, limit, isolated)
}

// deepIdle lists the idle states of the isolated CPUs deeper than the
// budget's share that the kernel may still enter: not disabled and within
// the CPU's PM QoS limit (the haltpoll governor honours only a limit of 0).
func deepIdle(root *host.Root, t v1alpha1.TuningSpec, isolated cpuset.CPUSet) *v1alpha1.Finding {
	if t.LatencyBudget == nil || t.LatencyBudget.RunQueueP99 == nil {
		return nil
	}
	budget := t.LatencyBudget.RunQueueP99.Duration
	deep := budget / deepIdleShare
	gov := cpuidleGovernor(root)
	var hits []string
	for _, cpu := range isolated.List() {
		limit := uint64(noLimit)
		if v, err := root.ReadString(cpuDir(root, cpu, "power", "pm_qos_resume_latency_us")); err == nil {
			if l, ok := parseResumeLatency(v); ok {
				limit = l
			}
		}
		for _, st := range idleStates(root, cpu) {
			if time.Duration(st.latencyUS)*time.Microsecond <= deep || !enterable(st, limit, gov) {
				continue
			}
			hits = append(hits, fmt.Sprintf("cpu%d %s %dµs", cpu, st.name, st.latencyUS))
		}
	}
	if len(hits) == 0 {
		return nil
	}
	if len(hits) > 6 {
		hits = append(hits[:6], fmt.Sprintf("and %d more", len(hits)-6))
	}
	return finding(FindingDeepIdle,
		"isolated CPUs %s may enter idle states with exit latency above %s (1/%d of latencyBudget.runQueueP99 %s), neither disabled nor excluded by PM QoS (cpuidle governor %s): %s; every wakeup from them waits that long before anything runs: set power.isolated.maxIdleExitLatency (0us keeps them polling)",
		isolated, deep, deepIdleShare, budget, gov, strings.Join(hits, ", "))
}

// enterable reports whether the governor may pick st under a PM QoS limit
// (µs; noLimit for none).
func enterable(st idleState, limit uint64, governor string) bool {
	if governor == haltpoll {
		return limit != 0 && st.index == "1" // it picks poll (0) or halt (1) only
	}
	return !st.disabled && st.latencyUS <= limit
}

// cpuidleGovernor is the running cpuidle governor ("" when unknown).
func cpuidleGovernor(root *host.Root) string {
	for _, f := range []string{"current_governor", "current_governor_ro"} {
		if g, err := root.ReadString(root.Sys("devices", "system", "cpu", "cpuidle", f)); err == nil && g != "" {
			return g
		}
	}
	return ""
}
