package access

import (
	"testing"

	"latencytier.io/latencytier/agent/bootargs"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/knob"
	"latencytier.io/latencytier/agent/rtsched"
	"latencytier.io/latencytier/agent/systemd"
)

// Journals on nodes name the kinds: a row renamed or dropped would leave
// their entries unreachable.
func TestKindNamesAreStable(t *testing.T) {
	want := []string{"file", "systemd", "thread", "bootargs", "cpuset", "irqbalance", "irqbalance-env", "schedext"}
	if len(All) != len(want) {
		t.Fatalf("%d kinds, want %v", len(All), want)
	}
	for i, a := range All {
		if a.Name != want[i] || a.Read == nil || a.Write == nil {
			t.Errorf("row %d: %q (read %v, write %v), want %q with both", i, a.Name, a.Read != nil, a.Write != nil, want[i])
		}
		if got, err := Named(a.Name); err != nil || got != a {
			t.Errorf("Named(%q) = %v, %v", a.Name, got, err)
		}
	}
	if _, err := Named("newer"); err == nil {
		t.Error("a kind this agent does not know resolved")
	}
}

// An entry written before entries recorded their kind gets the kind its
// path claims; one that records a kind keeps it.
func TestEntriesWithoutKind(t *testing.T) {
	j := journal.New("boot")
	for _, en := range []journal.Entry{
		{ID: "a", Path: "proc/sys/kernel/sched_autogroup_enabled"},
		{ID: "b", Path: systemd.Path("system.slice")},
		{ID: "c", Path: "sched:4242@12345"},
		{ID: "d", Path: bootargs.GRUBPath("trading")},
		{ID: "e", Kind: "file", Path: "sched:odd-file-name"},
	} {
		j.Add(en)
	}
	Migrate(j)
	want := map[string]*knob.Access{"a": knob.File, "b": systemd.Access, "c": rtsched.Access, "d": bootargs.Access, "e": knob.File}
	for _, en := range j.Entries {
		got, err := Entry(en)
		if err != nil || got != want[en.ID] || en.Kind != got.Name {
			t.Errorf("%s (%s): kind %q, access %v, %v; want %q", en.ID, en.Path, en.Kind, got, err, want[en.ID].Name)
		}
	}
}
