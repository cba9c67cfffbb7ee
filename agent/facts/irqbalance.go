package facts

import (
	"strings"

	"github.com/prometheus/procfs"
	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
)

// IRQBalance is a running irqbalance. It rewrites IRQ affinity every 10 s
// and leaves alone only the CPUs it is banned from.
type IRQBalance struct {
	PID int
	// Banned is what IRQBALANCE_BANNED_CPULIST and IRQBALANCE_BANNED_CPUS
	// in its environment ban; recent versions also keep off the kernel's
	// isolcpus and nohz_full CPUs, which are not included here.
	Banned cpuset.CPUSet
}

// IRQBalances lists the running irqbalance processes, by host pid (the
// host root's /proc, so it works from a pod without hostPID).
func IRQBalances(root *host.Root) []IRQBalance {
	fs, err := procfs.NewFS(root.Proc())
	if err != nil {
		return nil
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return nil
	}
	var out []IRQBalance
	for _, p := range procs {
		if comm, err := p.Comm(); err != nil || comm != "irqbalance" {
			continue
		}
		env, _ := p.Environ()
		out = append(out, IRQBalance{PID: p.PID, Banned: bannedCPUs(env)})
	}
	return out
}

// bannedCPUs reads irqbalance's ban list from its environment.
func bannedCPUs(environ []string) cpuset.CPUSet {
	out := cpuset.New()
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		var s cpuset.CPUSet
		var err error
		switch k {
		case "IRQBALANCE_BANNED_CPULIST":
			s, err = cpulist.Parse(v)
		case "IRQBALANCE_BANNED_CPUS":
			s, err = cpulist.ParseMask(v)
		default:
			continue
		}
		if err == nil {
			out = out.Union(s)
		}
	}
	return out
}
