package rtsched

import (
	"fmt"
	"path/filepath"

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
	dir, _, err := podcgroup.ControllerDir(root, "cpu")
	if err != nil {
		return fmt.Sprintf("the cpu cgroup hierarchy is unknown (%v)", err)
	}
	if f := filepath.Join(dir, "cpu.rt_runtime_us"); root.Exists(f) {
		return fmt.Sprintf("the kernel schedules real-time tasks by group (%s exists): a container cgroup without a real-time budget would fail to start", f)
	}
	return ""
}
