package controllers

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
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
