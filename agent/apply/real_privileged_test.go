//go:build privileged

package apply

import (
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/kernellock"
)

// Real kernel: autogroup and rt_runtime through the engine, and a revert
// conflict when someone else changes the value in between.
func TestRealSchedSysctls(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	before := testroot.Snapshot(t)
	ag := root.Proc("sys", "kernel", "sched_autogroup_enabled")
	rt := root.Proc("sys", "kernel", "sched_rt_runtime_us")
	testroot.Restore(t, ag)
	testroot.Restore(t, rt)
	origAG, origRT := testroot.Read(t, ag), testroot.Read(t, rt)
	flip := map[string]string{"0": "1", "1": "0"}[origAG]
	knobs := []knob.Knob{
		{ID: "scheduler/autogroup", Path: ag, Desired: flip},
		{ID: "scheduler/rtRuntime", Path: rt, Desired: "-1"},
	}
	e := engine(root)
	rep, err := e.Apply(Meta{Profile: "t"}, knobs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Results {
		if r.State != v1alpha1.SettingApplied {
			t.Fatalf("result %+v", r)
		}
	}
	if testroot.Read(t, ag) != flip || testroot.Read(t, rt) != "-1" {
		t.Fatal("kernel does not hold the applied values")
	}
	// Invalid value: the kernel's EINVAL comes back as Invalid.
	bad := []knob.Knob{knobs[0], knobs[1], {ID: "scheduler/bad", Path: rt, Desired: "2000000"}}
	rep, err = e.Apply(Meta{Profile: "t"}, bad[2:])
	if err != nil {
		t.Fatal(err)
	}
	if s := state(t, rep.Results, "scheduler/bad"); s.State != v1alpha1.SettingInvalid {
		t.Fatalf("rt_runtime above period = %+v, want Invalid", s)
	}
	// That pass dropped autogroup and rtRuntime from the spec: restored.
	if testroot.Read(t, ag) != origAG || testroot.Read(t, rt) != origRT {
		t.Fatal("orphaned knobs not restored")
	}
	if _, err := e.Apply(Meta{Profile: "t"}, knobs); err != nil {
		t.Fatal(err)
	}
	// Someone else sets rt_runtime after us: revert leaves it, reports it.
	if err := root.WriteString(rt, "990000"); err != nil {
		t.Fatal(err)
	}
	rep, err = e.Revert()
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Conflicts(); len(c) != 1 || c[0].Setting != "scheduler/rtRuntime" || c[0].Actual != "990000" {
		t.Fatalf("conflicts = %+v", rep.Conflicts())
	}
	if testroot.Read(t, rt) != "990000" {
		t.Fatal("revert clobbered someone else's rt_runtime")
	}
	if testroot.Read(t, ag) != origAG {
		t.Fatalf("autogroup = %s after revert, want %s", testroot.Read(t, ag), origAG)
	}
	if err := root.WriteString(rt, origRT); err != nil {
		t.Fatal(err)
	}
	if d := testroot.Diff(before, testroot.Snapshot(t)); len(d) != 0 {
		t.Fatalf("kernel differs after revert: %v", d)
	}
}
