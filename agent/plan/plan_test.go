package plan

import (
	"io/fs"
	"syscall"
	"testing"

	"latencytier.io/latencytier/agent/kerr"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

func TestMake(t *testing.T) {
	ag := knob.Knob{ID: "a", Path: "/a", Desired: "0"}
	cl := knob.Knob{ID: "c", Path: "/c", Desired: "0-1", Equal: func(a, w string) bool { return a == "0,1" || a == w }}
	cases := []struct {
		name     string
		knobs    []knob.Knob
		obs      map[string]Observed
		verified map[string]string
		changes  int
		drift    bool
		settled  v1alpha1.SettingState
	}{
		{name: "differs: change", knobs: []knob.Knob{ag}, obs: map[string]Observed{"a": {Value: "1"}}, changes: 1},
		{name: "equal: applied", knobs: []knob.Knob{ag}, obs: map[string]Observed{"a": {Value: "0"}}, settled: v1alpha1.SettingApplied},
		{name: "knob's Equal decides", knobs: []knob.Knob{cl}, obs: map[string]Observed{"c": {Value: "0,1"}}, settled: v1alpha1.SettingApplied},
		{name: "missing file: unsupported", knobs: []knob.Knob{ag},
			obs: map[string]Observed{"a": {Err: kerr.Classify("read", "/a", fs.ErrNotExist)}}, settled: v1alpha1.SettingUnsupported},
		{name: "EPERM on read: failed", knobs: []knob.Knob{ag},
			obs: map[string]Observed{"a": {Err: kerr.Classify("read", "/a", syscall.EPERM)}}, settled: v1alpha1.SettingFailed},
		{name: "verified before, differs now: drift", knobs: []knob.Knob{ag}, obs: map[string]Observed{"a": {Value: "1"}},
			verified: map[string]string{"a": "0"}, changes: 1, drift: true},
		{name: "verified an older desired: not drift", knobs: []knob.Knob{ag}, obs: map[string]Observed{"a": {Value: "1"}},
			verified: map[string]string{"a": "1"}, changes: 1},
		{name: "unobserved: failed", knobs: []knob.Knob{ag}, obs: map[string]Observed{}, settled: v1alpha1.SettingFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := Make(tc.knobs, tc.obs, tc.verified)
			if len(p.Changes) != tc.changes {
				t.Fatalf("changes = %d, want %d", len(p.Changes), tc.changes)
			}
			if tc.changes > 0 && p.Changes[0].Drift != tc.drift {
				t.Errorf("drift = %v, want %v", p.Changes[0].Drift, tc.drift)
			}
			if tc.settled != "" && (len(p.Settled) != 1 || p.Settled[0].State != tc.settled) {
				t.Errorf("settled = %+v, want one %s", p.Settled, tc.settled)
			}
		})
	}
}

func TestMakeKeepsKnobOrder(t *testing.T) {
	var knobs []knob.Knob
	obs := map[string]Observed{}
	for _, id := range []string{"z", "a", "m"} {
		knobs = append(knobs, knob.Knob{ID: id, Desired: "1"})
		obs[id] = Observed{Value: "0"}
	}
	p := Make(knobs, obs, nil)
	for i, want := range []string{"z", "a", "m"} {
		if p.Changes[i].Knob.ID != want {
			t.Fatalf("change %d = %s, want %s", i, p.Changes[i].Knob.ID, want)
		}
	}
}

func TestOrphans(t *testing.T) {
	got := Orphans([]string{"a", "b", "c"}, []knob.Knob{{ID: "b"}})
	if len(got) != 2 || got[0] != "a" || got[1] != "c" {
		t.Fatalf("Orphans = %v, want [a c]", got)
	}
}

func TestRevert(t *testing.T) {
	eq := func(a, b string) bool { return a == b }
	ours := func(v string) bool { return v == "0" || v == "5" }
	cases := []struct {
		current, original string
		want              revertAction
	}{
		{"1", "1", RevertNothing},
		{"0", "1", revertWrite},
		{"5", "1", revertWrite}, // an older value of ours (crash between journal and write of a new desired)
		{"7", "1", RevertConflict},
	}
	for _, tc := range cases {
		if got := Revert(tc.current, tc.original, ours, eq); got != tc.want {
			t.Errorf("Revert(%q, %q) = %v, want %v", tc.current, tc.original, got, tc.want)
		}
	}
}
