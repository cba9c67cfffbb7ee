package controllers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/planner"
)

// applySpec is the LatencyNode spec that applies profile p.
func applySpec(p *v1alpha1.LatencyProfile) v1alpha1.LatencyNodeSpec {
	return v1alpha1.LatencyNodeSpec{
		Action:            v1alpha1.ActionApply,
		Profile:           p.Name,
		ProfileGeneration: p.Generation,
		Tuning:            directTuning(p),
		Revision:          currentRevision(p),
	}
}

// directTuning is the tuning the selection writes for p, a profile
// without spec.rollout: its Reboot boot policy stages nothing, there
// being no canary (reboot_gate.go). A profile with spec.rollout has its
// nodes' tuning written by the rollout's moves.
func directTuning(p *v1alpha1.LatencyProfile) v1alpha1.TuningSpec {
	t := planner.NodeTuning(&p.Spec.TuningSpec)
	if p.Spec.Rollout != nil {
		return t
	}
	return gatedTuning(t, rebootGateOf(p, 0, 0))
}

// joinSpec is the spec of a node joining p: with spec.rollout it measures
// a baseline first (Baseline, no tuning but p's measurement settings, so
// the baseline is one interval of p's) and the rollout moves it on;
// without, it applies p at once.
func joinSpec(p *v1alpha1.LatencyProfile) v1alpha1.LatencyNodeSpec {
	if p.Spec.Rollout == nil {
		return applySpec(p)
	}
	return v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionBaseline, Profile: p.Name, ProfileGeneration: p.Generation,
		Tuning: v1alpha1.TuningSpec{Measurement: planner.NodeTuning(&p.Spec.TuningSpec).Measurement}}
}

// renderLatencyNode is a new LatencyNode for node joining profile p, owned
// by the Node so that it goes when the node goes.
func renderLatencyNode(node *corev1.Node, p *v1alpha1.LatencyProfile, now time.Time) *v1alpha1.LatencyNode {
	return &v1alpha1.LatencyNode{
		ObjectMeta: metav1.ObjectMeta{
			Name:        node.Name,
			Annotations: map[string]string{v1alpha1.RevisionSetAtAnnotation: now.UTC().Format(time.RFC3339)},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1",
				Kind:       "Node",
				Name:       node.Name,
				UID:        node.UID,
				Controller: ptr.To(false),
			}},
		},
		Spec: joinSpec(p),
	}
}

// specUpToDate reports whether ln already applies p's current generation:
// field by field what applySpec would render, tuning included. revision is
// p's current revision (currentRevision).
func specUpToDate(ln *v1alpha1.LatencyNode, p *v1alpha1.LatencyProfile, revision string) bool {
	s := &ln.Spec
	return s.Action == v1alpha1.ActionApply && s.Profile == p.Name && s.ProfileGeneration == p.Generation &&
		s.Revision == revision && equality.Semantic.DeepEqual(s.Tuning, directTuning(p))
}

// The node facts of a release live with the planner's (planner/node.go).
var (
	revertDone  = planner.RevertDone
	unreachable = planner.Unreachable
)
