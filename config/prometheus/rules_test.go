// Package prometheus holds the alert rules and scrape configuration for
// Prometheus (config/prometheus); its test runs promtool on them.
package prometheus

import (
	"os"
	"os/exec"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// promtool finds promtool (Debian package prometheus, hack/apt-packages.txt).
// Missing, it skips, unless CI or LATENCYTIER_REQUIRE_PROMTOOL is set (make
// test sets it, after make deps installed the package).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" || os.Getenv("LATENCYTIER_REQUIRE_PROMTOOL") != "" {
			t.Fatal("promtool not found: install the Debian package prometheus (make deps)")
		}
		t.Skip("promtool not found; make deps installs it (CI=1 or LATENCYTIER_REQUIRE_PROMTOOL=1 make this a failure)")
	}
	return p
}

func runPromtool(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %v: %v\n%s", args, err, out)
	}
	t.Logf("promtool %v:\n%s", args, out)
}

func TestRulesAreValid(t *testing.T) {
	runPromtool(t, "check", "rules", "latencytier.rules.yaml")
}

// TestRulesFireAsSpecified runs the alert unit tests in rules.test.yaml.
func TestRulesFireAsSpecified(t *testing.T) {
	runPromtool(t, "test", "rules", "rules.test.yaml")
}

// TestPrometheusRuleMatchesRulesFile keeps the PrometheusRule (what the
// operator loads) and the plain file (what promtool tests) the same rules.
func TestPrometheusRuleMatchesRulesFile(t *testing.T) {
	var plain struct {
		Groups []any `json:"groups"`
	}
	var pr struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   any    `json:"metadata"`
		Spec       struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	read := func(file string, into any) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(b, into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	read("latencytier.rules.yaml", &plain)
	read("rules.yaml", &pr)
	if pr.Kind != "PrometheusRule" || len(plain.Groups) == 0 {
		t.Fatalf("rules.yaml kind %q, %d groups in latencytier.rules.yaml", pr.Kind, len(plain.Groups))
	}
	if !reflect.DeepEqual(plain.Groups, pr.Spec.Groups) {
		a, _ := yaml.Marshal(plain.Groups)
		b, _ := yaml.Marshal(pr.Spec.Groups)
		t.Errorf("rules.yaml and latencytier.rules.yaml differ:\n--- latencytier.rules.yaml\n%s\n--- rules.yaml\n%s", a, b)
	}
}
