// Package facts reads what status needs to know about the node's kernel:
// release, scheduler class (the fair class's algorithm, and whether a
// sched_ext scheduler replaced it: agent/schedext), cgroup mode and kubelet cgroup driver, online
// CPUs, SMT siblings, and the isolation flags of the kernel command line,
// and decides whether the profile's isolated CPUs need a reboot.
package facts

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpulist"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/agent/schedext"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// isolationFlags are the boot parameters full CPU isolation needs.
var isolationFlags = []string{"isolcpus", "nohz_full", "rcu_nocbs"}

// Read is ReadOn with the command line read from root.
func Read(root *host.Root, eevdf, debugfsMounted bool) v1alpha1.KernelFacts {
	cmdline, _ := root.ReadString(root.Proc("cmdline"))
	return ReadOn(root, cmdline, eevdf, debugfsMounted)
}

// ReadOn gathers the kernel facts. cmdline is the running kernel's command
// line as the pass's node snapshot read it; eevdf comes from the sysctl
// probe; debugfsMounted says the agent mounted debugfs.
func ReadOn(root *host.Root, cmdline string, eevdf, debugfsMounted bool) v1alpha1.KernelFacts {
	f := v1alpha1.KernelFacts{DebugfsMounted: debugfsMounted, SchedulerClass: "CFS"}
	if eevdf {
		f.SchedulerClass = "EEVDF"
	}
	f.Version, _ = root.ReadString(root.Proc("sys", "kernel", "osrelease"))
	f.CgroupMode = CgroupMode(root)
	f.CgroupDriver = CgroupDriver(root)
	f.OnlineCPUs, _ = root.ReadString(root.Sys("devices", "system", "cpu", "online"))
	f.SMTSiblings = SMTSiblings(root)
	f.CmdlineIsolation = Isolation(cmdline)
	f.ActiveClass, f.SchedExt = SchedExt(schedext.Read(root))
	return f
}

// SchedExt is the active class and the sched_ext facts of a read: a kernel
// without sched_ext is fair, with a note saying it cannot be anything else.
func SchedExt(s schedext.State) (class string, f *v1alpha1.SchedExtFacts) {
	f = &v1alpha1.SchedExtFacts{Supported: s.Supported, State: s.State, Ops: s.Ops, Partial: s.Partial(), Note: s.Problem}
	if s.EnableSeq >= 0 {
		seq := s.EnableSeq
		f.EnableSeq = &seq
	}
	if !s.Supported {
		f.Note = schedext.NotBuiltIn
	}
	return s.Class(), f
}

// CgroupMode is v2 (unified), hybrid (v1 controllers plus a unified
// mount) or v1, as podcgroup.Mode probes it; empty without a cgroup
// filesystem.
func CgroupMode(root *host.Root) string {
	switch v, hybrid := podcgroup.Mode(root); {
	case v == 2:
		return "v2"
	case v == 1 && hybrid:
		return "hybrid"
	case v == 1:
		return "v1"
	}
	return ""
}

// CgroupDriver infers kubelet's cgroup driver from the pod tree: systemd
// names it kubepods.slice, cgroupfs kubepods. Empty when no tree exists.
func CgroupDriver(root *host.Root) string {
	for _, base := range []string{"", "cpu", "cpu,cpuacct", "cpuset", "systemd"} {
		switch {
		case root.Exists(root.Cgroup(base, "kubepods.slice")):
			return "systemd"
		case root.Exists(root.Cgroup(base, "kubepods")):
			return "cgroupfs"
		}
	}
	return ""
}

// SMTSiblings lists the thread groups that share a core, e.g. "0,4"; cores
// with a single thread are left out.
func SMTSiblings(root *host.Root) []string {
	dirs, _ := root.ReadDir(root.Sys("devices", "system", "cpu"))
	seen := map[string]bool{}
	var out []string
	for _, d := range dirs {
		if !strings.HasPrefix(d.Name(), "cpu") || strings.Trim(d.Name()[3:], "0123456789") != "" || d.Name() == "cpu" {
			continue
		}
		s, err := root.ReadString(root.Sys("devices", "system", "cpu", d.Name(), "topology", "thread_siblings_list"))
		if err != nil || seen[s] {
			continue
		}
		seen[s] = true
		if set, err := cpulist.Parse(s); err == nil && set.Size() > 1 {
			out = append(out, set.String())
		}
	}
	sort.Strings(out)
	return out
}

// Isolation returns the isolcpus, nohz_full and rcu_nocbs parameters of a
// kernel command line ("isolcpus=managed_irq,2-3"), in that order.
func Isolation(cmdline string) []string {
	var out []string
	for _, flag := range isolationFlags {
		for _, f := range strings.Fields(cmdline) {
			if f == "--" {
				break // the rest belongs to init
			}
			if strings.HasPrefix(f, flag+"=") {
				out = append(out, f)
			}
		}
	}
	return out
}

// MissingIsolation returns a message for each isolation flag that does not
// cover the isolated CPUs; empty means the command line is enough.
func MissingIsolation(isolated cpuset.CPUSet, flags []string) []string {
	if isolated.IsEmpty() {
		return nil
	}
	var missing []string
	for _, name := range isolationFlags {
		have := FlagCPUs(flags, name)
		if !isolated.IsSubsetOf(have) {
			missing = append(missing, fmt.Sprintf("%s=%s", name, isolated.String()))
		}
	}
	return missing
}

// FlagCPUs is the union of the CPU lists of the named isolation flags in
// flags (as Isolation returns them), skipping isolcpus's non-numeric
// options (managed_irq,domain,...).
func FlagCPUs(flags []string, names ...string) cpuset.CPUSet {
	out := cpuset.New()
	for _, f := range flags {
		name, v, _ := strings.Cut(f, "=")
		if !slices.Contains(names, name) {
			continue
		}
		parts := slices.DeleteFunc(strings.Split(v, ","), func(p string) bool {
			return p == "" || strings.Trim(p, "0123456789-") != ""
		})
		if set, err := cpulist.Parse(strings.Join(parts, ",")); err == nil {
			out = out.Union(set)
		}
	}
	return out
}
