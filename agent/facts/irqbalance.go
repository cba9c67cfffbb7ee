package facts

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
	// agent/irqbalance.WithSocketBans replaces it by what irqbalance
	// reports through its control socket (a ban set there included).
	Banned cpuset.CPUSet
}

// irqbalancePaths are where distributions install irqbalance on the host.
var irqbalancePaths = []string{"/usr/sbin/irqbalance", "/usr/bin/irqbalance", "/sbin/irqbalance", "/usr/local/sbin/irqbalance"}

// IRQBalances lists the running irqbalance processes, by host pid (the
// host root's /proc, so it works from a pod without hostPID). A process is
// irqbalance when its executable is the host's irqbalance binary
// (isHostBinary), not when it is named so: any tenant can name a process
// irqbalance, and one that did must not be blamed for the agent's drift.
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
		if comm, err := p.Comm(); err != nil || comm != "irqbalance" || !isHostBinary(root, p.PID, irqbalancePaths) {
			continue
		}
		env, _ := p.Environ()
		out = append(out, IRQBalance{PID: p.PID, Banned: bannedCPUs(env)})
	}
	return out
}

// isHostBinary reports whether process pid runs one of the host's binaries
// at paths: /proc/<pid>/exe opens the very file the process executes, so
// its device and inode equal the host file's, which a binary in a
// container's image (even at the same path) or a renamed copy never does.
// The host's file is looked up through the host's init first
// (<proc>/1/root/<path>: the host's "/" even when the host root holds only
// /proc, /sys and a few mounts; it needs CAP_SYS_PTRACE over pid 1), then
// under the host root (a root with the host's "/" mounted, a test root). A
// binary replaced on disk since the process started (a package upgrade:
// the link reads "<path> (deleted)") counts when the process's root is the
// host init's root, so the path is the host's own.
func isHostBinary(root *host.Root, pid int, paths []string) bool {
	pidDir := root.Proc(strconv.Itoa(pid))
	exe, err := os.Stat(filepath.Join(pidDir, "exe"))
	if err != nil {
		return false
	}
	initRoot := root.Proc("1", "root")
	for _, p := range paths {
		for _, at := range []string{root.Proc("1", "root", p), root.Path(p)} {
			if bin, err := os.Stat(at); err == nil && os.SameFile(exe, bin) {
				return true
			}
		}
	}
	link, err := os.Readlink(filepath.Join(pidDir, "exe"))
	deleted, ok := strings.CutSuffix(link, " (deleted)")
	if err != nil || !ok || !slices.Contains(paths, deleted) {
		return false
	}
	procRoot, err1 := os.Stat(filepath.Join(pidDir, "root"))
	hostRoot, err2 := os.Stat(initRoot)
	return err1 == nil && err2 == nil && os.SameFile(procRoot, hostRoot)
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
