package prometheus

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// runbookBase is where runbook_url points: docs/runbooks.md, relative to
// the repository root (the rules carry no host: prefix it in your
// Alertmanager templates, or replace it with where you publish the docs).
const runbookBase = "docs/runbooks.md#"

// runbookURL is an alert's runbook_url: the anchor GitHub gives the
// section "## <alert>".
func runbookURL(alert string) string { return runbookBase + strings.ToLower(alert) }

// TestEveryAlertHasARunbook: each alert's runbook_url names its own section
// of docs/runbooks.md, and the section says what it means, how to look and
// what to do.
func TestEveryAlertHasARunbook(t *testing.T) {
	b, err := os.ReadFile("latencytier.rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	for _, s := range regexp.MustCompile(`(?m)^## `).Split(string(doc), -1)[1:] {
		name, body, _ := strings.Cut(s, "\n")
		sections[strings.TrimSpace(name)] = body
	}
	n := 0
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if got := r.Annotations["runbook_url"]; got != runbookURL(r.Alert) {
				t.Errorf("%s: runbook_url %q, want %q", r.Alert, got, runbookURL(r.Alert))
			}
			body, ok := sections[r.Alert]
			if !ok {
				t.Errorf("%s: docs/runbooks.md has no section \"## %s\"", r.Alert, r.Alert)
				continue
			}
			for _, part := range []string{"**What it means**", "**How to look**", "**What to do**"} {
				if !strings.Contains(body, part) {
					t.Errorf("%s: its runbook section lacks %s", r.Alert, part)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no alerts found in latencytier.rules.yaml")
	}
}
