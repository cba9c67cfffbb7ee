package journal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
)

// plant makes name in the state directory a symlink to a file outside it
// holding content, and returns the target.
func plant(t *testing.T, dir, name, content string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "target")
	testroot.Write(t, target, content)
	if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	return target
}

// A symlinked owner.lock is refused and what it points at is left as it was
// (the agent used to follow it, truncate the target and write its pid in).
func TestOwnRefusesSymlinkedOwnerFile(t *testing.T) {
	root := testroot.New(t, nil)
	target := plant(t, root.StateDir(), ownerFileName, "precious\n")
	release, err := Own(root, ModeAgent)
	if err == nil {
		release()
		t.Fatal("Own followed a symlinked owner.lock")
	}
	if got := testroot.Read(t, target); got != "precious" {
		t.Fatalf("symlink target now holds %q", got)
	}
}

// A symlinked journal.json is refused on load (a journal names the files
// the agent writes back as root, so one from elsewhere must not be read),
// and a save replaces the link, never writes through it.
func TestJournalRefusesSymlinkedJournal(t *testing.T) {
	root := testroot.New(t, nil)
	forged := `{"version":1,"bootID":"b","entries":[{"id":"x","path":"/etc/shadow","original":"x"}]}`
	target := plant(t, root.StateDir(), FileName, forged)
	if j, err := Load(root); err == nil {
		t.Fatalf("Load followed a symlinked journal: %+v", j)
	}
	if err := Save(root, New("b")); err != nil {
		t.Fatal(err)
	}
	if got := testroot.Read(t, target); got != forged {
		t.Fatalf("symlink target now holds %q", got)
	}
	if st, err := os.Lstat(Path(root)); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("journal after save: %v, %v", st, err)
	}
}

// A state directory that group or others may write, or that is a symlink,
// is refused with an error naming it, and nothing is written there.
func TestStateDirRefusedUnlessPrivate(t *testing.T) {
	for name, setup := range map[string]func(t *testing.T, dir string){
		"group-writable": func(t *testing.T, dir string) { chmod(t, dir, 0o770) },
		"world-writable": func(t *testing.T, dir string) { chmod(t, dir, 0o757) },
		"symlink": func(t *testing.T, dir string) {
			elsewhere := t.TempDir()
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, dir); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			root := testroot.New(t, nil)
			dir := root.StateDir()
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			setup(t, dir)
			release, err := Own(root, ModeAgent)
			if err == nil {
				release()
				t.Fatal("Own accepted the state directory")
			}
			if !strings.Contains(err.Error(), dir) {
				t.Errorf("error %q does not name %s", err, dir)
			}
			if err := Save(root, New("b")); err == nil {
				t.Error("Save accepted the state directory")
			}
			if _, err := Load(root); err == nil {
				t.Error("Load accepted the state directory")
			}
			if _, err := os.Lstat(filepath.Join(dir, FileName)); !os.IsNotExist(err) {
				t.Errorf("journal written: %v", err)
			}
		})
	}
}

func chmod(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}
