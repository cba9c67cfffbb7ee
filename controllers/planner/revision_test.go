package planner

import (
	"strings"
	"testing"

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
