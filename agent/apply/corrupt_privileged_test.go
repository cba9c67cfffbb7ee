//go:build privileged

package apply

import (
	"path/filepath"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/kernellock"
)

// Real kernel: the agent tuned autogroup and rt_runtime, then its journal
// got corrupted. The next apply moves the journal aside and goes on, but
// it must not take the tuned values it finds for originals: revert leaves
// them and says so (the admin restores by hand or reboots), while a setting
// first changed after the recovery is restored to its true original.
func TestCorruptJournalRecoversWithoutTakingTunedValuesForOriginals(t *testing.T) {
	kernellock.Lock(t)
	root := testroot.RealKernel(t)
	ag := root.Proc("sys", "kernel", "sched_autogroup_enabled")
	rt := root.Proc("sys", "kernel", "sched_rt_runtime_us")
	bw := root.Proc("sys", "kernel", "sched_cfs_bandwidth_slice_us")
	for _, p := range []string{ag, rt, bw} {
		testroot.Restore(t, p)
	}
	origAG, origBW := testroot.Read(t, ag), testroot.Read(t, bw)
	flip := map[string]string{"0": "1", "1": "0"}[origAG]
	knobs := []knob.Knob{
		{ID: "scheduler/autogroup", Path: ag, Desired: flip},
		{ID: "scheduler/rtRuntime", Path: rt, Desired: "-1"},
	}
	e := engine(root)
	if _, err := e.Apply(Meta{Profile: "t"}, knobs); err != nil {
		t.Fatal(err)
	}
	testroot.Write(t, journal.Path(root), garbage)

	// The spec gains the bandwidth slice, changed for the first time now.
	knobs = append(knobs, knob.Knob{ID: "scheduler/bandwidthSlice", Path: bw, Desired: map[bool]string{true: "6000", false: "4000"}[origBW == "4000"]})
	rep, err := e.Apply(Meta{Profile: "t"}, knobs)
	if err != nil {
		t.Fatalf("apply over a corrupt journal: %v", err)
	}
	aside := asideFiles(t, root.StateDir())
	if len(aside) != 1 || testroot.Read(t, aside[0]) != garbage {
		t.Fatalf("corrupt journal not moved aside intact: %v", aside)
	}
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], filepath.Base(aside[0])) {
		t.Fatalf("notes = %q, want one naming %s", rep.Notes, aside[0])
	}
	for _, r := range rep.Results {
		unknown := r.Setting != "scheduler/bandwidthSlice"
		if r.State != v1alpha1.SettingApplied || (r.Message == unknownOriginalMessage) != unknown {
			t.Fatalf("result %+v; want Applied, saying the original is unknown: %v", r, unknown)
		}
	}
	// A second pass and an agent restart keep the recovery in mind.
	if rep, err := engine(root).Apply(Meta{Profile: "t"}, knobs); err != nil || rep.Written != 0 || len(rep.Notes) != 0 {
		t.Fatalf("next apply = %+v, %v", rep, err)
	}

	rep, err = e.Revert()
	if err != nil {
		t.Fatal(err)
	}
	if testroot.Read(t, bw) != origBW {
		t.Errorf("bandwidth slice = %s after revert, want its original %s", testroot.Read(t, bw), origBW)
	}
	for _, id := range []string{"scheduler/autogroup", "scheduler/rtRuntime"} {
		if s := state(t, rep.Results, id); s.State != v1alpha1.SettingConflict || !strings.Contains(s.Message, "original unknown") {
			t.Errorf("%s = %+v, want a Conflict saying its original is unknown", id, s)
		}
	}
	if s := state(t, rep.Results, "scheduler/bandwidthSlice"); s.State != v1alpha1.SettingReverted {
		t.Errorf("bandwidthSlice = %+v", s)
	}
	// Until the reboot, the tuned values still in the kernel are not
	// taken for originals by a later apply either.
	rep, err = e.Apply(Meta{Profile: "t2"}, knobs[:1])
	if err != nil {
		t.Fatal(err)
	}
	if rep, _ = e.Revert(); state(t, rep.Results, "scheduler/autogroup").State != v1alpha1.SettingConflict {
		t.Fatalf("revert after a later apply = %+v", rep.Results)
	}
}
