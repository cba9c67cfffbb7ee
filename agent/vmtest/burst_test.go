//go:build privileged

package vmtest

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"latencytier.io/latencytier/agent/cpuquota"
	"latencytier.io/latencytier/agent/podcgroup"
)

// CFS burst (cpuQuota.policy Burst) on a real cgroup v2 hierarchy shaped
// like kubelet's with the systemd driver (see
// TestQuotaRemovalOnAV2SystemdDriverPod): cpu.max.burst at pod and
// container level from each cgroup's own cpu.max, the quotas kept; the
// kernel refuses a cpu.max below the burst (the wrong order, EINVAL) and
// accepts it once the agent's pass for a resizing pod has set the burst
// to 0; the pass after the resize derives the burst from the new quota;
// Revert writes the original burst (0) back and leaves kubelet's quotas.
func TestBurstOnAV2SystemdDriverPod(t *testing.T) {
	root, _ := vm(t)
	if !cgroupV2() {
		t.Skip("cgroup v1 row: the v2 pod layout does not apply (v1 burst is tested on the host: agent/cpuquota)")
	}
	enableCPU(t, "/sys/fs/cgroup")
	kp := mkcg(t, "/sys/fs/cgroup/kubepods.slice")
	bu := mkcg(t, kp+"/kubepods-burstable.slice")
	pod := mkcg(t, bu+"/kubepods-burstable-pod"+podEsc+".slice")
	ctr := mkcg(t, pod+"/cri-containerd-"+ctrID+".scope")
	write(t, pod+"/cpu.max", "300000 100000")
	write(t, ctr+"/cpu.max", "200000 100000")
	if _, err := os.Stat(ctr + "/cpu.max.burst"); err != nil {
		t.Fatalf("no cpu.max.burst on this row's kernel (5.14+ has it): %v", err)
	}
	sleep := exec.Command("sleep", "600")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Process.Kill(); _ = sleep.Wait() })
	write(t, ctr+"/cgroup.procs", itoa(sleep.Process.Pid))

	p := podcgroup.Pod{UID: podUID, Namespace: "vm", Name: "burst", QOSClass: "Burstable",
		ContainerIDs: []string{"containerd://" + ctrID}, OptedIn: true, Burst: true}
	e := engine(root)
	t.Cleanup(func() { _, _ = e.Revert() })
	pass := func(p podcgroup.Pod, want map[string]string) {
		t.Helper()
		knobs, results, err := cpuquota.BurstKnobs(root, []podcgroup.Pod{p}, 100)
		if err != nil || len(results) != 0 || len(knobs) != 2 {
			t.Fatalf("BurstKnobs: %+v %+v %v; want pod and container knobs", knobs, results, err)
		}
		applyOne(t, e, knobs...)
		for f, w := range want {
			if got := readOr(f); got != w {
				t.Errorf("%s = %q, want %q", f, got, w)
			}
		}
	}
	pass(p, map[string]string{pod + "/cpu.max.burst": "300000", ctr + "/cpu.max.burst": "200000",
		pod + "/cpu.max": "300000 100000", ctr + "/cpu.max": "200000 100000"})

	// kubelet shrinks the pod to 1 CPU. Its write under the old burst:
	if err := os.WriteFile(ctr+"/cpu.max", []byte("100000 100000"), 0); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("cpu.max 100000 under cpu.max.burst 200000: err = %v; want EINVAL", err)
	}
	// The agent's order: the resize is seen, the burst yields first.
	resizing := p
	resizing.Resizing = true
	pass(resizing, map[string]string{pod + "/cpu.max.burst": "0", ctr + "/cpu.max.burst": "0"})
	write(t, ctr+"/cpu.max", "100000 100000")
	write(t, pod+"/cpu.max", "100000 100000")
	pass(p, map[string]string{pod + "/cpu.max.burst": "100000", ctr + "/cpu.max.burst": "100000"})

	// A burst above the quota is refused too: the quota must rise first.
	if err := os.WriteFile(pod+"/cpu.max.burst", []byte("300000"), 0); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("cpu.max.burst 300000 over cpu.max 100000: err = %v; want EINVAL", err)
	}

	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{pod + "/cpu.max.burst": "0", ctr + "/cpu.max.burst": "0",
		pod + "/cpu.max": "100000 100000", ctr + "/cpu.max": "100000 100000"} {
		if got := readOr(f); got != want {
			t.Errorf("%s after revert = %q, want %q (the original burst, kubelet's resized quota)", f, got, want)
		}
	}
}
