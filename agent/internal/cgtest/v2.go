package cgtest

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/internal/privtest"
)

// CPUController is the real hierarchy holding the cpu controller and its
// cgroup version: a v1 cpu mount, or the v2 unified root, whose
// cgroup.subtree_control gets +cpu (systemd enables it only for units
// that ask) until t.Cleanup takes it back off if it was off. It fails the
// test (privtest) when not root or when the host has no cpu controller.
func CPUController(t testing.TB) (string, int) {
	t.Helper()
	privtest.Root(t)
	base, version, err := podcgroup.ControllerDir(host.New("/"), "cpu")
	if err != nil {
		privtest.Missing(t, "no cgroup cpu controller here: %v", err)
	}
	if version == 2 {
		enableCPU(t, base)
	}
	return base, version
}

// enableCPU turns the cpu controller on for the children of the v2 root.
func enableCPU(t testing.TB, root string) {
	t.Helper()
	if !slices.Contains(words(t, filepath.Join(root, "cgroup.controllers")), "cpu") {
		privtest.Missing(t, "the cgroup v2 root offers no cpu controller (%s/cgroup.controllers)", root)
	}
	f := filepath.Join(root, "cgroup.subtree_control")
	if slices.Contains(words(t, f), "cpu") {
		return
	}
	Set(t, f, "+cpu")
	// Cleanups run last-in first-out: this one after the pods' removal.
	// systemd may have started using cpu meanwhile; then it stays on.
	t.Cleanup(func() { _ = os.WriteFile(f, []byte("-cpu"), 0) })
}

func words(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// CPUPod builds a burstable pod in the cpu controller of whichever
// hierarchy this host has: V1Pod's cgroupfs tree on v1; on v2 the systemd
// driver's tree (kubelet on a cgroup v2 node with systemd) with cpu
// enabled down to the container, as kubelet does. Its cgroups are removed
// in t.Cleanup.
func CPUPod(t testing.TB, prefix string) Pod {
	t.Helper()
	return CPUPodNamed(t, prefix+RandHex(t, 4))
}

// CPUPodNamed is CPUPod under the kubepods name given (unique to the
// caller, which may reuse it once the pod's cleanup has run).
func CPUPodNamed(t testing.TB, kubepods string) Pod {
	t.Helper()
	base, version := CPUController(t)
	p := Pod{Kubepods: kubepods, Version: version, base: base, driver: podcgroup.DriverCgroupfs}
	if version == 2 {
		p.driver = podcgroup.DriverSystemd
	}
	p.build(t)
	return p
}

// SetQuota gives cgroup dir a CFS quota of us microseconds per 100 ms
// period (v1 cpu.cfs_quota_us, v2 cpu.max).
func (p Pod) SetQuota(t testing.TB, dir string, us int) {
	t.Helper()
	if p.Version == 2 {
		Set(t, filepath.Join(dir, "cpu.max"), strconv.Itoa(us)+" 100000")
		return
	}
	Set(t, filepath.Join(dir, "cpu.cfs_quota_us"), strconv.Itoa(us))
}

// MaxWeight gives cgroup dir the largest CPU weight the hierarchy allows
// (v1 cpu.shares 262144, v2 cpu.weight 10000).
func (p Pod) MaxWeight(t testing.TB, dir string) {
	t.Helper()
	if p.Version == 2 {
		Set(t, filepath.Join(dir, "cpu.weight"), "10000")
		return
	}
	Set(t, filepath.Join(dir, "cpu.shares"), "262144")
}
