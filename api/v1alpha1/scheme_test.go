package v1alpha1_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"latencytier.io/latencytier/api/v1alpha1"
)

// TestAddToSchemeRegistersEveryKind: clients and the manager find all four
// kinds, and list options, through the one AddToScheme.
func TestAddToSchemeRegistersEveryKind(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"LatencyProfile", "LatencyProfileList", "LatencyNode", "LatencyNodeList", "ListOptions"} {
		if !s.Recognizes(v1alpha1.GroupVersion.WithKind(kind)) {
			t.Errorf("scheme does not recognise %s", kind)
		}
	}
}
