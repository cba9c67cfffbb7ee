// Package findings judges one measurement window's observations of a node
// against the checks for run-queue waits on a node that is not busy (the
// scheduler knobs, IRQs and RT tasks on the wrong CPUs, throttling) and the
// profile's latency budget. It
// is pure: the observations come in an Observation (read from the host by
// agent/window), so every check is a table test without a host root.
package findings

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/agent/internal/bound"
	"latencytier.io/latencytier/agent/schedext"
	"latencytier.io/latencytier/api/v1alpha1"
)

// Finding types: each names a known cause of runnable threads waiting while
// CPUs sit partly idle.
const (
	FindingAutogroup          = "AutogroupEnabled"
	FindingNumaBalancing      = "NumaBalancingEnabled"
	FindingIRQsIsolated       = "IRQsOnIsolatedCPUs"
	FindingSoftirqsIsolated   = "SoftirqsOnIsolatedCPUs"
	FindingIRQBalance         = "IRQBalanceNotBanned"
	FindingRTTasksIsolated    = "RTTasksOnIsolatedCPUs"
	FindingRTThrottlingOff    = "RTThrottlingDisabled"
	FindingRunQueueOverloaded = "RunQueueOverloaded"
	FindingCmdline            = "CmdlineMissingIsolation"
	FindingSMTSplit           = "SMTSiblingsSplit"
	FindingCPUManagerNone     = "CPUManagerPolicyNone"
	FindingOptedInThrottled   = "OptedInPodThrottled"
	FindingPodCPUPressure     = "PodCPUPressure"
	FindingReservedTooSmall   = "ReservedCPUsTooFew"
	FindingSchedExtLoaded     = "SchedExtSchedulerLoaded"
)

// Severities.
const (
	SeverityWarning  = "Warning"
	SeverityCritical = "Critical"
)

// Observation is what one window's checks look at. Where a check reads
// something only under a condition (isolated CPUs set), the reader leaves
// the field empty otherwise.
type Observation struct {
	// Isolated and Reserved are the profile's CPU classes.
	Isolated, Reserved cpuset.CPUSet
	// Scheduler is the profile's scheduler section.
	Scheduler v1alpha1.SchedulerSpec
	// Sysctls are the values read of the sysctls the checks look at, by
	// name; an unreadable one is absent.
	Sysctls map[string]string
	// CmdlineRead says the kernel command line was read; Isolation is its
	// isolation flags (snapshot.Node.Isolation).
	CmdlineRead bool
	Isolation   []string
	// IRQs and Softirqs are /proc/interrupts and /proc/softirqs at the
	// window's start and end.
	IRQs, Softirqs CounterWindow
	// IRQBalances are the irqbalance processes running on the host.
	IRQBalances []facts.IRQBalance
	// RTTasks are the host's user-space SCHED_FIFO/SCHED_RR threads.
	RTTasks []RTTask
	// Online is the online CPUs (empty when unreadable).
	Online cpuset.CPUSet
	// ProcsRunning are a few samples of /proc/stat procs_running, nil when
	// one failed.
	ProcsRunning []int
	// Siblings are the hyperthread siblings of each isolated CPU.
	Siblings map[int]cpuset.CPUSet
	// CPUManagerNone says kubelet's CPU manager policy is none.
	CPUManagerNone bool
	// GuaranteedPods are the node's Guaranteed pods (namespace/name).
	GuaranteedPods []string
	// NUMA maps each NUMA node to its CPUs.
	NUMA map[int]cpuset.CPUSet
	// Throttles is each pod's CFS throttling over the window, most
	// throttled first.
	Throttles []PodThrottle
	// SchedExt is the node's sched_ext state at the window's end.
	SchedExt schedext.State
	// CPUQuota says the profile sets cpuQuota.
	CPUQuota bool
	// Other are findings judged by the packages that own their settings
	// (power, rtsched), in that order.
	Other []v1alpha1.Finding
}

// Judge returns the window's findings, most severe first, bounded to the
// CRD's list length.
func Judge(o Observation) []v1alpha1.Finding {
	checks := []func(Observation) *v1alpha1.Finding{
		schedExtLoaded, autogroup, numaBalancing, irqsOnIsolated, softirqsOnIsolated,
		irqbalance, rtTasksOnIsolated, rtThrottlingOff, runQueueOverloaded,
		cmdline, smtSplit, cpuManagerNone, reservedSize,
	}
	var out []v1alpha1.Finding
	out = append(out, optedInThrottled(o)...)
	out = append(out, podPressure(o)...)
	out = append(out, o.Other...)
	for _, check := range checks {
		if f := check(o); f != nil {
			out = append(out, *f)
		}
	}
	slices.SortStableFunc(out, func(a, b v1alpha1.Finding) int {
		return cmp.Compare(severityRank(a.Severity), severityRank(b.Severity))
	})
	if len(out) > bound.Findings {
		out = out[:bound.Findings]
	}
	return out
}

func severityRank(s string) int {
	switch s {
	case SeverityCritical:
		return 0
	case SeverityWarning:
		return 1
	}
	return 2
}

func finding(typ, sev, format string, args ...any) *v1alpha1.Finding {
	msg := bound.String(fmt.Sprintf(format, args...), bound.FindingMessage)
	return &v1alpha1.Finding{Type: typ, Severity: sev, Message: msg}
}
