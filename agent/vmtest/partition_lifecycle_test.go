//go:build privileged

package vmtest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/partition"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// podTree is kubeletTree for any pod and container: the burstable pod
// slice kubepods-burstable-pod<uidEsc>.slice and its containerd scope,
// cpuset.cpus as the static CPU manager writes it, one sleeping task in
// the scope (killed in cleanup). It returns the container's path relative
// to the cgroup root.
func podTree(t *testing.T, uidEsc, ctrID string, cpus cpuset.CPUSet) (string, *exec.Cmd) {
	t.Helper()
	enableCpuset(t, "/sys/fs/cgroup")
	rel := "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidEsc + ".slice/cri-containerd-" + ctrID + ".scope"
	dir := "/sys/fs/cgroup"
	for _, e := range strings.Split(rel, "/") {
		dir = filepath.Join(dir, e)
		if readOr(dir+"/cgroup.procs") == "<absent>" {
			mkcpuset(t, dir)
		}
	}
	write(t, dir+"/cpuset.cpus", cpus.String())
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	write(t, dir+"/cgroup.procs", itoa(sleep.Process.Pid))
	return rel, sleep
}

// deletePod does what kubelet does when a pod goes: its tasks are killed
// and reaped, and the container scope and the pod slice removed.
func deletePod(t *testing.T, root *host.Root, rel string, task *exec.Cmd) {
	t.Helper()
	ctr := root.Cgroup(rel)
	_ = task.Process.Kill()
	_ = task.Wait()
	for i := 0; readOr(ctr+"/cgroup.procs") != ""; i++ {
		if i > 500 {
			t.Fatalf("%s still has tasks after cgroup.kill", ctr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, dir := range []string{ctr, filepath.Dir(ctr)} {
		if err := syscall.Rmdir(dir); err != nil {
			t.Fatalf("rmdir %s (as kubelet would): %v", dir, err)
		}
	}
}

// A deleted pod's partitioned CPUs are claimable by the next pod kubelet
// gives them to (issue 25, item 2), whether kubelet removed the old pod's
// cgroups before the agent's next pass or the pass finds them still there:
// the pass restores the old pod's settings before it writes the new
// pod's, so the old pod slice's exclusive CPUs never block the new one
// (siblings' cpuset.cpus.exclusive must not overlap), and nothing of the
// old pod is left Failed. Revert then restores the new pod's tree.
func TestPartitionFreedForTheNextPod(t *testing.T) {
	root, row := vm(t)
	partitionRow(t, root, row)
	cpus := cpuset.New(2, 3)
	for _, removedFirst := range []bool{true, false} {
		name := "old-pod-cgroups-still-there"
		if removedFirst {
			name = "kubelet-removed-old-pod-first"
		}
		t.Run(name, func(t *testing.T) {
			relA, taskA := podTree(t, "aaaaaaaa_0000_4b1e_8f00_0123456789ab", strings.Repeat("a", 64), cpus)
			e := applyPartition(t, root, relA, cpus, partition.Isolated)
			if removedFirst {
				deletePod(t, root, relA, taskA)
			}
			relB, _ := podTree(t, "bbbbbbbb_0000_4b1e_8f00_0123456789ab", strings.Repeat("b", 64), cpus)
			rep := applyPartitionWith(t, e, partition.Probe(root, partition.DefaultKubepods), relB, cpus, partition.Isolated)
			for _, r := range rep.Restored {
				if r.State == v1alpha1.SettingFailed {
					t.Errorf("old pod %s left Failed: %s", r.Setting, r.Message)
				}
			}
			t.Logf("restored %d of the old pod's settings; the next pod's %d applied", len(rep.Restored), len(rep.Results))
			ctrB := root.Cgroup(relB)
			if got := readOr(ctrB + "/" + partition.PartitionFile); got != "isolated" {
				t.Errorf("next pod's partition %q, want isolated", got)
			}
			if got := readOr(ctrB + "/" + partition.ExclusiveEffectiveFile); got != cpus.String() {
				t.Errorf("next pod's exclusive effective %q, want %s", got, cpus)
			}
			if got := readOr("/sys/fs/cgroup/" + partition.IsolatedFile); got != cpus.String() {
				t.Errorf("root cpuset.cpus.isolated %q, want %s", got, cpus)
			}
			if !removedFirst {
				ctrA := root.Cgroup(relA)
				if got := readOr(ctrA + "/" + partition.PartitionFile); got != "member" {
					t.Errorf("old pod's container partition %q, want member again", got)
				}
				if got := readOr(filepath.Dir(ctrA) + "/" + partition.ExclusiveFile); got != "" {
					t.Errorf("old pod slice's exclusive CPUs %q, want none", got)
				}
			}
			if _, err := e.Revert(); err != nil {
				t.Fatal(err)
			}
			if got := readOr("/sys/fs/cgroup/" + partition.IsolatedFile); got != "" {
				t.Errorf("after revert root cpuset.cpus.isolated %q, want empty", got)
			}
			if got := readOr(ctrB + "/" + partition.PartitionFile); got != "member" {
				t.Errorf("after revert next pod's partition %q, want member", got)
			}
		})
	}
}
