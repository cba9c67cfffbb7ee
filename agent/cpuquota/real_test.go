package cpuquota

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/podcgroup"
)

const spinEnv = "LATENCYTIER_CPUQUOTA_SPIN"

func TestMain(m *testing.M) {
	if os.Getenv(spinEnv) == "1" {
		for {
		}
	}
	os.Exit(m.Run())
}

func randHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// v1Tree builds a kubelet-shaped burstable pod with one container in the
// real v1 cpu controller under a unique kubepods name, for the cgroupfs
// (<kubepods>/burstable/pod<uid>/<cid>) or the systemd driver
// (<kubepods>.slice/<kubepods>-burstable.slice/<kubepods>-burstable-pod<uid_>.slice/cri-containerd-<cid>.scope),
// and removes it in t.Cleanup.
func v1Tree(t *testing.T, driver string) (kubepods, uid, podDir, ctrDir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	base, version, err := podcgroup.ControllerDir(host.New("/"), "cpu")
	if err != nil || version != 1 {
		t.Skipf("no cgroup v1 cpu controller here (version %d, %v)", version, err)
	}
	kubepods = "lttest-" + randHex(t, 4)
	uid = randHex(t, 4) + "-0000-4000-8000-" + randHex(t, 6)
	cid := randHex(t, 32)
	rels := []string{kubepods, "burstable", "pod" + uid, cid}
	if driver == podcgroup.DriverSystemd {
		rels = []string{kubepods + ".slice", kubepods + "-burstable.slice",
			kubepods + "-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice", "cri-containerd-" + cid + ".scope"}
	}
	var dirs []string
	dir := base
	for _, r := range rels {
		dir = filepath.Join(dir, r)
		dirs = append(dirs, dir)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil {
				t.Errorf("removing test cgroup: %v", err)
			}
		}
	})
	return kubepods, uid, dirs[2], dirs[3]
}

// spin starts a busy process in cgroup dir and kills it in t.Cleanup
// (registered after the tree's, so it runs before the rmdir).
func spin(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), spinEnv+"=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	write(t, filepath.Join(dir, "cgroup.procs"), strconv.Itoa(cmd.Process.Pid))
}

func write(t *testing.T, path, val string) {
	t.Helper()
	if err := host.New("/").WriteString(path, val); err != nil {
		t.Fatalf("writing %q to %s: %v", val, path, err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	v, err := host.New("/").ReadString(path)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func throttled(t *testing.T, dir string) int64 {
	t.Helper()
	_, n, _, err := Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// growth is how much nr_throttled of dir grows over d (5 CFS periods at
// 500ms: a throttled spinner is throttled in nearly every one).
func growth(t *testing.T, dir string, d time.Duration) int64 {
	t.Helper()
	before := throttled(t, dir)
	time.Sleep(d)
	return throttled(t, dir) - before
}

// throttling waits until nr_throttled of dir grows (at least d, at most
// 10s: on a loaded machine a spinner may not even get its quota's worth of
// CPU in a period) and returns the growth.
func throttling(t *testing.T, dir string, d time.Duration) int64 {
	t.Helper()
	before := throttled(t, dir)
	time.Sleep(d)
	for deadline := time.Now().Add(10 * time.Second); throttled(t, dir) == before && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
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
	kubepods, uid, podDir, ctrDir := v1Tree(t, driver)
	podQuota := filepath.Join(podDir, QuotaFileV1)
	ctrQuota := filepath.Join(ctrDir, QuotaFileV1)

	// What kubelet and the runtime do: the pod limit first, then the
	// container's within it.
	write(t, podQuota, "20000")
	write(t, ctrQuota, "10000")

	// The kernel rule the knob order is built on: a v1 child quota may not
	// exceed its parent's, and a parent may not drop below a child's.
	if err := host.New("/").WriteString(ctrQuota, "30000"); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("container quota above the pod's: err = %v; want EINVAL", err)
	}
	if err := host.New("/").WriteString(podQuota, "5000"); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("pod quota below the container's: err = %v; want EINVAL", err)
	}

	spin(t, ctrDir)
	first := throttling(t, ctrDir, window)
	t.Logf("quota 10000/100000: container nr_throttled +%d over ≥%v (from %d)", first, window, throttled(t, ctrDir)-first)
	if first == 0 {
		t.Fatal("a busy process under a 10% quota was never throttled")
	}

	// Removing only the container's limit still throttles at the pod.
	write(t, ctrQuota, Unlimited)
	podOnly := throttling(t, podDir, window)
	t.Logf("container quota -1, pod 20000: pod nr_throttled +%d over ≥%v", podOnly, window)
	if podOnly == 0 {
		t.Fatal("pod-level quota did not throttle once the container's was removed")
	}
	write(t, ctrQuota, "10000")

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
		originals[i] = read(t, k.Path)
	}
	for _, k := range knobs {
		write(t, k.Path, k.Desired)
		if got := read(t, k.Path); !k.Matches(got, k.Desired) {
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
		write(t, knobs[i].Path, originals[i])
	}
	if p, c := read(t, podQuota), read(t, ctrQuota); p != "20000" || c != "10000" {
		t.Fatalf("after revert pod=%s container=%s; want 20000, 10000", p, c)
	}
	again := throttling(t, ctrDir, window)
	t.Logf("after revert: container nr_throttled +%d over ≥%v", again, window)
	if again == 0 {
		t.Fatal("reverted quota does not throttle")
	}
}
