package measure

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/cpumanager"
	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/bound"
	"latencytier.io/latencytier/agent/rtsched"
	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
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
)

// podPressureWarn is the cgroup v2 cpu.pressure "some avg10" (percent) from
// which an opted-in pod is reported as waiting for CPU.
const podPressureWarn = 10.0

// Severities.
const (
	SeverityInfo     = "Info"
	SeverityWarning  = "Warning"
	SeverityCritical = "Critical"
)

// checker holds what the checks look at in one window.
type checker struct {
	root      *host.Root
	in        Input
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
		c.cmdline, c.smtSplit, c.cpuManagerNone,
	}
	var out []v1alpha1.Finding
	out = append(out, c.optedInThrottled()...)
	out = append(out, c.podPressure()...)
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
	v, ok := c.sysctl(knobs.Autogroup.Sysctl())
	if !ok || v == "0" || togglePtr(c.scheduler().Autogroup) == v1alpha1.Enabled {
		return nil
	}
	return finding(FindingAutogroup, SeverityWarning,
		"%s=%s: each session (a cron job, an ssh login) gets as much CPU as a whole many-threaded server; set scheduler.%s: Disabled",
		knobs.Autogroup.Sysctl(), v, knobs.Autogroup.Field)
}

func (c *checker) numaBalancing() *v1alpha1.Finding {
	v, ok := c.sysctl(knobs.NumaBalancing.Sysctl())
	if !ok || v == "0" || togglePtr(c.scheduler().NumaBalancing) == v1alpha1.Enabled {
		return nil
	}
	return finding(FindingNumaBalancing, SeverityWarning,
		"%s=%s: the kernel migrates pages and tasks between NUMA nodes under load; set scheduler.%s: Disabled",
		knobs.NumaBalancing.Sysctl(), v, knobs.NumaBalancing.Field)
}

func togglePtr(t *v1alpha1.Toggle) v1alpha1.Toggle {
	if t == nil {
		return ""
	}
	return *t
}

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
	cmdline, _ := c.root.ReadString(c.root.Proc("cmdline"))
	kernelBanned := facts.FlagCPUs(facts.Isolation(cmdline), "isolcpus", "nohz_full")
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

// rtTasksOnIsolated finds user-space SCHED_FIFO/SCHED_RR tasks allowed on
// isolated CPUs (per-CPU kernel threads are left out).
func (c *checker) rtTasksOnIsolated() *v1alpha1.Finding {
	if c.cls.isolated.IsEmpty() {
		return nil
	}
	var hits []string
	for _, dir := range taskDirs(c.root) {
		st, err := readStat(c.root, dir)
		if err != nil || st.flags&pfKthread != 0 || (st.policy != schedFIFO && st.policy != schedRR) {
			continue
		}
		status, _ := c.root.ReadFile(dir + "/status")
		allowed, err := cpulist.Parse(statusField(string(status), "Cpus_allowed_list"))
		if err != nil || allowed.Intersection(c.cls.isolated).IsEmpty() {
			continue
		}
		hits = append(hits, fmt.Sprintf("%s (tid %s, %s prio %d, cpus %s)",
			st.comm, dir[strings.LastIndexByte(dir, '/')+1:], policyName(st.policy), st.rtPrio, allowed))
	}
	if len(hits) == 0 {
		return nil
	}
	return finding(FindingRTTasksIsolated, SeverityWarning,
		"%d real-time tasks may run on isolated CPUs %s and starve the latency pods there: %s",
		len(hits), c.cls.isolated, strings.Join(firstN(hits, 5), "; "))
}

func readStat(root *host.Root, dir string) (taskStat, error) {
	b, err := root.ReadFile(dir + "/stat")
	if err != nil {
		return taskStat{}, err
	}
	return parseTaskStat(strings.TrimSpace(string(b)))
}

func policyName(p int) string {
	if p == schedFIFO {
		return "SCHED_FIFO"
	}
	return "SCHED_RR"
}

func firstN(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clone(s[:n]), fmt.Sprintf("and %d more", len(s)-n))
}

// rtThrottlingOff: sched_rt_runtime_us=-1 lets a runaway RT task take a CPU
// forever; only sensible on isolated CPUs that the kernel keeps apart.
func (c *checker) rtThrottlingOff() *v1alpha1.Finding {
	v, ok := c.sysctl(knobs.RTRuntime.Sysctl())
	if !ok || v != "-1" {
		return nil
	}
	cmdline, _ := c.root.ReadString(c.root.Proc("cmdline"))
	isolatedByKernel := facts.FlagCPUs(facts.Isolation(cmdline), "isolcpus")
	if !c.cls.isolated.IsEmpty() && c.cls.isolated.IsSubsetOf(isolatedByKernel) {
		return nil
	}
	return finding(FindingRTThrottlingOff, SeverityWarning,
		"%s=-1 (RT throttling off) without isolated CPUs (profile isolated %q, kernel isolcpus %q): a runaway real-time task can starve every CFS task on its CPU; keep 950000 or isolate the CPUs first",
		knobs.RTRuntime.Sysctl(), c.cls.isolated.String(), isolatedByKernel.String())
}

