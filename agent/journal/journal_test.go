package journal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	root := testroot.New(t, nil)
	j := New("boot-1")
	j.Profile = "gateway"
	j.Record("sysctl/a", "/x/a", "1", "1", "0")
	j.Record("sysctl/a", "/x/a", "ignored-original", "ignored-original", "5")
	j.Record("irq/24", "/x/24", "0-1", "0-1", "0")
	if err := Save(root, j); err != nil {
		t.Fatal(err)
	}
	got, err := Load(root)
	if err != nil {
		t.Fatal(err)
	}
	a := got.Find("sysctl/a")
	if a == nil || a.Original != "1" || len(a.Written) != 2 || a.Written[1] != "5" {
		t.Fatalf("entry a = %+v, want original 1 written [0 5]", a)
	}
	if got.Entries[1].ID != "irq/24" || got.BootID != "boot-1" || got.Profile != "gateway" {
		t.Fatalf("journal = %+v", got)
	}
	// No temp file is left next to the journal.
	left, _ := filepath.Glob(filepath.Join(root.StateDir(), FileName+".tmp-*"))
	if len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}
	if st, _ := os.Stat(root.StateDir()); st.Mode().Perm() != 0o700 {
		t.Errorf("state dir mode = %v, want 0700", st.Mode().Perm())
	}
}

func TestLoadMissingIsNil(t *testing.T) {
	j, err := Load(testroot.New(t, nil))
	if j != nil || err != nil {
		t.Fatalf("Load = %v, %v; want nil, nil", j, err)
	}
}

func TestCorruptJournalIsReportedAndLeftInPlace(t *testing.T) {
	for name, content := range map[string]string{
		"truncated":     `{"version":1,"bootID":"b","entries":[{"id":"a","pa`,
		"wrong version": `{"version":9,"bootID":"b","entries":[]}`,
		"no boot id":    `{"version":1,"entries":[]}`,
		"duplicate":     `{"version":1,"bootID":"b","entries":[{"id":"a","path":"/a","original":"1"},{"id":"a","path":"/a","original":"2"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			root := testroot.New(t, nil)
			testroot.Write(t, Path(root), content)
			_, err := Load(root)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Load err = %v, want ErrCorrupt", err)
			}
			if got, _ := os.ReadFile(Path(root)); string(got) != content {
				t.Fatalf("corrupt journal was changed: %q", got)
			}
		})
	}
}

// A crash during Save leaves either the old or the new journal, never a
// torn one: the new content goes to a temp file that is renamed over.
func TestSaveIsAtomicOverExisting(t *testing.T) {
	root := testroot.New(t, nil)
	old := New("b")
	old.Record("a", "/a", "1", "1", "0")
	if err := Save(root, old); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(Path(root))
	next := New("b")
	next.Record("a", "/a", "1", "1", "0")
	next.Record("b", "/b", "2", "2", "3")
	if err := Save(root, next); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(Path(root))
	if os.SameFile(before, after) {
		t.Fatal("journal was rewritten in place, want a new inode renamed over it")
	}
	got, err := Load(root)
	if err != nil || len(got.Entries) != 2 {
		t.Fatalf("Load = %+v, %v", got, err)
	}
}

func TestBootIDOnThisKernel(t *testing.T) {
	root := testroot.New(t, nil)
	if id, err := BootID(root); err != nil || id != "11111111-2222-3333-4444-555555555555" {
		t.Fatalf("BootID = %q, %v", id, err)
	}
}

func TestRemove(t *testing.T) {
	root := testroot.New(t, nil)
	if err := Remove(root); err != nil {
		t.Fatalf("Remove without journal: %v", err)
	}
	if err := Save(root, New("b")); err != nil {
		t.Fatal(err)
	}
	if err := Remove(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(Path(root)); !os.IsNotExist(err) {
		t.Fatalf("journal still there: %v", err)
	}
}

// A crash between CreateTemp and Rename leaves a journal.json.tmp-* file;
// the next Save (or the Remove after a full revert) clears it, so crashes do
// not pile files up in the state directory.
func TestLeftoverTempFilesAreCleared(t *testing.T) {
	root := testroot.New(t, nil)
	leftovers := func() []string {
		left, _ := filepath.Glob(filepath.Join(root.StateDir(), FileName+".tmp-*"))
		return left
	}
	testroot.Write(t, filepath.Join(root.StateDir(), FileName+".tmp-123"), `{"version":1,"bo`)
	testroot.Write(t, filepath.Join(root.StateDir(), FileName+".tmp-456"), ``)
	other := filepath.Join(root.StateDir(), "notes.txt")
	testroot.Write(t, other, "keep")
	if err := Save(root, New("b")); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(); len(left) != 0 {
		t.Fatalf("Save left %v", left)
	}
	testroot.Write(t, filepath.Join(root.StateDir(), FileName+".tmp-789"), `{}`)
	if err := Remove(root); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(); len(left) != 0 {
		t.Fatalf("Remove left %v", left)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("a file that is not a journal temp file was removed: %v", err)
	}
}

// The lookup index stays right when callers append to Entries directly (the
// engine does) and when entries are dropped from the middle.
func TestFindIndexFollowsEntries(t *testing.T) {
	j := New("b")
	for _, id := range []string{"a", "b", "c", "d"} {
		j.Record(id, "/"+id, "1", "1", "0")
	}
	j.Entries = append(j.Entries, Entry{ID: "e", Path: "/e", Original: "1"})
	j.Drop("b")
	j.Drop("nope")
	for _, id := range []string{"a", "c", "d", "e"} {
		if en := j.Find(id); en == nil || en.ID != id || en.Path != "/"+id {
			t.Fatalf("Find(%s) = %+v", id, en)
		}
	}
	if j.Find("b") != nil || len(j.Entries) != 4 {
		t.Fatalf("after Drop(b): %+v", j.Entries)
	}
	j.Entries[0].ID = "z" // edited in place
	if j.Find("a") != nil || j.Find("z") == nil {
		t.Fatalf("in-place edit not seen: %+v", j.Entries)
	}
}
