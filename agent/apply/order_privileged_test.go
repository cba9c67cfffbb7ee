//go:build privileged

package apply

import (
	"path/filepath"
	"testing"

	"k8s.io/utils/cpuset"

	lcpuset "latencytier.io/latencytier/agent/cpuset"
	"latencytier.io/latencytier/agent/internal/cgtest"
	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/privtest"
)

// A spec change that drops the cpusets (profile A confined a v1 slice tree,
// profile B has no cpus) must restore the orphans the way Revert does:
// newest first, parents widened before their children. Restoring in apply
// order widens a child under a still-narrow parent, which the kernel
// refuses. The test's own cgroups only: no shared kernel state.
func TestSpecChangeRestoresOrphansInReverseOrder(t *testing.T) {
	base := cgtest.V1Controller(t, "cpuset")
	if all := testroot.Read(t, filepath.Join(base, lcpuset.CPUsFile)); !cpusetHas(all) {
		privtest.Missing(t, "need CPUs 0 and 1, have %s", all)
	}
	root := testroot.RealKernel(t)
	slice := "lttest-" + cgtest.RandHex(t, 4) + ".slice"
	child := filepath.Join(slice, "a.service")
	for _, rel := range []string{slice, child} {
		d := filepath.Join(base, rel)
		cgtest.Mkdir(t, d)
		cgtest.Set(t, filepath.Join(d, lcpuset.CPUsFile), "0-1")
		cgtest.Set(t, filepath.Join(d, "cpuset.mems"), "0")
	}
	knobs, _, err := lcpuset.Knobs(root, cpuset.New(0), lcpuset.WithSlices(slice))
	if err != nil || len(knobs) != 2 {
		t.Fatalf("knobs = %+v, %v", knobs, err)
	}
	e := engine(root)
	if _, err := e.Apply(Meta{Profile: "a"}, knobs); err != nil {
		t.Fatal(err)
	}
	for _, k := range knobs {
		if got := testroot.Read(t, k.Path); got != "0" {
			t.Fatalf("%s = %s after apply; want 0", k.ID, got)
		}
	}
	rep, err := e.Apply(Meta{Profile: "b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Restored {
		if r.State != v1alpha1.SettingReverted {
			t.Errorf("restoring %s on the spec change: %s %s", r.Setting, r.State, r.Message)
		}
	}
	for _, k := range knobs {
		if got := testroot.Read(t, k.Path); got != "0-1" {
			t.Errorf("%s = %s after the spec change; want the original 0-1", k.ID, got)
		}
	}
}

func cpusetHas(list string) bool {
	s, err := cpuset.Parse(list)
	return err == nil && s.Contains(0) && s.Contains(1)
}
