package apply

import (
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// ownerOf owns the knobs named in ids, as agent/owners would.
func ownerOf(ids ...string) func(knob.Knob) (v1alpha1.SettingResult, bool) {
	return func(k knob.Knob) (v1alpha1.SettingResult, bool) {
		for _, id := range ids {
			if k.ID == id {
				return v1alpha1.SettingResult{Owner: "dra-driver-cpu (pid 1)", Message: "theirs"}, true
			}
		}
		return v1alpha1.SettingResult{}, false
	}
}

// A setting another writer owns is reported OwnedBy and never written: not
// applied, not re-asserted when it changes, not restored when it becomes
// owned after the agent wrote it, and not journaled.
func TestOwnedSettingsAreNeverWritten(t *testing.T) {
	root := testroot.New(t, map[string]string{"proc/sys/a": "1\n", "proc/sys/b": "1\n"})
	a, b := root.Proc("sys", "a"), root.Proc("sys", "b")
	knobs := []knob.Knob{{ID: "k/a", Path: a, Desired: "0"}, {ID: "k/b", Path: b, Desired: "0"}}
	e := engine(root)
	rep, err := e.Apply(Meta{Profile: "p", Owner: ownerOf("k/a")}, knobs)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Written != 1 || testroot.Read(t, a) != "1" || testroot.Read(t, b) != "0" {
		t.Fatalf("written %d, a=%s b=%s; want only b written", rep.Written, testroot.Read(t, a), testroot.Read(t, b))
	}
	r := state(t, rep.Results, "k/a")
	if r.State != v1alpha1.SettingOwnedBy || r.Owner != "dra-driver-cpu (pid 1)" || r.Desired != "0" {
		t.Fatalf("k/a = %+v; want OwnedBy naming the owner", r)
	}
	if rep.Results[0].Setting != "k/a" {
		t.Fatalf("results %+v; want knob order", rep.Results)
	}
	j, err := journal.Load(root)
	if err != nil || j.Find("k/a") != nil {
		t.Fatalf("journal %+v (%v); want no entry for the owned setting", j, err)
	}

	// b becomes owned after the agent wrote it, and its owner changes it:
	// no restore, no re-assert, no drift, no Held.
	testroot.Write(t, b, "7")
	rep, err = e.Apply(Meta{Profile: "p", Owner: ownerOf("k/a", "k/b")}, knobs)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Written != 0 || len(rep.Drifts) != 0 || len(rep.Restored) != 0 || len(rep.Held) != 0 || testroot.Read(t, b) != "7" {
		t.Fatalf("report %+v, b=%s; want nothing written, restored or held", rep, testroot.Read(t, b))
	}
	if s := state(t, rep.Results, "k/b").State; s != v1alpha1.SettingOwnedBy {
		t.Fatalf("k/b = %s; want OwnedBy", s)
	}
}
