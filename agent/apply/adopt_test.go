package apply

import (
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// An adopted entry is the agent's own write: a spec that does not want it
// restores its original where the kernel still holds the adopted value, and
// leaves a value someone else wrote since.
func TestAdoptedIsRestoredWhereStillOurs(t *testing.T) {
	root := testroot.New(t, map[string]string{"proc/sys/a": "9\n", "proc/sys/b": "7\n"})
	e := engine(root)
	for _, en := range []journal.Entry{
		{ID: "k/a", Kind: knob.File.Name, Path: root.Proc("sys", "a"), Original: "1", Written: []string{"9"}},
		{ID: "k/b", Kind: knob.File.Name, Path: root.Proc("sys", "b"), Original: "5", Written: []string{"6"}},
	} {
		if err := e.Adopt(en); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := e.Apply(Meta{Profile: "p"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := state(t, rep.Restored, "k/a"); r.State != v1alpha1.SettingReverted {
		t.Errorf("k/a: %s %s, want Reverted", r.State, r.Message)
	}
	if r := state(t, rep.Restored, "k/b"); r.State != v1alpha1.SettingConflict {
		t.Errorf("k/b: %s %s, want Conflict (someone else wrote 7)", r.State, r.Message)
	}
	if a, b := testroot.Read(t, root.Proc("sys", "a")), testroot.Read(t, root.Proc("sys", "b")); a != "1" || b != "7" {
		t.Errorf("a=%s b=%s, want 1 (restored) and 7 (theirs)", a, b)
	}
}

// A pass that wants the adopted value keeps the adopted original: found at
// its desired value, it is not journaled as its own original.
func TestAdoptedOriginalOutlivesSettledPass(t *testing.T) {
	root := testroot.New(t, map[string]string{"proc/sys/a": "9\n"})
	e := engine(root)
	if err := e.Adopt(journal.Entry{ID: "k/a", Kind: knob.File.Name, Path: root.Proc("sys", "a"), Original: "1", Written: []string{"9"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Apply(Meta{Profile: "p"}, []knob.Knob{{ID: "k/a", Path: root.Proc("sys", "a"), Desired: "9"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if got := testroot.Read(t, root.Proc("sys", "a")); got != "1" {
		t.Errorf("a = %s after revert, want the adopted original 1", got)
	}
}

func TestAdoptRefusesIncompleteEntries(t *testing.T) {
	root := testroot.New(t, map[string]string{"proc/sys/a": "9\n"})
	for _, en := range []journal.Entry{
		{ID: "k/a", Kind: "nonesuch", Path: "x", Original: "1", Written: []string{"9"}},
		{ID: "k/a", Kind: knob.File.Name, Path: root.Proc("sys", "a"), Original: "1"},
		{Kind: knob.File.Name, Path: root.Proc("sys", "a"), Original: "1", Written: []string{"9"}},
	} {
		if err := engine(root).Adopt(en); err == nil {
			t.Errorf("Adopt(%+v) took it", en)
		}
	}
}
