package profilestatus

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/planner"
)

// profile is a LatencyProfile of generation 1 selecting match at priority.
func profile(name string, priority int32, match map[string]string) v1alpha1.LatencyProfile {
	return v1alpha1.LatencyProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: v1alpha1.LatencyProfileSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: match},
			Priority:     priority,
		},
	}
}

// applySpec is a LatencyNode spec applying p's current revision, as the
// node controller writes it (controllers/latencynode.go renders the
// tuning; status reads only the profile, generation and revision).
func applySpec(p *v1alpha1.LatencyProfile) v1alpha1.LatencyNodeSpec {
	return v1alpha1.LatencyNodeSpec{
		Action:            v1alpha1.ActionApply,
		Profile:           p.Name,
		ProfileGeneration: p.Generation,
		Tuning:            planner.NodeTuning(&p.Spec.TuningSpec),
		Revision:          planner.CurrentRevision(p),
	}
}
