// Package tiersched decides whether and how latencytier's own sched_ext
// scheduler (agent/tiersched/bpf) runs on a node, and owns its life there:
// the refusals checked before anything is loaded (Preflight), the
// scheduler/class knob's Access (load, verify, pin; unload only our own
// instance), and the watch for the kernel ejecting it (an exit marker the
// agent reports as Fallback and never reloads over by itself).
//
// The scheduler is experimental and off unless a profile asks for it.
package tiersched

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/cilium/ebpf/btf"

	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/kerr"
	"latencytier.io/latencytier/agent/schedext"
	tbpf "latencytier.io/latencytier/agent/tiersched/bpf"
)

// Refused is a refusal decided before the kernel is touched: Class says how
// status reports it (kerr.Unsupported, kerr.Conflict) and Reason is the
// setting's message.
type Refused = kerr.Refused

func unsupported(format string, a ...any) *Refused {
	return &Refused{Class: kerr.Unsupported, Reason: fmt.Sprintf(format, a...)}
}

// Node is what Preflight decides on, read once (ReadNode).
type Node struct {
	// SchedExt is /sys/kernel/sched_ext.
	SchedExt schedext.State
	// Ours says the attached scheduler (if any) is this agent's pinned one.
	Ours bool
	// BTF is /sys/kernel/btf/vmlinux; "" when absent.
	BTF string
	// Kernel is the kernel's BTF, nil when absent or unreadable (BTFErr).
	Kernel *btf.Spec
	BTFErr error
	// Release is /proc/sys/kernel/osrelease.
	Release string
	// Cmdline is /proc/cmdline.
	Cmdline string
	// IsolatedPartitions is the cgroup v2 root's cpuset.cpus.isolated
	// (isolated cpuset partitions), "" when none or not cgroup v2.
	IsolatedPartitions string
	// BPFFS says the pin directory's parent is a bpffs (the host's, so the
	// scheduler outlives the agent's container); BPFFSDir names it.
	BPFFS    bool
	BPFFSDir string
}

// ReadNode reads what Preflight needs. The kernel's BTF is parsed only when
// sched_ext is present (it is the one costly read).
func ReadNode(root *host.Root) Node {
	n := Node{SchedExt: schedext.Read(root), BPFFSDir: root.Sys("fs", "bpf")}
	n.Ours = n.SchedExt.Ops == tbpf.OpsName && tbpf.Pinned(PinDir(root))
	if p := root.Sys("kernel", "btf", "vmlinux"); root.Exists(p) {
		n.BTF = p
		if n.SchedExt.Supported {
			n.Kernel, n.BTFErr = btf.LoadSpec(p)
		}
	}
	n.Release, _ = root.ReadString(root.Proc("sys", "kernel", "osrelease"))
	n.Release = strings.TrimSpace(n.Release)
	n.Cmdline, _ = root.ReadString(root.Proc("cmdline"))
	if v, err := root.ReadString(root.Cgroup("cpuset.cpus.isolated")); err == nil {
		n.IsolatedPartitions = strings.TrimSpace(v)
	}
	var st syscall.Statfs_t
	n.BPFFS = syscall.Statfs(n.BPFFSDir, &st) == nil && uint32(st.Type) == bpffsMagic
	return n
}

const bpffsMagic = 0xcafe4a11 // BPF_FS_MAGIC

// PinDir is where the scheduler's link and maps are pinned on the host's
// bpffs.
func PinDir(root *host.Root) string { return root.Sys("fs", "bpf", "latencytier", "tier") }

// Preflight is why the scheduler may not be loaded on n, nil when it may.
// Every refusal the kernel would make is made here first, with a reason a
// person can act on, so nothing is loaded to find out.
func Preflight(n Node) *Refused {
	for _, check := range []func(Node) *Refused{noSchedExt, noBTF, otherScheduler, isolcpusDomain, partitionsOn70, missingKfuncs, noHostBPFFS} {
		if r := check(n); r != nil {
			return r
		}
	}
	return nil
}

