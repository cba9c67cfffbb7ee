//go:build privileged

package cpuquota

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"latencytier.io/latencytier/agent/cgstat"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/cgtest"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/podcgroup"
)

func throttled(t *testing.T, dir string) int64 {
	t.Helper()
	st, err := cgstat.Read(host.New("/"), dir)
	if err != nil {
		t.Fatal(err)
	}
	return st.Throttled
}

// growth is how much nr_throttled of dir grows over d (5 CFS periods at
// 500ms: a throttled spinner is throttled in nearly every one).
func growth(t *testing.T, dir string, d time.Duration) int64 {
	t.Helper()
	before := throttled(t, dir)
	time.Sleep(d)
	return throttled(t, dir) - before
}

const window = 500 * time.Millisecond

// TestRealV1QuotaRemoval runs a busy process under a kubelet-shaped pod and
// container cgroup with CFS quotas on the real kernel, removes the quota
// through the knobs Knobs returns (applied in order), sees throttling stop,
// reverts in reverse order and sees the quotas, and the throttling, return.
func TestRealV1QuotaRemoval(t *testing.T) {
	for _, driver := range []string{podcgroup.DriverCgroupfs, podcgroup.DriverSystemd} {
		t.Run(driver, func(t *testing.T) { testRealV1QuotaRemoval(t, driver) })
	}
}

func testRealV1QuotaRemoval(t *testing.T, driver string) {
	pod := cgtest.V1Pod(t, "cpu", driver, "lttest-", nil)
	kubepods, uid, podDir, ctrDir := pod.Kubepods, pod.UID, pod.Dir, pod.CtrDir
	podQuota := filepath.Join(podDir, cgstat.QuotaFileV1)
	ctrQuota := filepath.Join(ctrDir, cgstat.QuotaFileV1)

	// What kubelet and the runtime do: the pod limit first, then the
	// container's within it.
	cgtest.Set(t, podQuota, "20000")
	cgtest.Set(t, ctrQuota, "10000")

	// The kernel rule the knob order is built on: a v1 child quota may not
	// exceed its parent's, and a parent may not drop below a child's.
	if err := host.New("/").WriteString(ctrQuota, "30000"); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("container quota above the pod's: err = %v; want EINVAL", err)
	}
	if err := host.New("/").WriteString(podQuota, "5000"); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("pod quota below the container's: err = %v; want EINVAL", err)
	}

	cgtest.Spin(t, ctrDir)
	first := cgtest.ThrottledGrowth(t, ctrDir, window)
	t.Logf("quota 10000/100000: container nr_throttled +%d over ≥%v (from %d)", first, window, throttled(t, ctrDir)-first)
	if first == 0 {
		t.Fatal("a busy process under a 10% quota was never throttled")
	}

	// Removing only the container's limit still throttles at the pod.
	cgtest.Set(t, ctrQuota, cgstat.UnlimitedV1)
	podOnly := cgtest.ThrottledGrowth(t, podDir, window)
	t.Logf("container quota -1, pod 20000: pod nr_throttled +%d over ≥%v", podOnly, window)
	if podOnly == 0 {
		t.Fatal("pod-level quota did not throttle once the container's was removed")
	}
	cgtest.Set(t, ctrQuota, "10000")

	pods := []podcgroup.Pod{
		{UID: uid, Namespace: "default", Name: "latency", OptedIn: true},
		{UID: "not-opted-in", Namespace: "default", Name: "batch"},
	}
	knobs, results, err := Knobs(host.New("/"), pods, podcgroup.WithKubepods(kubepods))
	if err != nil || len(results) != 0 {
		t.Fatalf("Knobs: %v %v", results, err)
	}
	if len(knobs) != 2 || knobs[0].Path != podQuota || knobs[1].Path != ctrQuota {
		t.Fatalf("knobs = %+v; want pod then container", knobs)
	}
	originals := make([]string, len(knobs))
	for i, k := range knobs {
		originals[i] = testroot.Read(t, k.Path)
	}
	for _, k := range knobs {
		cgtest.Set(t, k.Path, k.Desired)
		if got := testroot.Read(t, k.Path); !k.Matches(got, k.Desired) {
			t.Fatalf("%s = %s after apply; want %s", k.ID, got, k.Desired)
		}
	}
	time.Sleep(100 * time.Millisecond) // let a period in flight end
	podBefore, ctrBefore := throttled(t, podDir), throttled(t, ctrDir)
	podAfter, ctrAfter := growth(t, podDir, window), growth(t, ctrDir, window)
	t.Logf("quota removed at pod and container: nr_throttled pod %d → %d, container %d → %d over 2×%v",
		podBefore, throttled(t, podDir), ctrBefore, throttled(t, ctrDir), window)
	if podAfter != 0 || ctrAfter != 0 {
		t.Fatalf("still throttled after removal: pod +%d, container +%d", podAfter, ctrAfter)
	}

	for i := len(knobs) - 1; i >= 0; i-- {
		cgtest.Set(t, knobs[i].Path, originals[i])
	}
	if p, c := testroot.Read(t, podQuota), testroot.Read(t, ctrQuota); p != "20000" || c != "10000" {
		t.Fatalf("after revert pod=%s container=%s; want 20000, 10000", p, c)
	}
	again := cgtest.ThrottledGrowth(t, ctrDir, window)
	t.Logf("after revert: container nr_throttled +%d over ≥%v", again, window)
	if again == 0 {
		t.Fatal("reverted quota does not throttle")
	}
}
