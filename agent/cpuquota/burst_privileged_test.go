//go:build privileged

package cpuquota

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/cgstat"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/cgtest"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/podcgroup"
)

// bursts reads the pod's and the container's burst files.
func (p realPod) bursts(t *testing.T) (pod, ctr string) {
	t.Helper()
	return testroot.Read(t, filepath.Join(p.dir, cgstat.BurstFileV1)), testroot.Read(t, filepath.Join(p.ctr, cgstat.BurstFileV1))
}

// resize writes quota at pod and container level in kubelet's order: on a
// shrink the container first (a v1 parent may not drop below a child), on
// a growth the pod first.
func (p realPod) resize(t *testing.T, quota string, shrink bool) {
	t.Helper()
	files := []string{filepath.Join(p.dir, cgstat.QuotaFileV1), filepath.Join(p.ctr, cgstat.QuotaFileV1)}
	if shrink {
		files[0], files[1] = files[1], files[0]
	}
	for _, f := range files {
		cgtest.Set(t, f, quota)
	}
}

// killAll kills every process in cgroup dir and waits until it is empty,
// so the cgroup can be removed (a shell's children outlive its kill).
func killAll(t *testing.T, dir string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		pids := strings.Fields(testroot.Read(t, filepath.Join(dir, "cgroup.procs")))
		if len(pids) == 0 {
			return
		}
		for _, f := range pids {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	t.Errorf("processes left in %s", dir)
}

// burstPass renders the pods' bursts at percent and applies them, as one
// agent pass under policy Burst does.
func burstPass(t *testing.T, e *apply.Engine, kp string, percent int64, pods ...podcgroup.Pod) []knob.Knob {
	t.Helper()
	knobs, results, err := BurstKnobs(e.Root, pods, percent, podcgroup.WithKubepods(kp))
	if err != nil || len(results) != 0 {
		t.Fatalf("BurstKnobs: %v %v", results, err)
	}
	rep, err := e.Apply(apply.Meta{Profile: "p"}, knobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.State != "Applied" {
			t.Fatalf("%s: %s %s", r.Setting, r.State, r.Message)
		}
	}
	return knobs
}

func needBurst(t *testing.T, dir string) {
	t.Helper()
	if !host.New("/").Exists(filepath.Join(dir, cgstat.BurstFileV1)) {
		t.Fatalf("this kernel has no %s (CFS burst needs 5.14+); the test cannot prove anything here", cgstat.BurstFileV1)
	}
}

// TestRealV1BurstAppliedAndReverted: a pod opted in under policy Burst
// keeps its quotas and gets a burst of 50% of each (pod and container);
// a process that idles and then spins runs on it (cpu.stat nr_bursts
// grows); revert writes the original burst (0) back and the quotas are
// still kubelet's, and the process bursts no more.
func TestRealV1BurstAppliedAndReverted(t *testing.T) {
	kp, burstable := kubepods(t)
	root := testroot.RealKernel(t)
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	p := newRealPod(t, burstable, "bursty", "40000", "20000")
	needBurst(t, p.dir)
	if pb, cb := p.bursts(t); pb != "0" || cb != "0" {
		t.Fatalf("a fresh cgroup's burst is %s/%s, want 0", pb, cb)
	}

	burstPass(t, e, kp, 50, p.pod)
	if pb, cb := p.bursts(t); pb != "20000" || cb != "10000" {
		t.Fatalf("after apply: burst pod %s, container %s; want 20000, 10000 (50%% of each quota)", pb, cb)
	}
	if pq, cq := p.quotas(t); pq != "40000" || cq != "20000" {
		t.Fatalf("after apply: quota pod %s, container %s; want kubelet's 40000, 20000 kept", pq, cq)
	}

	// Idle periods bank quota; the spin after spends it.
	cgtest.StartIn(t, p.ctr, "sh", "-c", `while :; do sleep 0.3; timeout 0.2 sh -c 'while :; do :; done'; done`)
	t.Cleanup(func() { killAll(t, p.ctr) })
	start := time.Now()
	deadline := start.Add(10 * time.Second)
	var st cgstat.Throttling
	for ; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var err error
		if st, err = cgstat.Read(host.New("/"), p.ctr); err != nil {
			t.Fatal(err)
		}
		if st.Bursts > 0 && st.BurstTime > 0 {
			break
		}
	}
	t.Logf("container cpu.stat with a burst, after %v: nr_bursts %d, burst_time %v, nr_throttled %d",
		time.Since(start).Round(time.Millisecond), st.Bursts, st.BurstTime, st.Throttled)
	if st.Bursts == 0 || st.BurstTime == 0 {
		t.Fatal("an idle-then-busy process never ran on its burst")
	}

	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if pb, cb := p.bursts(t); pb != "0" || cb != "0" {
		t.Fatalf("after revert: burst pod %s, container %s; want the original 0", pb, cb)
	}
	if pq, cq := p.quotas(t); pq != "40000" || cq != "20000" {
		t.Fatalf("after revert: quota pod %s, container %s; want 40000, 20000", pq, cq)
	}
	// Without the burst the same process no longer bursts.
	before, _ := cgstat.Read(host.New("/"), p.ctr)
	time.Sleep(1200 * time.Millisecond)
	after, _ := cgstat.Read(host.New("/"), p.ctr)
	if after.Bursts != before.Bursts {
		t.Fatalf("nr_bursts grew %d → %d after revert", before.Bursts, after.Bursts)
	}
}

