package rollout

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/planner"
	"latencytier.io/latencytier/controllers/profilestatus"
)

// NodesOf are the nodes p owns, sorted by name, and the LatencyNodes
// of those whose LatencyNode carries p. A node p selects whose LatencyNode
// is not there yet (the selection creates them one by one, and the
// cache may lag) is in the rollout as Joining: it can be a canary, and the
// rollout is not Complete, until it has one.
func NodesOf(in profilestatus.Input) ([]Node, map[string]*v1alpha1.LatencyNode) {
	p := in.Profile
	var canary labels.Selector
	if ro := p.Spec.Rollout; ro != nil && ro.Canary != nil && ro.Canary.Selector != nil {
		canary, _ = metav1.LabelSelectorAsSelector(ro.Canary.Selector)
	}
	lns := map[string]*v1alpha1.LatencyNode{}
	onRecord := verdictsOnRecord(p.Status.Rollout)
	var out []Node
	for i := range in.Nodes {
		node := &in.Nodes[i]
		if in.Resolution(node).Winner != p.Name {
			continue
		}
		isCanary := canary != nil && canary.Matches(planner.Selectable(node.Labels))
		ln := in.LatencyNodes[node.Name]
		if ln == nil || ln.Spec.Profile != p.Name || !ln.DeletionTimestamp.IsZero() {
			out = append(out, Node{Name: node.Name, Canary: isCanary, Joining: true})
			continue
		}
		lns[node.Name] = ln
		out = append(out, nodeOf(ln, isCanary, onRecord[node.Name]))
	}
	sortByName(out)
	return out, lns
}

// nodeOf is ln as the rollout sees it, with the verdict on record
// for it in the profile's status (nil: none).
func nodeOf(ln *v1alpha1.LatencyNode, canary bool, rec *v1alpha1.NodeVerdictStatus) Node {
	n := Node{
		Name: ln.Name, Canary: canary, Action: ln.Spec.Action, Revision: ln.Spec.Revision,
		Reported: ln.Status.ObservedGeneration >= ln.Generation,
		SetAt:    ln.CreationTimestamp.Time,
		Baseline: ln.Status.Baseline, Current: ln.Status.Current,
		AwaitingReboot: planner.AwaitingReboot(ln),
	}
	if rec != nil {
		n.Verdict = &Verdict{Reason: rec.Verdict, Message: rec.Message}
		n.VerdictCurrent = rec.Revision == ln.Spec.Revision
	}
	if t, err := time.Parse(time.RFC3339, ln.Annotations[v1alpha1.RevisionSetAtAnnotation]); err == nil {
		n.SetAt = t
	}
	// Settings the kernel refused as Invalid, alone, do not fail the node
	// (issue 40: a bad value degrades its setting, the profile says
	// Degraded); the latency verdict judges what was applied.
	if c := meta.FindStatusCondition(ln.Status.Conditions, v1alpha1.NodeApplied); n.Reported && c != nil && c.Status == metav1.ConditionFalse &&
		len(planner.RefusedInvalid(ln)) == 0 {
		n.ApplyFailed = c.Reason + ": " + c.Message
	}
	return n
}
