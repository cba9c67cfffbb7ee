package apply

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
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

// A thread's scheduling policy is never given up: a real-time policy left
// behind keeps a tenant's thread at a priority no profile grants any more.
// Its restore is retried and reported Failed, the entry stays journaled and
// counted in HeldThreads, for as long as it fails (here: the temp-dir /proc
// is not the agent's pid namespace); once the thread is gone (its tid no
// longer lists) the entry is done and the journal goes.
func TestRevertNeverGivesUpOnAThreadPolicy(t *testing.T) {
	root := testroot.New(t, map[string]string{"proc/sys/a": "1\n"})
	boot, err := journal.BootID(root)
	if err != nil {
		t.Fatal(err)
	}
	const id = "rtsched/tenant/spin/u1/123@456"
	j := journal.New(boot)
	j.Entries = []journal.Entry{{ID: id, Path: "sched:123@456", Original: "other:0", Written: []string{"fifo:40"}, Verified: "fifo:40"}}
	if err := journal.Save(root, j); err != nil {
		t.Fatal(err)
	}
	e := engine(root)
	for pass := 1; pass <= MaxRestoreAttempts+2; pass++ {
		rep, err := e.Revert()
		if err != nil {
			t.Fatal(err)
		}
		if r := state(t, rep.Results, id); r.State != v1alpha1.SettingFailed {
			t.Fatalf("pass %d: %+v, want Failed (retrying)", pass, r)
		}
		if rep.HeldThreads != 1 {
			t.Fatalf("pass %d: HeldThreads %d, want 1", pass, rep.HeldThreads)
		}
		if j, _ := journal.Load(root); j == nil || j.Find(id) == nil {
			t.Fatalf("pass %d: the thread's entry left the journal while its restore fails", pass)
		}
	}
	testroot.Write(t, root.Proc("self", "status"), fmt.Sprintf("Name:\tagent\nNSpid:\t%d\n", os.Getpid()))
	rep, err := e.Revert()
	if err != nil {
		t.Fatal(err)
	}
	if r := state(t, rep.Results, id); r.State != v1alpha1.SettingReverted || !strings.Contains(r.Message, "gone") || rep.HeldThreads != 0 {
		t.Fatalf("thread gone: %+v, held %d; want it done", r, rep.HeldThreads)
	}
	if _, err := os.Stat(journal.Path(root)); !os.IsNotExist(err) {
		t.Fatalf("journal kept after the thread was gone: %v", err)
	}
}
