package planner

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

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

// RevisionHistoryLimit is how many ControllerRevisions a profile keeps
// (besides the ones a node or the rollout still refers to).
const RevisionHistoryLimit = 10

// RevisionStep is what a pass writes to store a profile's current tuning
// as its newest revision: a new revision (Create), an older one made the
// newest again (Renumber: the tuning went back to it), or nothing.
type RevisionStep struct {
	Name             string
	Create, Renumber bool
	Number           int64
}

// StoreRevision is the step that makes name, the current tuning's
// revision, the newest of numbers (each stored revision's number by
// name).
func StoreRevision(name string, numbers map[string]int64) RevisionStep {
	newest := int64(0)
	for _, n := range numbers {
		newest = max(newest, n)
	}
	n, ok := numbers[name]
	switch {
	case !ok:
		return RevisionStep{Name: name, Create: true, Number: newest + 1}
	case n < newest:
		return RevisionStep{Name: name, Renumber: true, Number: newest + 1}
	}
	return RevisionStep{Name: name, Number: n}
}

// NewRevision is the ControllerRevision storing p's node tuning
// (NodeTuning) as revision number name in namespace ns, controlled by p
// (garbage-collected with it).
func NewRevision(p *v1alpha1.LatencyProfile, ns, name string, number int64) (*appsv1.ControllerRevision, error) {
	raw, err := json.Marshal(NodeTuning(&p.Spec.TuningSpec))
	if err != nil {
		return nil, fmt.Errorf("encoding tuning: %w", err)
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "LatencyProfile",
				Name: p.Name, UID: p.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: number,
	}, nil
}

// PruneRevisions names the revisions to delete: the oldest beyond limit,
// never one in keep (the target, the rollback target, those nodes hold).
// Ties in number go by name, so the choice does not depend on map order.
func PruneRevisions(numbers map[string]int64, keep map[string]bool, limit int) []string {
	extra := len(numbers) - limit
	if extra <= 0 {
		return nil
	}
	names := slices.Collect(maps.Keys(numbers))
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(numbers[a], numbers[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var out []string
	for _, name := range names {
		if extra == 0 {
			break
		}
		if keep[name] {
			continue
		}
		out = append(out, name)
		extra--
	}
	return out
}
