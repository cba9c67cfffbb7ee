// Package v1alpha1 holds the tuning.latencytier.io/v1alpha1 API: LatencyProfile
// (a platform team's intent) and LatencyNode (the resolved per-node spec written
// by the controller, and the status reported by that node's agent).
//
// +kubebuilder:object:generate=true
// +groupName=tuning.latencytier.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "tuning.latencytier.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this API with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this API to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
