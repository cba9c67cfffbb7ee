package prometheus

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// runbookBase is where runbook_url points: docs/runbooks.md in the
// repository (Chart.yaml's sources), an absolute URL that Alertmanager and
// Grafana can open. The chart's monitoring.prometheusRule.runbookBaseURL
// replaces it where the docs are published elsewhere.
const runbookBase = "https://latencytier.io/latencytier/blob/main/docs/runbooks.md"

// runbookURL is an alert's runbook_url: the anchor GitHub gives the
// section "## <alert>".
func runbookURL(alert string) string { return runbookBase + "#" + strings.ToLower(alert) }

// runbookAnchor resolves an alert's runbook_url: it must be absolute
// (https, a host) and point at runbookBase; the fragment is the anchor.
func runbookAnchor(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if !u.IsAbs() || u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("not an absolute https URL, which Alertmanager and Grafana cannot open")
	}
	if page := strings.TrimSuffix(raw, "#"+u.Fragment); page != runbookBase {
		return "", fmt.Errorf("page %s, want %s", page, runbookBase)
	}
	if u.Fragment == "" {
		return "", fmt.Errorf("no #anchor of the alert's section")
	}
	return u.Fragment, nil
}

// TestRunbookBaseIsTheRepository: runbookBase is docs/runbooks.md under
// a repository URL the chart names (Chart.yaml sources), so the alerts
// link where the project says its source lives.
func TestRunbookBaseIsTheRepository(t *testing.T) {
	b, err := os.ReadFile("../../charts/latencytier/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Sources []string `json:"sources"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		t.Fatal(err)
	}
	for _, src := range chart.Sources {
		if strings.HasPrefix(runbookBase, strings.TrimSuffix(src, "/")+"/") && strings.HasSuffix(runbookBase, "/docs/runbooks.md") {
			return
		}
	}
	t.Errorf("runbookBase %s is not docs/runbooks.md under one of Chart.yaml's sources %q", runbookBase, chart.Sources)
}

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
			anchor, err := runbookAnchor(r.Annotations["runbook_url"])
			if err != nil {
				t.Errorf("%s: runbook_url %q: %v", r.Alert, r.Annotations["runbook_url"], err)
			} else if anchor != strings.ToLower(r.Alert) {
				t.Errorf("%s: runbook_url %q points at #%s, want #%s", r.Alert, r.Annotations["runbook_url"], anchor, strings.ToLower(r.Alert))
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