// runQueueOverloaded: procs_running above the CPU count in every one of a
// few samples (one reading is noise).
func (c *checker) runQueueOverloaded() *v1alpha1.Finding {
	online, err := onlineCPUs(c.root)
	if err != nil || online.IsEmpty() {
		return nil
	}
	lowest := -1
	for i := 0; i < 3; i++ {
		n, err := procsRunning(c.root)
		if err != nil {
			return nil
		}
		n-- // the reading thread itself is running
		if lowest < 0 || n < lowest {
			lowest = n
		}
	}
	if lowest <= online.Size() {
		return nil
	}
	return finding(FindingRunQueueOverloaded, SeverityWarning,
		"procs_running (not counting the agent) stayed at %d or more across samples with %d online CPUs: runnable threads are queueing; find the busy processes or give the node more CPUs", lowest, online.Size())
}

func (c *checker) cmdline() *v1alpha1.Finding {
	if c.cls.isolated.IsEmpty() {
		return nil
	}
	cmdline, err := c.root.ReadString(c.root.Proc("cmdline"))
	if err != nil {
		return nil
	}
	missing := facts.MissingIsolation(c.cls.isolated, facts.Isolation(cmdline))
	if len(missing) == 0 {
		return nil
	}
	return finding(FindingCmdline, SeverityWarning,
		"the kernel command line lacks %s for isolated CPUs %s (has %q): the tick, RCU callbacks and unbound kernel work still run there; add them to the bootloader and reboot",
		strings.Join(missing, " "), c.cls.isolated, strings.Join(facts.Isolation(cmdline), " "))
}

// smtSplit: an isolated CPU whose hyperthread sibling is reserved shares a
// core (caches, execution units) with housekeeping work.
func (c *checker) smtSplit() *v1alpha1.Finding {
	if c.cls.isolated.IsEmpty() || c.cls.reserved.IsEmpty() {
		return nil
	}
	var pairs []string
	for _, cpu := range c.cls.isolated.List() {
		s, err := c.root.ReadString(c.root.Sys("devices", "system", "cpu", fmt.Sprintf("cpu%d", cpu), "topology", "thread_siblings_list"))
		if err != nil {
			continue
		}
		sib, err := cpulist.Parse(s)
		if err != nil {
			continue
		}
		if shared := sib.Intersection(c.cls.reserved); !shared.IsEmpty() {
			pairs = append(pairs, fmt.Sprintf("%d with %s", cpu, shared))
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	return finding(FindingSMTSplit, SeverityWarning,
		"isolated CPUs share a core with reserved CPUs (%s): housekeeping work on the sibling thread adds jitter; isolate or reserve both siblings of a core",
		strings.Join(pairs, ", "))
}

// cpuManagerNone: with kubelet's CPU manager policy none, Guaranteed pods on
// a node with isolated CPUs float over every CPU instead of getting
// exclusive ones.
func (c *checker) cpuManagerNone() *v1alpha1.Finding {
	if c.cls.isolated.IsEmpty() {
		return nil
	}
	st, err := cpumanager.Read(c.root)
	if err != nil || st == nil || st.PolicyName != cpumanager.PolicyNone {
		return nil
	}
	var pods []string
	for _, p := range c.in.Pods {
		if p.QOSClass == "Guaranteed" {
			pods = append(pods, p.Namespace+"/"+p.Name)
		}
	}
	if len(pods) == 0 {
		return nil
	}
	return finding(FindingCPUManagerNone, SeverityWarning,
		"kubelet's CPU manager policy is none, so %d Guaranteed pods (%s) share every CPU instead of getting exclusive ones on isolated CPUs %s; set cpuManagerPolicy: static with reservedSystemCPUs",
		len(pods), strings.Join(firstN(pods, 5), ", "), c.cls.isolated)
}

// optedInThrottled: a pod that asked for quota removal and is still
// throttled means the removal failed or was undone.
func (c *checker) optedInThrottled() []v1alpha1.Finding {
	var out []v1alpha1.Finding
	for _, t := range c.throttles {
		if !t.pod.OptedIn || t.delta.throttled <= 0 {
			continue
		}
		out = append(out, *finding(FindingOptedInThrottled, SeverityCritical,
			"pod %s/%s opted into CFS quota removal but was throttled in %d of %d periods (ratio %s, %s throttled): the quota is back or was never removed",
			t.pod.Namespace, t.pod.Name, t.delta.throttled, t.delta.periods, FormatRatio(t.delta.ratio()), t.delta.time))
	}
	return out
}

// podPressure: on cgroup v2, an opted-in pod whose tasks were runnable but
// waiting for CPU a noticeable share of the last 10 s.
func (c *checker) podPressure() []v1alpha1.Finding {
	var out []v1alpha1.Finding
	for _, t := range c.throttles {
		v, err := strconv.ParseFloat(t.pressure, 64)
		if !t.pod.OptedIn || err != nil || v < podPressureWarn {
			continue
		}
		out = append(out, *finding(FindingPodCPUPressure, SeverityWarning,
			"pod %s/%s cpu.pressure some avg10=%s%%: its tasks waited for a CPU that share of the last 10s (run-queue latency inside the pod)",
			t.pod.Namespace, t.pod.Name, t.pressure))
	}
	return out
}
