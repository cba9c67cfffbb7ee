package findings

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/printable"
)

// Scheduling policies (sched.h).
const (
	SchedFIFO = 1
	SchedRR   = 2
)

// RTTask is one user-space real-time thread of the host.
type RTTask struct {
	// Comm is the thread's name as the kernel has it (unescaped).
	Comm       string
	TID        int
	Policy     uint // SchedFIFO or SchedRR
	RTPriority uint
	// Allowed is its Cpus_allowed_list.
	Allowed cpuset.CPUSet
}

// rtTasksOnIsolated finds user-space SCHED_FIFO/SCHED_RR tasks allowed on
// isolated CPUs (per-CPU kernel threads are left out by the reader).
func rtTasksOnIsolated(o Observation) *v1alpha1.Finding {
	if o.Isolated.IsEmpty() {
		return nil
	}
	var hits []string
	for _, t := range o.RTTasks {
		if t.Allowed.Intersection(o.Isolated).IsEmpty() {
			continue
		}
		hits = append(hits, fmt.Sprintf("%s (tid %d, %s prio %d, cpus %s)",
			printable.String(t.Comm), t.TID, policyName(t.Policy), t.RTPriority, t.Allowed))
	}
	if len(hits) == 0 {
		return nil
	}
	return finding(FindingRTTasksIsolated, SeverityWarning,
		"%d real-time tasks may run on isolated CPUs %s and starve the latency pods there: %s",
		len(hits), o.Isolated, strings.Join(firstN(hits, 5), "; "))
}

func policyName(p uint) string {
	if p == SchedFIFO {
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
func runQueueOverloaded(o Observation) *v1alpha1.Finding {
	if o.Online.IsEmpty() || len(o.ProcsRunning) == 0 {
		return nil
	}
	lowest := -1
	for _, n := range o.ProcsRunning {
		n-- // the reading thread itself is running
		if lowest < 0 || n < lowest {
			lowest = n
		}
	}
	if lowest <= o.Online.Size() {
		return nil
	}
	return finding(FindingRunQueueOverloaded, SeverityWarning,
		"procs_running (not counting the agent) stayed at %d or more across samples with %d online CPUs: runnable threads are queueing; find the busy processes or give the node more CPUs", lowest, o.Online.Size())
}

func cmdline(o Observation) *v1alpha1.Finding {
	if o.Isolated.IsEmpty() || !o.CmdlineRead {
		return nil
	}
	missing := facts.MissingIsolation(o.Isolated, o.Isolation)
	if len(missing) == 0 {
		return nil
	}
	return finding(FindingCmdline, SeverityWarning,
		"the kernel command line lacks %s for isolated CPUs %s (has %q): the tick, RCU callbacks and unbound kernel work still run there; add them to the bootloader and reboot",
		strings.Join(missing, " "), o.Isolated, strings.Join(o.Isolation, " "))
}

// smtSplit: an isolated CPU whose hyperthread sibling is reserved shares a
// core (caches, execution units) with housekeeping work.
func smtSplit(o Observation) *v1alpha1.Finding {
	if o.Isolated.IsEmpty() || o.Reserved.IsEmpty() {
		return nil
	}
	var pairs []string
	for _, cpu := range o.Isolated.List() {
		sib, ok := o.Siblings[cpu]
		if !ok {
			continue
		}
		if shared := sib.Intersection(o.Reserved); !shared.IsEmpty() {
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
func cpuManagerNone(o Observation) *v1alpha1.Finding {
	if o.Isolated.IsEmpty() || !o.CPUManagerNone || len(o.GuaranteedPods) == 0 {
		return nil
	}
	return finding(FindingCPUManagerNone, SeverityWarning,
		"kubelet's CPU manager policy is none, so %d Guaranteed pods (%s) share every CPU instead of getting exclusive ones on isolated CPUs %s; set cpuManagerPolicy: static with reservedSystemCPUs",
		len(o.GuaranteedPods), strings.Join(firstN(o.GuaranteedPods, 5), ", "), o.Isolated)
}
