// Package v1alpha1 holds the tuning.latencytier.io/v1alpha1 API: LatencyProfile
// (a platform team's intent) and LatencyNode (the resolved per-node spec written
// by the controller, and the status reported by that node's agent).
//
// +kubebuilder:object:generate=true
// +groupName=tuning.latencytier.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of this API.
var GroupVersion = schema.GroupVersion{Group: "tuning.latencytier.io", Version: "v1alpha1"}

// AddToScheme adds the types of this API to a scheme. It is built on
// apimachinery alone, so importing the API does not pull in controller-runtime.
var AddToScheme = schemeBuilder.AddToScheme

var schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&LatencyProfile{}, &LatencyProfileList{},
		&LatencyNode{}, &LatencyNodeList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
