package planner

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"latencytier.io/latencytier/api/v1alpha1"
)

// The contention taint's decision (issue 45; controllers/contention_taint.go
// writes it): which nodes of a profile that opts in with
// measurement.contention.taint carry v1alpha1.ContentionTaint, within
// its cap. It is a decision over a profile's nodes together, not a state of
// one node's life: no row of Machine.

// ContentionTaint is the taint the manager keeps on a contended node of a
// profile that opts in.
var ContentionTaint = corev1.Taint{Key: v1alpha1.ContentionTaint, Effect: corev1.TaintEffectPreferNoSchedule}

// ContentionNode is one node of a profile as the contention taint reads it.
type ContentionNode struct {
	Name string
	// Tainted: the node carries ContentionTaint now.
	Tainted bool
	// Contended: its RunQueueContention condition is True for the
	// profile (ContendedFor); Since is when it turned True.
	Contended bool
	Since     time.Time
}

// ContentionPlan is what the taint's writer does to a profile's nodes.
type ContentionPlan struct {
	// Taint and Untaint name the nodes to add the taint to and take it
	// off, by name.
	Taint, Untaint []string
	// Keep names the contended nodes that carry the taint after the plan,
	// Keep ∪ Taint, in the order they were chosen.
	Keep []string
	// Cap is how many nodes may carry the taint (MaxTainted of the
	// profile's nodes; 0 without the opt-in).
	Cap int
	// HeldBack counts the contended nodes left untainted by the cap.
	HeldBack int
}

// ContendedFor reports whether ln says its node is contended for profile:
// the LatencyNode asks for the profile, its agent reported for it, and its
// RunQueueContention condition is True; since is when it turned True. The
// profile's status counts the same nodes (status.contended).
func ContendedFor(ln *v1alpha1.LatencyNode, profile string) (contended bool, since time.Time) {
	if ln == nil || profile == "" || ln.Spec.Profile != profile || ln.Status.Profile != profile {
		return false, time.Time{}
	}
	c := meta.FindStatusCondition(ln.Status.Conditions, v1alpha1.NodeRunQueueContention)
	if c == nil || c.Status != "True" {
		return false, time.Time{}
	}
	return true, c.LastTransitionTime.Time
}

// PlanContentionTaints decides the contention taint over nodes, every node
// the profile owns (its selection), under contention (nil: the profile is
// gone, being deleted, or names no contention settings).
//
//   - Without the opt-in (taint None or left out) every tainted node loses
//     the taint; so does every tainted node that is not contended.
//   - The nodes that stay or become tainted are at most Cap: the contended
//     nodes already tainted keep the taint first, so the set does not move
//     from node to node while the same nodes stay contended; the rest of
//     the cap goes to the untainted contended nodes, longest contended
//     first, then by name. Past the cap no more are tainted (HeldBack
//     counts them). When the cap shrank under the tainted nodes (the
//     selection or maxTaintedPercent went down) the most recently
//     contended of them lose it: the cap holds at all times.
func PlanContentionTaints(contention *v1alpha1.ContentionSpec, nodes []ContentionNode) ContentionPlan {
	plan := ContentionPlan{Cap: contention.MaxTainted(len(nodes))}
	var kept, waiting []ContentionNode
	for _, n := range nodes {
		switch {
		case n.Contended && n.Tainted && plan.Cap > 0:
			kept = append(kept, n)
		case n.Contended && plan.Cap > 0:
			waiting = append(waiting, n)
		case n.Tainted:
			plan.Untaint = append(plan.Untaint, n.Name)
		}
	}
	slices.SortFunc(kept, longestContended)
	slices.SortFunc(waiting, longestContended)
	for i, n := range kept {
		if i >= plan.Cap {
			plan.Untaint = append(plan.Untaint, n.Name)
			plan.HeldBack++
			continue
		}
		plan.Keep = append(plan.Keep, n.Name)
	}
	for _, n := range waiting {
		if len(plan.Keep) >= plan.Cap {
			plan.HeldBack++
			continue
		}
		plan.Taint = append(plan.Taint, n.Name)
		plan.Keep = append(plan.Keep, n.Name)
	}
	slices.Sort(plan.Untaint)
	return plan
}

// longestContended orders nodes by when they turned contended, earliest
// first, then by name.
func longestContended(a, b ContentionNode) int {
	if c := a.Since.Compare(b.Since); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// NodeTuning is the tuning a node is given for t, and what the profile's
// revision is a hash of: t without the manager's own settings
// (measurement.contention.taint and maxTaintedPercent), which no agent
// reads, so turning the contention taint on or off is no new revision and
// rolls nothing out. t itself is left as it is.
func NodeTuning(t *v1alpha1.TuningSpec) v1alpha1.TuningSpec {
	out := *t.DeepCopy()
	if managerSettings(&out) {
		out.Measurement.Contention.Taint, out.Measurement.Contention.MaxTaintedPercent = "", 0
	}
	return out
}

// managerSettings reports whether t sets any of the manager's own settings
// NodeTuning leaves out.
func managerSettings(t *v1alpha1.TuningSpec) bool {
	m := t.Measurement
	return m != nil && m.Contention != nil && (m.Contention.Taint != "" || m.Contention.MaxTaintedPercent != 0)
}
