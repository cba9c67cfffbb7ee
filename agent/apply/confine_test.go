package apply

import (
	"path/filepath"
	"testing"

	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
)

// A journal entry whose path climbs out of the host root ("..", or an
// absolute path elsewhere, as an edited or foreign journal may hold) is
// restored under the root, never outside it.
func TestRevertStaysUnderTheRoot(t *testing.T) {
	root := fakeRoot(t)
	outside := filepath.Join(t.TempDir(), "target")
	testroot.Write(t, outside, "ours\n")
	rel, err := filepath.Rel(root.Dir(), outside)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{rel, outside} {
		j := journal.New(testroot.Read(t, root.Proc("sys", "kernel", "random", "boot_id")))
		j.Record("k/escape", path, "orig", "orig", "ours")
		if err := journal.Save(root, j); err != nil {
			t.Fatal(err)
		}
		if _, err := engine(root).Revert(); err != nil {
			t.Fatal(err)
		}
		if got := testroot.Read(t, outside); got != "ours" {
			t.Fatalf("journal path %q: revert wrote %q outside the root", path, got)
		}
	}
}
