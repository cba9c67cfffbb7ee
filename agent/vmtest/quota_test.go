//go:build privileged

package vmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"latencytier.io/latencytier/agent/cpuquota"
	"latencytier.io/latencytier/agent/podcgroup"
)

const (
	podUID = "7e57ab1e-0000-4b1e-8f00-0123456789ab"
	podEsc = "7e57ab1e_0000_4b1e_8f00_0123456789ab"
	ctrID  = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// Quota removal on a real cgroup v2 hierarchy shaped like kubelet and
// containerd with the systemd cgroup driver make it (kubepods.slice/
// kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice/
// cri-containerd-<id>.scope) with a process running in the container:
// the kernel takes "max" at pod and container level, and Revert writes
// back the exact limits.
func TestQuotaRemovalOnAV2SystemdDriverPod(t *testing.T) {
	root, _ := vm(t)
	if !cgroupV2() {
		t.Skip("cgroup v1 row: the v2 pod layout does not apply")
	}
	enableCPU(t, "/sys/fs/cgroup")
	kp := mkcg(t, "/sys/fs/cgroup/kubepods.slice")
	bu := mkcg(t, kp+"/kubepods-burstable.slice")
	pod := mkcg(t, bu+"/kubepods-burstable-pod"+podEsc+".slice")
	ctr := mkcg(t, pod+"/cri-containerd-"+ctrID+".scope")
	write(t, pod+"/cpu.max", "300000 100000")
	write(t, ctr+"/cpu.max", "200000 100000")
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	write(t, ctr+"/cgroup.procs", itoa(sleep.Process.Pid))

	p := podcgroup.Pod{UID: podUID, Namespace: "vm", Name: "quota", QOSClass: "Burstable",
		ContainerIDs: []string{"containerd://" + ctrID}, OptedIn: true}
	knobs, results, err := cpuquota.Knobs(root, []podcgroup.Pod{p})
	if err != nil || len(results) != 0 || len(knobs) != 2 {
		t.Fatalf("Knobs: %+v %+v %v; want pod and container knobs", knobs, results, err)
	}
	e := engine(root)
	t.Cleanup(func() { _, _ = e.Revert() })
	applyOne(t, e, knobs...)
	for _, d := range []string{pod, ctr} {
		if got := readOr(d + "/cpu.max"); got != "max 100000" {
			t.Errorf("%s cpu.max after apply = %q, want max 100000", d, got)
		}
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]string{pod: "300000 100000", ctr: "200000 100000"} {
		if got := readOr(d + "/cpu.max"); got != want {
			t.Errorf("%s cpu.max after revert = %q, want the original %q", d, got, want)
		}
	}
}

// enableCPU turns on the cpu controller for dir's children (systemd turns
// it on only for units that ask for CPU accounting) and back off after.
func enableCPU(t *testing.T, dir string) {
	t.Helper()
	f := filepath.Join(dir, "cgroup.subtree_control")
	if strings.Contains(readOr(f), "cpu") {
		return
	}
	write(t, f, "+cpu")
	t.Cleanup(func() { _ = os.WriteFile(f, []byte("-cpu"), 0) })
}

// mkcg creates a cgroup with the cpu controller for its children, removed
// (after its processes are gone) in cleanup.
func mkcg(t *testing.T, dir string) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Rmdir(dir) })
	if !strings.HasSuffix(dir, ".scope") {
		write(t, dir+"/cgroup.subtree_control", "+cpu")
	}
	return dir
}

func write(t *testing.T, path, v string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(v), 0); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
