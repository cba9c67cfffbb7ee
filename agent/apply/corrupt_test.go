package apply

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

const garbage = `{"version":1,"bootID":"x","entries":[{"id":"scheduler/autog`

func asideFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, journal.CorruptPrefix+"*"))
	return m
}

// Revert over a corrupt journal restores nothing it cannot know, says so as
// a Conflict naming the moved file, and completes (a deleted profile does
// not wait forever on a node).
func TestRevertOverCorruptJournal(t *testing.T) {
	root := fakeRoot(t)
	testroot.Write(t, journal.Path(root), garbage)
	rep, err := engine(root).Revert()
	if err != nil {
		t.Fatal(err)
	}
	aside := asideFiles(t, root.StateDir())
	if len(aside) != 1 {
		t.Fatalf("aside = %v", aside)
	}
	if s := state(t, rep.Results, "journal"); s.State != v1alpha1.SettingConflict || !strings.Contains(s.Message, filepath.Base(aside[0])) {
		t.Fatalf("journal result = %+v", s)
	}
	// b is already at its desired 5: possibly the agent's own value.
	rep, err = engine(root).Apply(Meta{}, fakeKnobs(root))
	if err != nil {
		t.Fatal(err)
	}
	rep, err = engine(root).Revert()
	if err != nil {
		t.Fatal(err)
	}
	if state(t, rep.Results, "k/a").State != v1alpha1.SettingReverted || testroot.Read(t, root.Proc("sys", "a")) != "1" ||
		state(t, rep.Results, "k/b").State != v1alpha1.SettingConflict {
		t.Fatalf("revert after recovery = %+v", rep.Results)
	}
}

// A corrupt journal last written before this boot began recorded values
// the reboot already undid: it is moved aside and the agent starts afresh,
// taking what it finds for originals.
func TestCorruptJournalOfAnEarlierBoot(t *testing.T) {
	btime := time.Now().Add(-time.Hour).Unix()
	root := testroot.New(t, map[string]string{"proc/sys/a": "1\n", "proc/sys/b": "5\n",
		"proc/stat": "cpu 1 2 3\nbtime " + strconv.FormatInt(btime, 10) + "\n"})
	testroot.Write(t, journal.Path(root), garbage)
	old := time.Unix(btime-600, 0)
	if err := os.Chtimes(journal.Path(root), old, old); err != nil {
		t.Fatal(err)
	}
	rep, err := engine(root).Apply(Meta{}, fakeKnobs(root))
	if err != nil || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "earlier boot") {
		t.Fatalf("apply = %+v, %v", rep, err)
	}
	j, err := journal.Load(root)
	if err != nil || j.RecoveredFrom != "" || j.Find("k/b").OriginalUnknown {
		t.Fatalf("journal = %+v, %v; want an ordinary one", j, err)
	}
	if len(asideFiles(t, root.StateDir())) != 1 {
		t.Fatal("corrupt journal not kept aside")
	}
}
