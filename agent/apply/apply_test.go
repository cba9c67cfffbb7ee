package apply

import (
	"errors"
	"os"
	"testing"

	"github.com/go-logr/logr"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func engine(root *host.Root) *Engine { return &Engine{Root: root, Log: logr.Discard()} }

func fakeKnobs(root *host.Root) []knob.Knob {
	return []knob.Knob{
		{ID: "k/a", Path: root.Proc("sys", "a"), Desired: "0"},
		{ID: "k/b", Path: root.Proc("sys", "b"), Desired: "5"},
	}
}

func fakeRoot(t *testing.T) *host.Root {
	return testroot.New(t, map[string]string{"proc/sys/a": "1\n", "proc/sys/b": "5\n"})
}

func state(t *testing.T, rs []v1alpha1.SettingResult, id string) v1alpha1.SettingResult {
	t.Helper()
	for _, r := range rs {
		if r.Setting == id {
			return r
		}
	}
	t.Fatalf("no result for %s in %+v", id, rs)
	return v1alpha1.SettingResult{}
}

func TestApplyThenRevertRestoresOriginals(t *testing.T) {
	root := fakeRoot(t)
	e := engine(root)
	rep, err := e.Apply(Meta{Profile: "p"}, fakeKnobs(root))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Written != 1 || state(t, rep.Results, "k/a").State != v1alpha1.SettingApplied || state(t, rep.Results, "k/b").State != v1alpha1.SettingApplied {
		t.Fatalf("apply = %+v", rep)
	}
	if got := testroot.Read(t, root.Proc("sys", "a")); got != "0" {
		t.Fatalf("a = %q after apply", got)
	}
	// A second pass is a no-op.
	if rep, _ := e.Apply(Meta{Profile: "p"}, fakeKnobs(root)); rep.Written != 0 || len(rep.Drifts) != 0 {
		t.Fatalf("second apply = %+v", rep)
	}
	rep, err = e.Revert()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Written != 1 {
		t.Errorf("revert wrote %d values, want 1 (b was never changed)", rep.Written)
	}
	if got := testroot.Read(t, root.Proc("sys", "a")); got != "1" {
		t.Fatalf("a = %q after revert, want 1", got)
	}
	if got := testroot.Read(t, root.Proc("sys", "b")); got != "5" {
		t.Fatalf("b = %q after revert, want 5", got)
	}
	if _, err := os.Stat(journal.Path(root)); !os.IsNotExist(err) {
		t.Fatalf("journal not cleared after a complete revert: %v", err)
	}
}

func TestDriftIsReportedAndReasserted(t *testing.T) {
	root := fakeRoot(t)
	e := engine(root)
	if _, err := e.Apply(Meta{}, fakeKnobs(root)); err != nil {
		t.Fatal(err)
	}
	testroot.Write(t, root.Proc("sys", "a"), "7")
	testroot.Write(t, root.Proc("sys", "b"), "8") // b was already 5 before: still drift
	rep, err := e.Apply(Meta{}, fakeKnobs(root))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Drifts) != 2 || rep.Drifts[0].ID != "k/a" || rep.Drifts[0].Theirs != "7" || rep.Drifts[0].Ours != "0" {
		t.Fatalf("drifts = %+v", rep.Drifts)
	}
	if testroot.Read(t, root.Proc("sys", "a")) != "0" || testroot.Read(t, root.Proc("sys", "b")) != "5" {
		t.Fatal("drift not re-asserted")
	}
	// Revert still restores the first original, not the drifted value.
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if got := testroot.Read(t, root.Proc("sys", "a")); got != "1" {
		t.Fatalf("a = %q after revert, want the original 1", got)
	}
}

func TestSpecChangeRestoresWhatItNoLongerWants(t *testing.T) {
	root := fakeRoot(t)
	e := engine(root)
	if _, err := e.Apply(Meta{Profile: "one"}, fakeKnobs(root)); err != nil {
		t.Fatal(err)
	}
	only := []knob.Knob{{ID: "k/b", Path: root.Proc("sys", "b"), Desired: "6"}}
	rep, err := e.Apply(Meta{Profile: "two"}, only)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Restored) != 1 || rep.Restored[0].Setting != "k/a" || rep.Restored[0].State != v1alpha1.SettingReverted {
		t.Fatalf("restored = %+v", rep.Restored)
	}
	if testroot.Read(t, root.Proc("sys", "a")) != "1" || testroot.Read(t, root.Proc("sys", "b")) != "6" {
		t.Fatal("spec change not carried out")
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if got := testroot.Read(t, root.Proc("sys", "b")); got != "5" {
		t.Fatalf("b = %q after revert, want 5", got)
	}
}

// A dry run (agent plan) never moves a corrupt journal: it reports it and
// leaves it for apply or revert, which hold the lock.
func TestPreviewLeavesACorruptJournalInPlace(t *testing.T) {
	root := fakeRoot(t)
	testroot.Write(t, journal.Path(root), "{not json")
	if _, err := engine(root).Preview(fakeKnobs(root)); !errors.Is(err, ErrJournalCorrupt) {
		t.Fatalf("Preview err = %v, want ErrJournalCorrupt", err)
	}
	if testroot.Read(t, journal.Path(root)) != "{not json" {
		t.Fatal("corrupt journal was not left in place")
	}
}

