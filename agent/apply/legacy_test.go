package apply

import (
	"os"
	"testing"

	"latencytier.io/latencytier/agent/bootargs"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// testdata/journal-v1-no-kind.json was written by the agent before journal
// entries recorded their kind (commit fa44425): a file entry written by the
// agent, one found settled, and staged GRUB arguments, told apart only by
// their paths. An agent upgraded on that node reads it: kinds come from the
// paths, every entry is restored through its own Access, and after a
// reboot the staged arguments still outlive the boot.
func TestRevertsAJournalWrittenBeforeKinds(t *testing.T) {
	fixture, err := os.ReadFile("testdata/journal-v1-no-kind.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		boot     string
		restored []string
	}{
		{"same boot", "11111111-0000-0000-0000-000000000000", []string{bootargs.SettingGRUB, "k/a", "k/b"}},
		{"after a reboot", "22222222-0000-0000-0000-000000000000", []string{bootargs.SettingGRUB}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, u, e, baseline := grubHost(t)
			newBoot(t, root, "11111111-0000-0000-0000-000000000000")
			if _, err := e.Apply(Meta{Profile: "trading"}, append(fakeKnobsOn(t, root), grubKnob())); err != nil {
				t.Fatal(err)
			}
			// The node as the old agent left it.
			testroot.Write(t, journal.Path(root), string(fixture))
			if newBoot(t, root, tc.boot); len(tc.restored) == 1 {
				testroot.Write(t, root.Proc("sys", "a"), "1\n") // the reboot restored the kernel's value
			}
			rep, err := e.Revert()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rep.Results {
				got = append(got, r.Setting)
				if r.State != v1alpha1.SettingReverted {
					t.Errorf("%s: %s %q", r.Setting, r.State, r.Message)
				}
			}
			if len(got) != len(tc.restored) {
				t.Fatalf("restored %v, want %v", got, tc.restored)
			}
			if v := testroot.Read(t, root.Proc("sys", "a")); v != "1" {
				t.Errorf("k/a = %s after revert, want its original 1", v)
			}
			if cfg := testroot.Read(t, root.Path(bootargs.GRUBCfg)); cfg != baseline || root.Exists(root.Path(bootargs.DropIn)) {
				t.Errorf("grub.cfg not back to the baseline or drop-in left (update-grub ran %d times):\n%s", u.Count(), cfg)
			}
			if root.Exists(journal.Path(root)) {
				t.Error("journal left after a complete revert")
			}
		})
	}
}

// A journal entry now says which kind it is, so a revert reaches it without
// guessing from its path.
func TestJournalRecordsKinds(t *testing.T) {
	root, _, e, _ := grubHost(t)
	if _, err := e.Apply(Meta{Profile: "trading"}, append(fakeKnobsOn(t, root), grubKnob())); err != nil {
		t.Fatal(err)
	}
	j, err := journal.Load(root)
	if err != nil || j == nil {
		t.Fatal(j, err)
	}
	want := map[string]string{"k/a": "file", "k/b": "file", bootargs.SettingGRUB: "bootargs"}
	for _, en := range j.Entries {
		if en.Kind != want[en.ID] {
			t.Errorf("%s journaled as kind %q, want %q", en.ID, en.Kind, want[en.ID])
		}
	}
}
