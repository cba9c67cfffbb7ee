//go:build privileged

package cpuset

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"k8s.io/utils/cpuset"

	"latencytier.io/latencytier/agent/cpumanager"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/cgtest"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/podcgroup"
	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/privtest"
)

// realV1 returns the real v1 cpuset hierarchy, skipping where there is none
// or fewer than two CPUs.
func realV1(t *testing.T) string {
	t.Helper()
	base := cgtest.V1Controller(t, "cpuset")
	all, err := readCPUs(host.New("/"), filepath.Join(base, CPUsFile))
	if err != nil || !all.Contains(0) || !all.Contains(1) {
		privtest.Missing(t, "need CPUs 0 and 1 in %s (%v, %v)", base, all, err)
	}
	return base
}

// mkCgroups creates rels under base with cpus and mems 0, and removes them
// (deepest first) in t.Cleanup.
func mkCgroups(t *testing.T, base string, rels map[string]string, order []string) {
	t.Helper()
	for _, rel := range order {
		d := filepath.Join(base, rel)
		cgtest.Mkdir(t, d)
		cgtest.Set(t, filepath.Join(d, CPUsFile), rels[rel])
		cgtest.Set(t, filepath.Join(d, "cpuset.mems"), "0")
	}
}

func allowedCPUs(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("no Cpus_allowed_list")
	return ""
}

// TestRealV1Confine confines a slice-shaped tree of the real v1 cpuset
// hierarchy (slice 0-1 → child 0-1 → grandchild 1 holding a process) to CPU
// 0 with the knobs in order, and restores it in reverse order.
func TestRealV1Confine(t *testing.T) {
	base := realV1(t)
	slice := "lttest-" + cgtest.RandHex(t, 4) + ".slice"
	child := filepath.Join(slice, "a.service")
	grand := filepath.Join(child, "leaf")
	mkCgroups(t, base, map[string]string{slice: "0-1", child: "0-1", grand: "1"}, []string{slice, child, grand})
	pid := cgtest.StartIn(t, filepath.Join(base, grand), "sleep", "300")

	// The kernel rule the order is built on: a parent may not shrink below
	// a child's CPUs.
	if err := host.New("/").WriteString(filepath.Join(base, slice, CPUsFile), "0"); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("shrinking the parent first: err = %v; want EBUSY", err)
	}

	missing := "lttest-missing-" + cgtest.RandHex(t, 4) + ".slice"
	knobs, results, err := Knobs(host.New("/"), cpuset.New(0), WithSlices(slice, missing))
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || results[0].Setting != "cpuset/"+missing || results[0].State != v1alpha1.SettingUnsupported {
		t.Fatalf("results = %+v; want the missing slice reported", results)
	}
	if host.New("/").IsDir(filepath.Join(base, missing)) {
		t.Fatal("Knobs created the missing slice")
	}
	wantIDs := []string{"cpuset/" + grand, "cpuset/" + child, "cpuset/" + slice}
	if len(knobs) != 3 {
		t.Fatalf("knobs = %+v", knobs)
	}
	for i, k := range knobs {
		if k.ID != wantIDs[i] || k.Desired != "0" {
			t.Fatalf("knob %d = %s %q; want %s \"0\"", i, k.ID, k.Desired, wantIDs[i])
		}
	}
	originals := make([]string, len(knobs))
	for i, k := range knobs {
		originals[i] = testroot.Read(t, k.Path)
	}
	for _, k := range knobs {
		cgtest.Set(t, k.Path, k.Desired)
	}
	t.Logf("applied: %s=%s %s=%s %s=%s; process allowed CPUs %s", slice, testroot.Read(t, knobs[2].Path),
		"a.service", testroot.Read(t, knobs[1].Path), "leaf", testroot.Read(t, knobs[0].Path), allowedCPUs(t, pid))
	if got := allowedCPUs(t, pid); got != "0" {
		t.Fatalf("process in the confined leaf may run on %s; want 0", got)
	}
	// Idempotent: recomputed knobs all match what the kernel now holds.
	again, _, err := Knobs(host.New("/"), cpuset.New(0), WithSlices(slice))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range again {
		if got := testroot.Read(t, k.Path); !k.Matches(got, k.Desired) {
			t.Errorf("after apply %s = %s; recomputed knob wants %s", k.ID, got, k.Desired)
		}
	}

	for i := len(knobs) - 1; i >= 0; i-- {
		cgtest.Set(t, knobs[i].Path, originals[i])
	}
	for i, k := range knobs {
		if got := testroot.Read(t, k.Path); got != originals[i] {
			t.Errorf("after revert %s = %s; want %s", k.ID, got, originals[i])
		}
	}
	if got := allowedCPUs(t, pid); got != "1" {
		t.Fatalf("after revert the process may run on %s; want 1", got)
	}
}

