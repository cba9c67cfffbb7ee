package measure

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/cpumanager"
	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/printable"
)

// rtTasksOnIsolated finds user-space SCHED_FIFO/SCHED_RR tasks allowed on
// isolated CPUs (per-CPU kernel threads are left out).
func (c *checker) rtTasksOnIsolated() *v1alpha1.Finding {
	if c.cls.isolated.IsEmpty() {
		return nil
	}
	var hits []string
	for _, t := range tasks(c.root) {
		st, err := t.proc.Stat()
		if err != nil || st.Flags&pfKthread != 0 || (st.Policy != schedFIFO && st.Policy != schedRR) {
			continue
		}
		status, err := t.proc.NewStatus()
		if err != nil {
			continue
		}
		allowed := cpuset.New(toInts(status.CpusAllowedList)...)
		if allowed.Intersection(c.cls.isolated).IsEmpty() {
			continue
		}
		hits = append(hits, fmt.Sprintf("%s (tid %d, %s prio %d, cpus %s)",
			printable.String(st.Comm), t.tid, policyName(st.Policy), st.RTPriority, allowed))
	}
	if len(hits) == 0 {
		return nil
	}
	return finding(FindingRTTasksIsolated, SeverityWarning,
		"%d real-time tasks may run on isolated CPUs %s and starve the latency pods there: %s",
		len(hits), c.cls.isolated, strings.Join(firstN(hits, 5), "; "))
}

func toInts(u []uint64) []int {
	out := make([]int, len(u))
	for i, v := range u {
		out[i] = int(v)
	}
	return out
}

func policyName(p uint) string {
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
	node := c.view()
	if node.CmdlineErr != nil {
		return nil
	}
	missing := facts.MissingIsolation(c.cls.isolated, node.Isolation())
	if len(missing) == 0 {
		return nil
	}
	return finding(FindingCmdline, SeverityWarning,
		"the kernel command line lacks %s for isolated CPUs %s (has %q): the tick, RCU callbacks and unbound kernel work still run there; add them to the bootloader and reboot",
		strings.Join(missing, " "), c.cls.isolated, strings.Join(node.Isolation(), " "))
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
