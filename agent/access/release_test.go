package access

import (
	"strings"
	"testing"

	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/tiersched"
)

func TestSameValue(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"1", "1", true},
		{" 4  5\n", "4 5", true},
		{"0-3", "0,1,2,3", true},
		{"0-3", "0-2", false},
		{"isolated", "isolated invalid (Cpu list in cpuset.cpus not exclusive)", true},
		{"isolated", "root", false},
		{"-1", "1", false},
		{"", "0", false},
		{"fifo", "other", false},
	} {
		if got := SameValue(tc.a, tc.b); got != tc.want {
			t.Errorf("SameValue(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// A complete revert clears the record of an ejection of the tier
// scheduler: the next profile asking for it is a new decision.
func TestReleaseClearsTheTierSchedulersExitMarker(t *testing.T) {
	root := host.New(t.TempDir())
	if err := root.WriteOwn(tiersched.ExitFile, []byte(`{"revision":"r1","reason":"runnable task stall"}`)); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, r := range Releasers {
		note, err := r.Release(root)
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		if note != "" {
			notes = append(notes, note)
		}
	}
	if ex, err := tiersched.ReadExit(root); err != nil || ex != nil {
		t.Errorf("marker after release: %+v, %v", ex, err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], `revision "r1"`) {
		t.Errorf("notes %q, want one naming the revision", notes)
	}
}
