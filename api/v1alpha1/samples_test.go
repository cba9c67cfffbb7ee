package v1alpha1_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// TestSamplesApply: every sample in config/samples passes the CRD's rules
// (a server-side dry-run create), so a rule change that makes the shipped
// examples invalid fails here, not in a user's kubectl apply.
func TestSamplesApply(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no samples: %v", err)
	}
	for _, p := range paths {
		if filepath.Base(p) == "kustomization.yaml" {
			continue
		}
		t.Run(filepath.Base(p), func(t *testing.T) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			dryRunCreate(t, b)
		})
	}
}

// TestReadmeProfileApplies: the worked LatencyProfile of the README and the
// annotated one of docs/profile.md (the first yaml block of that kind in
// each) pass the CRD's rules too.
func TestReadmeProfileApplies(t *testing.T) {
	for _, doc := range []string{"README.md", filepath.Join("docs", "profile.md")} {
		t.Run(doc, func(t *testing.T) { docProfileApplies(t, doc) })
	}
}

func docProfileApplies(t *testing.T, doc string) {
	b, err := os.ReadFile(filepath.Join("..", "..", doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(b), "```yaml\n")[1:] {
		block = block[:strings.Index(block, "```")]
		if strings.Contains(block, "kind: LatencyProfile\n") {
			dryRunCreate(t, []byte(block))
			return
		}
	}
	t.Fatalf("%s has no yaml block with a LatencyProfile", doc)
}

func dryRunCreate(t *testing.T, b []byte) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(context.Background(), u, client.DryRunAll); err != nil {
		t.Fatalf("rejected: %v", err)
	}
}