// TestRealBurstWriteOrder proves on the real kernel that the order of
// quota and burst writes matters, and that the agent keeps the one the
// kernel accepts. The kernel refuses (EINVAL) a quota below the current
// burst and a burst above the current quota.
//
// Down (kubelet resizes the pod from 1 CPU to half): writing the quota
// first, under the old burst, is refused; with the pod marked resizing the
// agent's pass lowers the burst first, kubelet's write is accepted, and
// the pass after derives the burst from the new quota.
//
// Up (kubelet resizes it back): a burst raised before the quota is
// refused; kubelet raises the quota, and the agent's next pass raises the
// burst.
func TestRealBurstWriteOrder(t *testing.T) {
	kp, burstable := kubepods(t)
	root := testroot.RealKernel(t)
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	p := newRealPod(t, burstable, "resized", "100000", "100000")
	needBurst(t, p.dir)
	t.Cleanup(func() {
		if _, err := e.Revert(); err != nil {
			t.Errorf("revert: %v", err)
		}
	})
	burstPass(t, e, kp, 100, p.pod)
	if pb, cb := p.bursts(t); pb != "100000" || cb != "100000" {
		t.Fatalf("burst pod %s, container %s; want 100000 (100%% of the quota)", pb, cb)
	}

	// Down, the wrong order: the quota first. Kubelet lowers the pod's
	// limit last on a shrink (containers first), so the container's
	// write is the one it would make first.
	ctrQuota := filepath.Join(p.ctr, cgstat.QuotaFileV1)
	if err := host.New("/").WriteString(ctrQuota, "50000"); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("quota 50000 under burst 100000: err = %v; want EINVAL (kubelet's resize would fail)", err)
	}
	if _, cq := p.quotas(t); cq != "100000" {
		t.Fatalf("the refused write changed the quota to %s", cq)
	}
	// The agent's order: the resize is seen, the burst yields first.
	resizing := p.pod
	resizing.Resizing = true
	burstPass(t, e, kp, 100, resizing)
	if pb, cb := p.bursts(t); pb != "0" || cb != "0" {
		t.Fatalf("during the resize: burst pod %s, container %s; want 0", pb, cb)
	}
	p.resize(t, "50000", true) // kubelet's writes: now accepted (cgtest.Set fails the test otherwise)
	burstPass(t, e, kp, 100, p.pod)
	if pb, cb := p.bursts(t); pb != "50000" || cb != "50000" {
		t.Fatalf("after the resize: burst pod %s, container %s; want 50000 from the new quota", pb, cb)
	}

	// Up, the wrong order: the burst first.
	if err := host.New("/").WriteString(filepath.Join(p.dir, cgstat.BurstFileV1), "100000"); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("burst 100000 over quota 50000: err = %v; want EINVAL", err)
	}
	// The agent's order: kubelet raises the quota, the next pass the burst.
	p.resize(t, "100000", false)
	burstPass(t, e, kp, 100, p.pod)
	if pb, cb := p.bursts(t); pb != "100000" || cb != "100000" {
		t.Fatalf("after the resize up: burst pod %s, container %s; want 100000", pb, cb)
	}
}

// TestRealPolicySwitchKeepsPairsValid: Remove → Burst → Remove on one pod.
// The engine restores the dropped policy's settings before writing the
// new one's, so the quota is back before any burst (a burst under an
// unlimited quota would make kubelet's quota refused) and the burst is 0
// before the quota goes. Every step is a pair the kernel accepted.
func TestRealPolicySwitchKeepsPairsValid(t *testing.T) {
	kp, burstable := kubepods(t)
	root := testroot.RealKernel(t)
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	p := newRealPod(t, burstable, "switch", "40000", "20000")
	needBurst(t, p.dir)
	t.Cleanup(func() {
		if _, err := e.Revert(); err != nil {
			t.Errorf("revert: %v", err)
		}
	})

	pass(t, e, kp, p.pod)
	if pq, cq := p.quotas(t); pq != cgstat.UnlimitedV1 || cq != cgstat.UnlimitedV1 {
		t.Fatalf("Remove: quota pod %s, container %s; want -1", pq, cq)
	}
	// First Burst pass: the quota comes back (restored); no burst is
	// derived from an unlimited quota.
	burstPass(t, e, kp, 100, p.pod)
	if pq, cq := p.quotas(t); pq != "40000" || cq != "20000" {
		t.Fatalf("first Burst pass: quota pod %s, container %s; want 40000, 20000 restored", pq, cq)
	}
	burstPass(t, e, kp, 100, p.pod)
	if pb, cb := p.bursts(t); pb != "40000" || cb != "20000" {
		t.Fatalf("second Burst pass: burst pod %s, container %s; want 40000, 20000", pb, cb)
	}
	// Back to Remove: the burst goes to 0 (restored) and the quota is removed.
	pass(t, e, kp, p.pod)
	if pb, cb := p.bursts(t); pb != "0" || cb != "0" {
		t.Fatalf("back to Remove: burst pod %s, container %s; want 0", pb, cb)
	}
	if pq, cq := p.quotas(t); pq != cgstat.UnlimitedV1 || cq != cgstat.UnlimitedV1 {
		t.Fatalf("back to Remove: quota pod %s, container %s; want -1", pq, cq)
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if pq, cq := p.quotas(t); pq != "40000" || cq != "20000" {
		t.Fatalf("after revert: quota pod %s, container %s; want 40000, 20000", pq, cq)
	}
}
