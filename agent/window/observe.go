package window

import (
	"fmt"
	"path/filepath"

	"github.com/prometheus/procfs"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/cpumanager"
	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/agent/findings"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/irqbalance"
	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/agent/power"
	"latencytier.io/latencytier/agent/rtsched"
	"latencytier.io/latencytier/agent/snapshot"
)

// pfKthread is PF_KTHREAD in task flags.
const pfKthread = 0x00200000

// observe reads the host for the window's checks (agent/findings): only
// what a check looks at under the profile's CPU classes. res is the
// Measurer's window, whose throttling the checks judge.
func observe(root *host.Root, in Input, cls snapshot.CPUs, res *measure.Result) findings.Observation {
	node := in.Node
	if node == nil {
		n := snapshot.Read(root, in.Tuning)
		node = &n
	}
	o := findings.Observation{Isolated: cls.Isolated, Reserved: cls.Reserved,
		CmdlineRead: node.CmdlineErr == nil, Isolation: node.Isolation(), Sysctls: map[string]string{}}
	if in.Tuning.Scheduler != nil {
		o.Scheduler = *in.Tuning.Scheduler
	}
	o.CPUQuota = in.Tuning.CPUQuota != nil
	o.Throttles = throttles(res)
	o.Other = append(power.FindingsOn(root, *node, in.Tuning), rtsched.Findings(root, cls.Reserved)...)
	for _, name := range findings.Sysctls() {
		if v, ok := readSysctl(root, name); ok {
			o.Sysctls[name] = v
		}
	}
	if !cls.Isolated.IsEmpty() {
		o.IRQBalances = irqbalance.WithSocketBans(root, facts.IRQBalances(root))
		o.RTTasks = rtTasks(root)
	}
	if online, err := onlineCPUs(root); err == nil && !online.IsEmpty() {
		o.Online = online
		o.ProcsRunning = procsRunningSamples(root, 3)
		if !cls.Isolated.IsEmpty() || !cls.Reserved.IsEmpty() {
			o.NUMA = numaNodes(root)
		}
	}
	if !cls.Isolated.IsEmpty() && !cls.Reserved.IsEmpty() {
		o.Siblings = siblings(root, cls.Isolated)
	}
	if !cls.Isolated.IsEmpty() {
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

// throttles are the window's pods' throttling, most throttled first.
func throttles(res *measure.Result) []findings.PodThrottle {
	var out []findings.PodThrottle
	for _, t := range res.AllThrottling {
		pt := findings.PodThrottle{Namespace: t.Namespace, Name: t.Name, OptedIn: t.OptedIn,
			Periods: t.Periods, Throttled: t.Throttled, Pressure: res.PodPressure[t.Namespace+"/"+t.Name]}
		if t.ThrottledTime != nil {
			pt.Time = t.ThrottledTime.Duration
		}
		if t.Periods > 0 && t.Throttled > 0 {
			pt.Ratio = float64(t.Throttled) / float64(t.Periods)
		}
		out = append(out, pt)
	}
	return out
}

// rtTasks lists the host's user-space SCHED_FIFO/SCHED_RR threads.
func rtTasks(root *host.Root) []findings.RTTask {
	var out []findings.RTTask
	for _, t := range measure.Tasks(root) {
		st, err := t.Proc.Stat()
		if err != nil || st.Flags&pfKthread != 0 || (st.Policy != findings.SchedFIFO && st.Policy != findings.SchedRR) {
			continue
		}
		status, err := t.Proc.NewStatus()
		if err != nil {
			continue
		}
		out = append(out, findings.RTTask{Comm: st.Comm, TID: t.TID, Policy: st.Policy,
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

// procsRunning reads procs_running from /proc/stat.
func procsRunning(root *host.Root) (int, error) {
	fs, err := procfs.NewFS(root.Proc())
	if err != nil {
		return 0, err
	}
	st, err := fs.Stat()
	if err != nil {
		return 0, err
	}
	return int(st.ProcessesRunning), nil
}

// onlineCPUs reads /sys/devices/system/cpu/online.
func onlineCPUs(root *host.Root) (cpuset.CPUSet, error) {
	s, err := root.ReadString(root.Sys("devices", "system", "cpu", "online"))
	if err != nil {
		return cpuset.New(), err
	}
	return cpulist.Parse(s)
}
