package apply

import (
	"os"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// A restore whose read keeps failing with something other than "gone"
// (here EISDIR; EPERM on a real node) is retried for MaxRestoreAttempts
// passes, then reported as a Conflict naming the original so the revert
// completes instead of waiting forever.
func TestRevertGivesUpOnPersistentReadFailure(t *testing.T) {
	root := fakeRoot(t)
	e := engine(root)
	if _, err := e.Apply(Meta{Profile: "p"}, []knob.Knob{{ID: "k/a", Path: root.Proc("sys", "a"), Desired: "0"}}); err != nil {
		t.Fatal(err)
	}
	a := root.Proc("sys", "a")
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(a, 0o755); err != nil {
		t.Fatal(err)
	}
	for pass := 1; pass < MaxRestoreAttempts; pass++ {
		rep, err := e.Revert()
		if err != nil {
			t.Fatal(err)
		}
		if r := state(t, rep.Results, "k/a"); r.State != v1alpha1.SettingFailed {
			t.Fatalf("pass %d: %+v, want Failed (retrying)", pass, r)
		}
		if j, _ := journal.Load(root); j == nil || j.Find("k/a") == nil {
			t.Fatalf("pass %d: entry left the journal before the attempts ran out", pass)
		}
	}
	rep, err := e.Revert()
	if err != nil {
		t.Fatal(err)
	}
	r := state(t, rep.Results, "k/a")
	if r.State != v1alpha1.SettingConflict || r.Desired != "1" || !strings.Contains(r.Message, "by hand") {
		t.Fatalf("after %d passes: %+v, want a Conflict naming original 1", MaxRestoreAttempts, r)
	}
	if _, err := os.Stat(journal.Path(root)); !os.IsNotExist(err) {
		t.Fatalf("journal kept after the last entry was given up: %v", err)
	}
}

// A failure that clears within the bound restores normally.
func TestRevertRetriesTransientReadFailure(t *testing.T) {
	root := fakeRoot(t)
	e := engine(root)
	if _, err := e.Apply(Meta{Profile: "p"}, []knob.Knob{{ID: "k/a", Path: root.Proc("sys", "a"), Desired: "0"}}); err != nil {
		t.Fatal(err)
	}
	a := root.Proc("sys", "a")
	os.Remove(a)
	if err := os.Mkdir(a, 0o755); err != nil {
		t.Fatal(err)
	}
	if rep, _ := e.Revert(); state(t, rep.Results, "k/a").State != v1alpha1.SettingFailed {
		t.Fatalf("first pass: %+v", rep.Results)
	}
	os.Remove(a)
	if err := os.WriteFile(a, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := e.Revert()
	if err != nil || state(t, rep.Results, "k/a").State != v1alpha1.SettingReverted || rep.Written != 1 {
		t.Fatalf("second pass: %+v %v", rep, err)
	}
}
