package planner

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Candidate is a LatencyProfile reduced to what node selection needs.
type Candidate struct {
	name     string
	priority int32
	selector labels.Selector
}

// Resolution is the outcome of node selection for one node.
type Resolution struct {
	// Winner is the profile that owns the node, "" when none does.
	Winner string
	// Conflict lists the profiles tied at the highest priority (two or
	// more) when the node is conflicted; the node then has no Winner.
	Conflict []string
}

// Conflicted reports whether profiles of equal priority claim the node.
func (r Resolution) Conflicted() bool { return len(r.Conflict) > 1 }

// Involves reports whether profile name is the winner or in the conflict.
func (r Resolution) Involves(name string) bool {
	if r.Winner == name {
		return true
	}
	for _, c := range r.Conflict {
		if c == name {
			return true
		}
	}
	return false
}

// CompileProfiles turns profiles into candidates sorted by descending
// priority then name. Profiles being deleted take part in no selection, so
// their nodes are reverted or handed to the next profile. A profile whose
// selector does not parse is left out and reported in the error map.
func CompileProfiles(profiles []v1alpha1.LatencyProfile) ([]Candidate, map[string]error) {
	out := make([]Candidate, 0, len(profiles))
	var bad map[string]error
	for i := range profiles {
		p := &profiles[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.NodeSelector)
		if err != nil {
			if bad == nil {
				bad = map[string]error{}
			}
			bad[p.Name] = fmt.Errorf("parsing nodeSelector: %w", err)
			continue
		}
		out = append(out, Candidate{name: p.Name, priority: p.Spec.Priority, selector: sel})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].priority != out[j].priority {
			return out[i].priority > out[j].priority
		}
		return out[i].name < out[j].name
	})
	return out, bad
}

// Selectable is a node's label set as node selection sees it: without the
// label latencytier sets, so that a profile never selects a node because of
// a label we put there. It wraps the map without copying it.
type Selectable map[string]string

// Has reports whether the label exists and is not ours.
func (s Selectable) Has(key string) bool { _, ok := s.Lookup(key); return ok }

// Get returns the label's value, "" when absent or ours.
func (s Selectable) Get(key string) string { v, _ := s.Lookup(key); return v }

// Lookup returns the label's value and whether it exists and is not ours.
func (s Selectable) Lookup(key string) (string, bool) {
	if key == v1alpha1.ProfileLabel {
		return "", false
	}
	v, ok := s[key]
	return v, ok
}

// ResolveNode decides which profile owns a node: the highest priority among
// the profiles that select it; a tie at the top is a conflict and the node
// goes to none of them. An empty nodeSelector selects every node, as in the
// rest of Kubernetes. candidates must come from CompileProfiles.
func ResolveNode(nodeLabels map[string]string, candidates []Candidate) Resolution {
	set := Selectable(nodeLabels)
	var top []string
	var topPriority int32
	for _, c := range candidates {
		if len(top) > 0 && c.priority < topPriority {
			break
		}
		if !c.selector.Matches(set) {
			continue
		}
		top = append(top, c.name)
		topPriority = c.priority
	}
	switch len(top) {
	case 0:
		return Resolution{}
	case 1:
		return Resolution{Winner: top[0]}
	default:
		return Resolution{Conflict: top}
	}
}

// Decider is the profile whose pass decides a node's selection writes
// (its labels, its LatencyNode's creation, spec, revert and release), so
// that exactly one pass writes them: the profile that wins the node
// (it labels the node and creates or takes over its LatencyNode); when
// none wins, the profile its LatencyNode names (lnProfile, ln being
// whether there is one: it reverts and releases the node, whether it
// left the selection, lost a tie or is being deleted); else the profile
// its profile label names (label: it takes the label off). "" when no
// profile has anything to do with the node.
func Decider(res Resolution, ln bool, lnProfile, label string) string {
	switch {
	case res.Winner != "":
		return res.Winner
	case ln && lnProfile != "":
		return lnProfile
	}
	return label
}
