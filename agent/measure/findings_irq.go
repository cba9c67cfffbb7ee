package measure

import (
	"fmt"
	"strings"

	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/api/v1alpha1"
)

func (c *checker) irqsOnIsolated() *v1alpha1.Finding {
	if c.cls.isolated.IsEmpty() || !c.haveIRQs {
		return nil
	}
	d := c.irqs[1].deltaOn(c.irqs[0], c.cls.isolated, isNumber)
	if len(d) == 0 {
		return nil
	}
	return finding(FindingIRQsIsolated, SeverityWarning,
		"%d device interrupts fired on isolated CPUs %s in the last window (%s); steer them with irq.affinity: Reserved (managed IRQs also need isolcpus=managed_irq)",
		sumDeltas(d), c.cls.isolated, describeDeltas(d, "irq "))
}

// tickSoftirqs come with the tick and RCU; isolation flags, not affinity,
// remove them, so they are left out of the softirq finding.
var tickSoftirqs = map[string]bool{"TIMER": true, "SCHED": true, "RCU": true, "HRTIMER": true}

func (c *checker) softirqsOnIsolated() *v1alpha1.Finding {
	if c.cls.isolated.IsEmpty() || !c.haveSoft {
		return nil
	}
	d := c.softirqs[1].deltaOn(c.softirqs[0], c.cls.isolated, func(k string) bool { return !tickSoftirqs[k] })
	if len(d) == 0 {
		return nil
	}
	return finding(FindingSoftirqsIsolated, SeverityWarning,
		"%d softirqs ran on isolated CPUs %s in the last window (%s); move the interrupts that raise them (and RPS/XPS masks) to the reserved CPUs",
		sumDeltas(d), c.cls.isolated, describeDeltas(d, ""))
}

func sumDeltas(d []rowDelta) uint64 {
	var n uint64
	for _, r := range d {
		n += r.n
	}
	return n
}

func describeDeltas(d []rowDelta, prefix string) string {
	var parts []string
	for i, r := range d {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("and %d more", len(d)-5))
			break
		}
		label := ""
		if r.label != "" {
			label = " [" + lastField(r.label) + "]"
		}
		parts = append(parts, fmt.Sprintf("%s%s%s: %d", prefix, r.key, label, r.n))
	}
	return strings.Join(parts, ", ")
}

func lastField(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

// irqbalance rewrites IRQ affinity every 10 s; it leaves alone the CPUs in
// IRQBALANCE_BANNED_CPUS / IRQBALANCE_BANNED_CPULIST and (recent versions)
// the kernel's isolcpus and nohz_full CPUs.
func (c *checker) irqbalance() *v1alpha1.Finding {
	if c.cls.isolated.IsEmpty() {
		return nil
	}
	kernelBanned := facts.FlagCPUs(c.view().Isolation(), "isolcpus", "nohz_full")
	for _, ib := range facts.IRQBalances(c.root) {
		banned := ib.Banned.Union(kernelBanned)
		if missing := c.cls.isolated.Difference(banned); !missing.IsEmpty() {
			return finding(FindingIRQBalance, SeverityWarning,
				"irqbalance (pid %d) runs without isolated CPUs %s banned (banned: %q); it moves IRQs back onto them every 10s: set IRQBALANCE_BANNED_CPULIST=%s or stop it",
				ib.PID, missing, banned.String(), c.cls.isolated)
		}
	}
	return nil
}