// After a reboot the kernel is back at boot values: the old journal's
// originals are stale, so they are re-read instead of written back.
func TestJournalOfEarlierBootIsNotRestored(t *testing.T) {
	root := fakeRoot(t)
	e := engine(root)
	if _, err := e.Apply(Meta{}, fakeKnobs(root)); err != nil {
		t.Fatal(err)
	}
	// "Reboot": new boot id, and the kernel boots with a = 3.
	testroot.Write(t, root.Proc("sys", "kernel", "random", "boot_id"), "99999999-0000-0000-0000-000000000000")
	testroot.Write(t, root.Proc("sys", "a"), "3")
	rep, err := e.Apply(Meta{}, fakeKnobs(root))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Notes) == 0 || len(rep.Drifts) != 0 {
		t.Fatalf("report = %+v, want a discarded-journal note and no drift", rep)
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if got := testroot.Read(t, root.Proc("sys", "a")); got != "3" {
		t.Fatalf("a = %q after revert, want this boot's original 3", got)
	}
}

func TestRevertConflictLeavesTheirValue(t *testing.T) {
	root := fakeRoot(t)
	e := engine(root)
	if _, err := e.Apply(Meta{}, fakeKnobs(root)); err != nil {
		t.Fatal(err)
	}
	testroot.Write(t, root.Proc("sys", "a"), "42")
	rep, err := e.Revert()
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Conflicts()
	if len(c) != 1 || c[0].Setting != "k/a" || c[0].Actual != "42" {
		t.Fatalf("conflicts = %+v", c)
	}
	if got := testroot.Read(t, root.Proc("sys", "a")); got != "42" {
		t.Fatalf("a = %q, want their 42 left in place", got)
	}
}

func TestUnsupportedAndInvalidWrites(t *testing.T) {
	root := fakeRoot(t)
	e := engine(root)
	knobs := []knob.Knob{{ID: "k/missing", Path: root.Proc("sys", "missing"), Desired: "1"}}
	rep, err := e.Apply(Meta{}, knobs)
	if err != nil {
		t.Fatal(err)
	}
	if s := state(t, rep.Results, "k/missing"); s.State != v1alpha1.SettingUnsupported {
		t.Fatalf("missing knob = %+v", s)
	}
}

// Files whose read format differs from their write format (cgroup v2
// cgroup.subtree_control) journal the knob's Restore value as the original.
func TestRestoreFormIsJournaled(t *testing.T) {
	root := testroot.New(t, map[string]string{"sys/fs/cgroup/cgroup.subtree_control": "cpu memory"})
	path := root.Cgroup("cgroup.subtree_control")
	k := knob.Knob{ID: "cpuset/subtree", Path: path, Desired: "+cpuset",
		Equal:   func(a, w string) bool { return a == w || a == "cpu cpuset memory" },
		Restore: func(read string) string { return "-cpuset" }}
	e := engine(root)
	if _, err := e.Apply(Meta{}, []knob.Knob{k}); err != nil {
		t.Fatal(err)
	}
	j, err := journal.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if en := j.Find("cpuset/subtree"); en == nil || en.Original != "-cpuset" || en.Read() != "cpu memory" {
		t.Fatalf("entry = %+v, want original -cpuset read as %q", en, "cpu memory")
	}
	if _, err := e.Revert(); err != nil {
		t.Fatal(err)
	}
	if got := testroot.Read(t, path); got != "-cpuset" {
		t.Fatalf("revert wrote %q, want -cpuset", got)
	}
}

// The journal records paths relative to the host root: the DaemonSet agent
// (root /host) and the CLI on the node (root /) revert each other's work.
func TestJournalIsPortableAcrossRoots(t *testing.T) {
	root := fakeRoot(t)
	if _, err := engine(root).Apply(Meta{}, fakeKnobs(root)); err != nil {
		t.Fatal(err)
	}
	moved := host.New(root.Dir() + "-seen-from-elsewhere")
	if err := os.Rename(root.Dir(), moved.Dir()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(moved.Dir()) })
	if _, err := engine(moved).Revert(); err != nil {
		t.Fatal(err)
	}
	if got := testroot.Read(t, moved.Proc("sys", "a")); got != "1" {
		t.Fatalf("a = %q after a revert from another root, want 1", got)
	}
}

// A journal of an earlier boot is discarded once, not on every pass: a pass
// that has nothing to journal removes it, so the next pass is quiet and the
// host keeps no stale journal.
func TestJournalOfEarlierBootIsDiscardedOnce(t *testing.T) {
	root := fakeRoot(t)
	e := engine(root)
	if _, err := e.Apply(Meta{}, fakeKnobs(root)); err != nil {
		t.Fatal(err)
	}
	testroot.Write(t, root.Proc("sys", "kernel", "random", "boot_id"), "99999999-0000-0000-0000-000000000000")
	for pass := 1; pass <= 2; pass++ {
		rep, err := e.Apply(Meta{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[int]int{1: 1, 2: 0}[pass]; len(rep.Notes) != want {
			t.Fatalf("pass %d notes = %q, want %d", pass, rep.Notes, want)
		}
	}
	if _, err := os.Stat(journal.Path(root)); !os.IsNotExist(err) {
		t.Fatalf("stale journal left on the host: %v", err)
	}
}
