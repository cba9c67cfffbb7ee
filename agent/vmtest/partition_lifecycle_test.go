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
	removeContainer(t, root, rel, task)
	dir := filepath.Dir(root.Cgroup(rel))
	if err := syscall.Rmdir(dir); err != nil {
		t.Fatalf("rmdir %s (as kubelet would): %v", dir, err)
	}
}

// removeContainer does what the runtime does when a container exits: its
// task is killed and reaped and its scope removed; the pod slice stays.
func removeContainer(t *testing.T, root *host.Root, rel string, task *exec.Cmd) {
	t.Helper()
	ctr := root.Cgroup(rel)
	_ = task.Process.Kill()
	_ = task.Wait()
	for i := 0; readOr(ctr+"/cgroup.procs") != ""; i++ {
		if i > 500 {
			t.Fatalf("%s still has tasks after the kill", ctr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Rmdir(ctr); err != nil {
		t.Fatalf("rmdir %s (as the runtime would): %v", ctr, err)
	}
}

// A container that restarts gets its partition again (issue 25, item 2):
// the runtime removes the exited container's scope, kubelet starts the new
// one in the same pod slice with the same exclusive CPUs, and the agent's
// next pass partitions the new scope, restoring what it had written for
// the old one without a Failed setting. Revert leaves no isolated CPU.
func TestPartitionFollowsARestartedContainer(t *testing.T) {
	root, row := vm(t)
	partitionRow(t, root, row)
	cpus := cpuset.New(2, 3)
	const uid = "cccccccc_0000_4b1e_8f00_0123456789ab"
	relA, taskA := podTree(t, uid, strings.Repeat("c", 64), cpus)
	e := applyPartition(t, root, relA, cpus, partition.Isolated)
	removeContainer(t, root, relA, taskA)
	relB, _ := podTree(t, uid, strings.Repeat("d", 64), cpus)
	if filepath.Dir(relA) != filepath.Dir(relB) {
		t.Fatalf("restarted container %s is not in the pod slice of %s", relB, relA)
	}
	rep := applyPartitionWith(t, e, partition.Probe(root, partition.Kubepods(root)), relB, cpus, partition.Isolated)
	for _, r := range rep.Restored {
		if r.State == v1alpha1.SettingFailed {
			t.Errorf("exited container's %s left Failed: %s", r.Setting, r.Message)
		}
	}
	t.Logf("restored %d of the exited container's settings; the restarted one's %d applied", len(rep.Restored), len(rep.Results))
	checkIsolated(t, "restarted container", root.Cgroup(relB), cpus)
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if got := readOr("/sys/fs/cgroup/" + partition.IsolatedFile); got != "" {
		t.Errorf("after revert root cpuset.cpus.isolated %q, want empty", got)
	}
	if got := readOr(root.Cgroup(relB) + "/" + partition.PartitionFile); got != "member" {
		t.Errorf("after revert the restarted container's partition %q, want member", got)
	}
}

// systemdPodTree is the container cgroup as kubelet with the systemd
// driver and runc make it: every slice and the scope are systemd units
// (systemd-run --scope in the pod slice creates kubepods.slice,
// kubepods-burstable.slice and the pod slice from the name), the scope
// delegated with AllowedCPUs as runc sets it for the static CPU manager's
// exclusive CPUs, so systemd itself enables the cpuset controller down
// the path and owns every file it writes there. It returns the
// container's path relative to the cgroup root and its scope unit.
func systemdPodTree(t *testing.T, uidEsc, ctrID string, cpus cpuset.CPUSet) (rel, unit string) {
	t.Helper()
	pod := "kubepods-burstable-pod" + uidEsc + ".slice"
	unit = "cri-containerd-" + ctrID + ".scope"
	rel = "kubepods.slice/kubepods-burstable.slice/" + pod + "/" + unit
	c := exec.Command("systemd-run", "--quiet", "--scope", "--unit="+unit, "--slice="+pod,
		"-p", "Delegate=yes", "-p", "AllowedCPUs="+cpus.String(), "sleep", "600")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Process.Kill()
		_ = c.Wait()
		_ = exec.Command("systemctl", "stop", "kubepods.slice").Run()
	})
	dir := cg(rel)
	for i := 0; readOr(dir+"/cgroup.procs") == "<absent>" || readOr(dir+"/cgroup.procs") == "" || readOr(dir+"/cpuset.cpus") != cpus.String(); i++ {
		if i > 1000 {
			t.Fatalf("systemd did not make %s with cpuset.cpus %s (procs %q, cpuset.cpus %q)", dir, cpus, readOr(dir+"/cgroup.procs"), readOr(dir+"/cpuset.cpus"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return rel, unit
}

// cg is the cgroup rel (relative to the cgroup root) in the guest.
func cg(rel string) string { return filepath.Join("/sys/fs/cgroup", rel) }

// A partition whose slices and scope systemd owns (kubelet's systemd
// driver) holds through what systemd does to them: a daemon-reload, which
// makes systemd apply every unit's cgroup settings again, and a
// set-property of the scope's AllowedCPUs, which is what runc does when
// kubelet's CPU manager updates the container. Revert restores every file.
func TestPartitionSurvivesSystemdOwningTheSlices(t *testing.T) {
	root, row := vm(t)
	partitionRow(t, root, row)
	cpus := cpuset.New(2, 3)
	rel, unit := systemdPodTree(t, "eeeeeeee_0000_4b1e_8f00_0123456789ab", strings.Repeat("e", 64), cpus)
	before := view(t, rel)
	e := applyPartition(t, root, rel, cpus, partition.Isolated)
	checkIsolated(t, "after apply", cg(rel), cpus)
	for _, step := range [][]string{
		{"systemctl", "daemon-reload"},
		{"systemctl", "set-property", "--runtime", unit, "AllowedCPUs=" + cpus.String()},
		{"systemctl", "daemon-reload"},
	} {
		if out, err := exec.Command(step[0], step[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v %s", strings.Join(step, " "), err, out)
		}
		checkIsolated(t, "after "+strings.Join(step, " "), cg(rel), cpus)
	}
	rep := applyPartitionWith(t, e, partition.Probe(root, partition.Kubepods(root)), rel, cpus, partition.Isolated)
	if len(rep.Drifts) > 0 {
		t.Errorf("systemd changed the partition's files: %+v", rep.Drifts)
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if d := before.diff(view(t, rel)); len(d) > 0 {
		t.Errorf("revert left:\n%s", strings.Join(d, "\n"))
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
