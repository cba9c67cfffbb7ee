package planner

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// TestRecordOfReadsRevisionName: a reboot record names a revision as
// RevisionName wrote it, and RecordOf reads it back by the same format,
// names cut to fit included; a profile whose name the other's prefixes
// does not claim it.
func TestRecordOfReadsRevisionName(t *testing.T) {
	tuning := &v1alpha1.TuningSpec{}
	long := strings.Repeat("p", 253)
	for _, c := range []struct {
		wrote, reads string
		want         bool
	}{
		{"tk", "tk", true}, {"tk", "tk-next", false}, {"tk-next", "tk", false}, {long, long, true},
	} {
		rev := RevisionName(c.wrote, tuning)
		for _, r := range []string{rev, BackRevision(rev)} {
			if got := RecordOf(&v1alpha1.NodeRebootSpec{Revision: r}, c.reads); got != c.want {
				t.Errorf("RecordOf(%.20s…, %.20s…) = %v, want %v", r, c.reads, got, c.want)
			}
		}
		if len(rev) > 253 {
			t.Errorf("revision of %.20s… is %d characters, over 253", c.wrote, len(rev))
		}
	}
}

// TestStoreRevision: a tuning not stored yet is created as the newest; a
// tuning the profile went back to is renumbered the newest; the newest
// is left as it is.
func TestStoreRevision(t *testing.T) {
	stored := map[string]int64{"p-a": 1, "p-b": 2, "p-c": 3}
	for _, c := range []struct {
		name string
		want RevisionStep
	}{
		{"p-d", RevisionStep{Name: "p-d", Create: true, Number: 4}},
		{"p-a", RevisionStep{Name: "p-a", Renumber: true, Number: 4}},
		{"p-c", RevisionStep{Name: "p-c", Number: 3}},
	} {
		if got := StoreRevision(c.name, stored); got != c.want {
			t.Errorf("StoreRevision(%s) = %+v, want %+v", c.name, got, c.want)
		}
	}
	if got, want := StoreRevision("p-a", nil), (RevisionStep{Name: "p-a", Create: true, Number: 1}); got != want {
		t.Errorf("StoreRevision on no history = %+v, want %+v", got, want)
	}
}

// TestPruneRevisions: beyond the limit the oldest go, never one kept (the
// target, the rollback target, a revision a node holds), and a history
// at or under the limit loses nothing even when nothing is kept.
func TestPruneRevisions(t *testing.T) {
	numbers := map[string]int64{}
	for i, n := range []string{"r1", "r2", "r3", "r4", "r5"} {
		numbers[n] = int64(i + 1)
	}
	for _, c := range []struct {
		keep  map[string]bool
		limit int
		want  []string
	}{
		{nil, 5, nil},
		{nil, 3, []string{"r1", "r2"}},
		{map[string]bool{"r1": true}, 3, []string{"r2", "r3"}},
		{map[string]bool{"r1": true, "r2": true, "r3": true, "r4": true}, 3, []string{"r5"}},
		{map[string]bool{"r1": true, "r2": true, "r3": true, "r4": true, "r5": true}, 3, nil},
	} {
		if got := PruneRevisions(numbers, c.keep, c.limit); !slices.Equal(got, c.want) {
			t.Errorf("PruneRevisions(keep %v, limit %d) = %v, want %v", c.keep, c.limit, got, c.want)
		}
	}
}

// TestNewRevisionStoresTheNodeTuning: the revision holds the tuning nodes
// are given (the manager's own settings left out) and is controlled by
// the profile, so it goes with it.
func TestNewRevisionStoresTheNodeTuning(t *testing.T) {
	p := &v1alpha1.LatencyProfile{}
	p.Name, p.UID = "tk", "uid-1"
	cr, err := NewRevision(p, "ns", "tk-1", 7)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(NodeTuning(&p.Spec.TuningSpec))
	if string(cr.Data.Raw) != string(want) || cr.Revision != 7 || cr.Namespace != "ns" || cr.Name != "tk-1" {
		t.Errorf("NewRevision = %s/%s #%d %s, want ns/tk-1 #7 %s", cr.Namespace, cr.Name, cr.Revision, cr.Data.Raw, want)
	}
	if o := metav1.GetControllerOf(cr); o == nil || o.UID != p.UID || o.Kind != "LatencyProfile" {
		t.Errorf("NewRevision's controller = %+v, want the profile", o)
	}
}
