package rtsched

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/podcgroup"
)

// CreateRefused says why a container created with a real-time policy (the
// OCI spec's process.scheduler, which the NRI plugin sets at
// CreateContainer) could fail to start on this node, "" when nothing says
// so. The OCI runtime calls sched_setattr in the new container's cgroup and
// fails the container when the kernel refuses, so the plugin must not ask
// where the kernel has real-time group scheduling (CONFIG_RT_GROUP_SCHED:
// cpu.rt_runtime_us in the cpu hierarchy's root): kubelet makes every pod
// cgroup with a budget of 0 there (rtRefused), and the file path refuses
// such pods instead of failing them. Unknown (no cpu hierarchy) is a refusal
// too: the plugin fails open, never closed. So is an agent outside the
// host's pid namespace: it could neither journal the thread it started
// real-time (Started) nor restore it, and the node restores what it set.
func CreateRefused(root *host.Root) string {
	if err := sameNamespace(root); err != nil {
		return fmt.Sprintf("the agent could not journal or restore a policy it set at creation: %v", err)
	}
	dir, version, err := podcgroup.ControllerDir(root, "cpu")
	if err != nil {
		return fmt.Sprintf("the cpu cgroup hierarchy is unknown (%v)", err)
	}
	if f := filepath.Join(dir, "cpu.rt_runtime_us"); root.Exists(f) {
		return fmt.Sprintf("the kernel schedules real-time tasks by group (%s exists): a container cgroup without a real-time budget would fail to start", f)
	}
	if version != 1 {
		// cgroup v2 has no cpu.rt_runtime_us to show it, yet a kernel
		// built with CONFIG_RT_GROUP_SCHED gives every child cgroup a
		// real-time budget of 0 there too: runc's sched_setattr in the
		// new container fails with EPERM and the container never starts.
		switch built, err := rtGroupSchedBuilt(root); {
		case err != nil:
			return fmt.Sprintf("whether the kernel schedules real-time tasks by group is unknown (%v)", err)
		case built:
			return fmt.Sprintf("the kernel is built with real-time group scheduling (CONFIG_RT_GROUP_SCHED: its BTF has %s): on cgroup v2 a container cgroup has no real-time budget and would fail to start", rtGroupSchedFunc)
		}
	}
	return ""
}

// rtGroupSchedFunc is a function the kernel has only when built with
// CONFIG_RT_GROUP_SCHED (kernel/sched/rt.c, since 2.6.25): what writing a
// v1 group's cpu.rt_runtime_us calls.
const rtGroupSchedFunc = "sched_group_set_rt_runtime"

// maxBTF bounds the read of the kernel's BTF (6 MB on Debian's 6.12).
const maxBTF = 64 << 20

var btfNames sync.Map // BTF path -> btfAnswer: the running kernel's never changes

type btfAnswer struct {
	built bool
	err   error
}

// rtGroupSchedBuilt reports whether the kernel was built with real-time
// group scheduling: its BTF (/sys/kernel/btf/vmlinux) names
// rtGroupSchedFunc among its strings. Without BTF it is unknown (an error),
// and the caller refuses: the plugin fails open, never closed.
func rtGroupSchedBuilt(root *host.Root) (bool, error) {
	path := root.Sys("kernel", "btf", "vmlinux")
	if a, ok := btfNames.Load(path); ok {
		return a.(btfAnswer).built, a.(btfAnswer).err
	}
	var a btfAnswer
	f, err := os.Open(path)
	if err == nil {
		var b []byte
		b, err = io.ReadAll(io.LimitReader(f, maxBTF+1))
		f.Close()
		switch {
		case err != nil:
		case len(b) > maxBTF:
			err = fmt.Errorf("%s is larger than %d bytes", path, maxBTF)
		default:
			a.built = bytes.Contains(b, []byte("\x00"+rtGroupSchedFunc+"\x00"))
		}
	}
	if err != nil {
		a.err = fmt.Errorf("reading the kernel's BTF: %w", err)
	}
	btfNames.Store(path, a)
	return a.built, a.err
}
