package measure

import (
	"cmp"
	"fmt"
	"slices"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/bound"
	"latencytier.io/latencytier/agent/power"
	"latencytier.io/latencytier/agent/rtsched"
	"latencytier.io/latencytier/agent/snapshot"
	"latencytier.io/latencytier/api/v1alpha1"
)

// Finding types: the field notes' checklists.
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
)

// podPressureWarn is the cgroup v2 cpu.pressure "some avg10" (percent) from
// which an opted-in pod is reported as waiting for CPU.
const podPressureWarn = 10.0

// Severities.
const (
	SeverityWarning  = "Warning"
	SeverityCritical = "Critical"
)

// checker holds what the checks look at in one window.
type checker struct {
	root *host.Root
	in   Input
	// node is the pass's snapshot (view reads one when nil).
	node      *snapshot.Node
	cls       cpuClasses
	irqs      [2]counterTable // previous, current
	softirqs  [2]counterTable
	haveIRQs  bool
	haveSoft  bool
	throttles []podThrottle
}

func (c *checker) findings() []v1alpha1.Finding {
	checks := []func() *v1alpha1.Finding{
		c.autogroup, c.numaBalancing, c.irqsOnIsolated, c.softirqsOnIsolated,
		c.irqbalance, c.rtTasksOnIsolated, c.rtThrottlingOff, c.runQueueOverloaded,
		c.cmdline, c.smtSplit, c.cpuManagerNone, c.reservedSize,
	}
	var out []v1alpha1.Finding
	out = append(out, c.optedInThrottled()...)
	out = append(out, c.podPressure()...)
	out = append(out, power.FindingsOn(c.root, *c.view(), c.in.Tuning)...)
	out = append(out, rtsched.Findings(c.root, c.cls.reserved)...)
	for _, check := range checks {
		if f := check(); f != nil {
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

// view is the node snapshot the checks decide from: the pass's, or one
// read for this window when the input carries none.
func (c *checker) view() *snapshot.Node {
	if c.node == nil {
		n := snapshot.Read(c.root, c.in.Tuning)
		c.node = &n
	}
	return c.node
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
