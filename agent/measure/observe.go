package measure

import (
	"fmt"
	"path/filepath"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/cpumanager"
	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/agent/findings"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/power"
	"latencytier.io/latencytier/agent/rtsched"
	"latencytier.io/latencytier/agent/snapshot"
)

// pfKthread is PF_KTHREAD in task flags.
const pfKthread = 0x00200000

// observed is what one window's checks look at besides the host: the
// measured throttling and the IRQ counters at the window's ends.
type observed struct {
	throttles      []podThrottle
	irqs, softirqs findings.CounterWindow
}

// observe reads the host for the window's checks (agent/findings): only
// what a check looks at under the profile's CPU classes.
func observe(root *host.Root, in Input, cls cpuClasses, w observed) findings.Observation {
	node := in.Node
	if node == nil {
		n := snapshot.Read(root, in.Tuning)
		node = &n
	}
	o := findings.Observation{Isolated: cls.isolated, Reserved: cls.reserved,
		CmdlineRead: node.CmdlineErr == nil, Isolation: node.Isolation(),
		IRQs: w.irqs, Softirqs: w.softirqs, Sysctls: map[string]string{}}
	if in.Tuning.Scheduler != nil {
		o.Scheduler = *in.Tuning.Scheduler
	}
	for _, t := range w.throttles {
		o.Throttles = append(o.Throttles, findings.PodThrottle{Namespace: t.pod.Namespace, Name: t.pod.Name,
			OptedIn: t.pod.OptedIn, Periods: t.delta.periods, Throttled: t.delta.throttled,
			Time: t.delta.time, Ratio: t.delta.ratio(), Pressure: t.pressure})
	}
	o.Other = append(power.FindingsOn(root, *node, in.Tuning), rtsched.Findings(root, cls.reserved)...)
	for _, name := range findings.Sysctls() {
		if v, ok := readSysctl(root, name); ok {
			o.Sysctls[name] = v
		}
	}
	if !cls.isolated.IsEmpty() {
		o.IRQBalances = facts.IRQBalances(root)
		o.RTTasks = rtTasks(root)
	}
	if online, err := onlineCPUs(root); err == nil && !online.IsEmpty() {
		o.Online = online
		o.ProcsRunning = procsRunningSamples(root, 3)
		if !cls.isolated.IsEmpty() || !cls.reserved.IsEmpty() {
			o.NUMA = numaNodes(root)
		}
	}
	if !cls.isolated.IsEmpty() && !cls.reserved.IsEmpty() {
		o.Siblings = siblings(root, cls.isolated)
	}
	if !cls.isolated.IsEmpty() {
		st, err := cpumanager.Read(root)
		o.CPUManagerNone = err == nil && st != nil && st.PolicyName == cpumanager.PolicyNone
		for _, p := range in.Pods {
			if p.QOSClass == "Guaranteed" {
				o.GuaranteedPods = append(o.GuaranteedPods, p.Namespace+"/"+p.Name)
			}
		}
	}
	return o
}

func readSysctl(root *host.Root, name string) (string, bool) {
	p, err := root.SysctlPath(name)
	if err != nil {
		return "", false
	}
	v, err := root.ReadString(p)
	return v, err == nil
}

// rtTasks lists the host's user-space SCHED_FIFO/SCHED_RR threads.
func rtTasks(root *host.Root) []findings.RTTask {
	var out []findings.RTTask
	for _, t := range tasks(root) {
		st, err := t.proc.Stat()
		if err != nil || st.Flags&pfKthread != 0 || (st.Policy != findings.SchedFIFO && st.Policy != findings.SchedRR) {
			continue
		}
		status, err := t.proc.NewStatus()
		if err != nil {
			continue
		}
		out = append(out, findings.RTTask{Comm: st.Comm, TID: t.tid, Policy: st.Policy,
			RTPriority: st.RTPriority, Allowed: cpuset.New(toInts(status.CpusAllowedList)...)})
	}
	return out
}

func toInts(u []uint64) []int {
	out := make([]int, len(u))
	for i, v := range u {
		out[i] = int(v)
	}
	return out
}

// procsRunningSamples reads procs_running n times; nil when a read fails.
func procsRunningSamples(root *host.Root, n int) []int {
	out := make([]int, 0, n)
	for range n {
		v, err := procsRunning(root)
		if err != nil {
			return nil
		}
		out = append(out, v)
	}
	return out
}

// siblings reads the hyperthread siblings of cpus; a CPU whose list does
// not read or parse is left out.
func siblings(root *host.Root, cpus cpuset.CPUSet) map[int]cpuset.CPUSet {
	out := map[int]cpuset.CPUSet{}
	for _, cpu := range cpus.List() {
		s, err := root.ReadString(root.Sys("devices", "system", "cpu", fmt.Sprintf("cpu%d", cpu), "topology", "thread_siblings_list"))
		if err != nil {
			continue
		}
		if sib, err := cpulist.Parse(s); err == nil {
			out[cpu] = sib
		}
	}
	return out
}

// numaNodes reads /sys/devices/system/node/node<N>/cpulist.
func numaNodes(root *host.Root) map[int]cpuset.CPUSet {
	out := map[int]cpuset.CPUSet{}
	paths, _ := filepath.Glob(root.Sys("devices", "system", "node", "node[0-9]*", "cpulist"))
	for _, p := range paths {
		var n int
		if _, err := fmt.Sscanf(filepath.Base(filepath.Dir(p)), "node%d", &n); err != nil {
			continue
		}
		b, err := root.ReadString(p)
		if err != nil {
			continue
		}
		if cpus, err := cpulist.Parse(b); err == nil {
			out[n] = cpus
		}
	}
	return out
}
