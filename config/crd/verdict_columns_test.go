package crd

import (
	"os"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"latencytier.io/latencytier/api/v1alpha1"
)

// TestVerdictColumnsAreTheAPIsWords: the LatencyProfile columns that count
// verdicts are named by v1alpha1.Verdicts, in its order, the words kubectl
// latency prints for each node (cmd/kubectl-latency's TestVerdictWordsAreTheAPIs).
func TestVerdictColumnsAreTheAPIsWords(t *testing.T) {
	b, err := os.ReadFile("bases/tuning.latencytier.io_latencyprofiles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, col := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		if slices.Contains(v1alpha1.Verdicts, col.Name) {
			got = append(got, col.Name)
		}
	}
	if !slices.Equal(got, v1alpha1.Verdicts) {
		t.Errorf("LatencyProfile verdict columns %v, want v1alpha1.Verdicts %v", got, v1alpha1.Verdicts)
	}
}
