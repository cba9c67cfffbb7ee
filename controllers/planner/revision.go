package planner

import (
	"encoding/json"
	"fmt"
	"hash/fnv"

	"latencytier.io/latencytier/api/v1alpha1"
)

// revisionHash is how many hex digits name a tuning in its revision;
// revisionSuffix is those with the "-" before them.
const (
	revisionHash   = 8
	revisionSuffix = 1 + revisionHash
)

// RevisionName names the ControllerRevision of a tuning: <profile>-<hash
// of the tuning>, so the same tuning always has the same name and the node
// controller can name it without reading the history. RecordOf reads the
// same format back.
func RevisionName(profile string, t *v1alpha1.TuningSpec) string {
	raw, _ := json.Marshal(t) // a struct of plain fields: cannot fail
	h := fnv.New32a()
	_, _ = h.Write(raw)
	if len(profile) > 253-revisionSuffix {
		profile = profile[:253-revisionSuffix]
	}
	return fmt.Sprintf("%s-%0*x", profile, revisionHash, h.Sum32())
}

// CurrentRevision is the name of p's current tuning's revision: of the
// tuning its nodes are given (NodeTuning).
func CurrentRevision(p *v1alpha1.LatencyProfile) string {
	if !managerSettings(&p.Spec.TuningSpec) {
		// Nothing to leave out: no copy (once per status pass).
		return RevisionName(p.Name, &p.Spec.TuningSpec)
	}
	t := NodeTuning(&p.Spec.TuningSpec)
	return RevisionName(p.Name, &t)
}