func noSchedExt(n Node) *Refused {
	if !n.SchedExt.Supported {
		return unsupported("sched_ext is not built into this kernel (%s; no /sys/kernel/sched_ext): the tier scheduler needs Linux 6.13+ with CONFIG_SCHED_CLASS_EXT=y", release(n))
	}
	if n.SchedExt.Problem != "" {
		return unsupported("/sys/kernel/sched_ext is unreadable: %s", n.SchedExt.Problem)
	}
	return nil
}

func noBTF(n Node) *Refused {
	switch {
	case n.BTF == "":
		return unsupported("this kernel has no BTF (/sys/kernel/btf/vmlinux missing; CONFIG_DEBUG_INFO_BTF): a sched_ext scheduler cannot be loaded without it")
	case n.Kernel == nil && n.BTFErr != nil:
		return unsupported("the kernel's BTF (%s) is unreadable: %v", n.BTF, n.BTFErr)
	}
	return nil
}

func otherScheduler(n Node) *Refused {
	if n.SchedExt.Class() == schedext.ClassFair || n.Ours {
		return nil
	}
	return &Refused{Class: kerr.Conflict, Reason: fmt.Sprintf("another sched_ext scheduler is loaded (%s); latencytier never unloads a scheduler it did not load: unload it, or leave scheduler.class unset", n.SchedExt)}
}

// isolcpus= isolates scheduler domains unless its flags leave "domain" out
// (no flags at all means domain); sched_ext refuses to load with it
// (scx_enable: "Not compatible with \"isolcpus=\" domain isolation").
func isolcpusDomain(n Node) *Refused {
	for _, f := range facts.Isolation(n.Cmdline) {
		v, ok := strings.CutPrefix(f, "isolcpus=")
		if !ok || !domainIsolation(v) {
			continue
		}
		return unsupported("the kernel command line isolates scheduler domains (%s), and sched_ext refuses to load with isolcpus= domain isolation; use isolcpus=managed_irq,<cpus> with an isolated cpuset partition instead", f)
	}
	return nil
}

// domainIsolation says whether an isolcpus value isolates domains: either
// it names the domain flag, or it names no flag at all.
func domainIsolation(v string) bool {
	flags := 0
	for _, part := range strings.Split(v, ",") {
		if part == "" || strings.Trim(part, "0123456789-") == "" {
			continue
		}
		if part == "domain" {
			return true
		}
		flags++
	}
	return flags == 0
}

// Linux 7.0 counted isolated cpuset partitions as domain isolation, so
// sched_ext refused to load while one existed, until 6ae315d37924 (7.1).
func partitionsOn70(n Node) *Refused {
	if n.IsolatedPartitions == "" || !strings.HasPrefix(n.Release, "7.0.") {
		return nil
	}
	return unsupported("Linux %s refuses sched_ext while an isolated cpuset partition exists (CPUs %s; fixed in 7.1 by 6ae315d37924): remove the partition or use a 7.1+ kernel", n.Release, n.IsolatedPartitions)
}

func missingKfuncs(n Node) *Refused {
	if n.Kernel == nil {
		return nil
	}
	var missing []string
	has := func(name string) bool { return tbpf.Has(n.Kernel, name) }
	if !has("bpf_struct_ops_" + tbpf.StructOps) {
		missing = append(missing, "struct "+tbpf.StructOps)
	}
	for _, k := range tbpf.Kfuncs {
		if !has(k) {
			missing = append(missing, k)
		}
	}
	if tbpf.InsertKfunc(n.Kernel) == "" {
		missing = append(missing, strings.Join(tbpf.InsertKfuncs, " or "))
	}
	if len(missing) == 0 {
		return nil
	}
	return unsupported("this kernel (%s) lacks what the tier scheduler calls: %s (it needs Linux 6.13+)", release(n), strings.Join(missing, ", "))
}

func noHostBPFFS(n Node) *Refused {
	if n.BPFFS {
		return nil
	}
	return unsupported("no bpffs at %s: the scheduler is pinned there so it outlives the agent's process; without the host's bpffs it would die with the agent (mount the host's /sys/fs/bpf into the agent)", n.BPFFSDir)
}

func release(n Node) string {
	if n.Release == "" {
		return "unknown release"
	}
	return "Linux " + n.Release
}

func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

func removeFile(path string) error { return os.Remove(path) }