// TestRealHostSlices computes (without writing) the knobs for this host's
// real system slices: each slice is either confined or reported missing.
func TestRealHostSlices(t *testing.T) {
	realV1(t)
	base, _, _ := podcgroup.ControllerDir(host.New("/"), "cpuset")
	knobs, results, err := Knobs(host.New("/"), cpuset.New(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range SystemSlices {
		id := "cpuset/" + s
		reported := false
		for _, r := range results {
			reported = reported || (r.Setting == id && r.State == v1alpha1.SettingUnsupported)
		}
		confined := false
		for _, k := range knobs {
			confined = confined || k.ID == id
		}
		if exists := host.New("/").IsDir(filepath.Join(base, s)); exists != confined || exists == reported {
			t.Errorf("%s: exists=%v confined=%v reported=%v", s, exists, confined, reported)
		}
	}
	t.Logf("host slices: %d knobs, results %+v", len(knobs), results)
}

// TestRealV1PodCpuset pins a kubelet-shaped pod (cgroupfs driver, unique
// kubepods name) in the real v1 cpuset hierarchy to CPU 1 with PodKnobs
// under the none policy, and restores it.
func TestRealV1PodCpuset(t *testing.T) {
	realV1(t)
	tree := cgtest.V1Pod(t, "cpuset", podcgroup.DriverCgroupfs, "lttest-", func(dir string) {
		cgtest.Set(t, filepath.Join(dir, CPUsFile), "0-1")
		cgtest.Set(t, filepath.Join(dir, "cpuset.mems"), "0")
	})
	pid := cgtest.StartIn(t, tree.CtrDir, "sleep", "300")

	none, err := cpumanager.Parse([]byte(`{"policyName":"none","defaultCpuSet":"","checksum":1}`))
	if err != nil {
		t.Fatal(err)
	}
	p := podcgroup.Pod{UID: tree.UID, Namespace: "default", Name: "latency", Isolated: true}
	knobs, results, err := PodKnobs(host.New("/"), []podcgroup.Pod{p}, cpuset.New(1), none, podcgroup.WithKubepods(tree.Kubepods))
	if err != nil || len(results) != 0 || len(knobs) != 2 {
		t.Fatalf("PodKnobs: %+v %+v %v", knobs, results, err)
	}
	if knobs[0].Path != filepath.Join(tree.CtrDir, CPUsFile) || knobs[1].Path != filepath.Join(tree.Dir, CPUsFile) {
		t.Fatalf("knobs = %+v; want container then pod", knobs)
	}
	originals := []string{testroot.Read(t, knobs[0].Path), testroot.Read(t, knobs[1].Path)}
	for _, k := range knobs {
		cgtest.Set(t, k.Path, k.Desired)
	}
	if got := allowedCPUs(t, pid); got != "1" {
		t.Fatalf("container process may run on %s after apply; want 1", got)
	}
	for i := len(knobs) - 1; i >= 0; i-- {
		cgtest.Set(t, knobs[i].Path, originals[i])
	}
	if got := allowedCPUs(t, pid); got != "0-1" {
		t.Fatalf("container process may run on %s after revert; want 0-1", got)
	}
}
