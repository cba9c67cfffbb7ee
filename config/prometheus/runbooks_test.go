package prometheus

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// runbookBase is where runbook_url points: docs/runbooks.md, the path in
// the repository. The project publishes its docs at no host of its own
// (a link to a host that served nothing was the default once); the chart's
// monitoring.prometheusRule.runbookBaseURL makes it an absolute URL where
// the docs are published.
const runbookBase = "docs/runbooks.md"

// runbookURL is an alert's runbook_url: the anchor GitHub gives the
// section "## <alert>".
func runbookURL(alert string) string { return runbookBase + "#" + strings.ToLower(alert) }

// runbookAnchor resolves an alert's runbook_url: runbookBase, a path in the
// repository (no scheme, no host), and a fragment, the anchor.
func runbookAnchor(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if u.Scheme != "" || u.Host != "" {
		return "", fmt.Errorf("names a host (%s://%s): the page is the path in the repository, %s", u.Scheme, u.Host, runbookBase)
	}
	if u.Path != runbookBase {
		return "", fmt.Errorf("page %s, want %s", u.Path, runbookBase)
	}
	if u.Fragment == "" {
		return "", fmt.Errorf("no #anchor of the alert's section")
	}
	return u.Fragment, nil
}

// TestRunbookBaseIsInTheRepository: runbookBase is a file of the
// repository, from its root.
func TestRunbookBaseIsInTheRepository(t *testing.T) {
	if _, err := os.Stat(filepath.Join("..", "..", filepath.FromSlash(runbookBase))); err != nil {
		t.Errorf("runbook_url's page %s is not in the repository: %v", runbookBase, err)
	}
}

// TestRunbookAnchorRefusesAHost: a runbook_url on a host, dead or not, is
// not the repository's path.
func TestRunbookAnchorRefusesAHost(t *testing.T) {
	for _, raw := range []string{
		"https://git.example.com/latencytier/blob/main/docs/runbooks.md#latencytieragentdown",
		"docs/metrics.md#latencytieragentdown",
		"docs/runbooks.md",
	} {
		if a, err := runbookAnchor(raw); err == nil {
			t.Errorf("runbookAnchor(%q) = %q, want an error", raw, a)
		}
	}
	if a, err := runbookAnchor(runbookURL("LatencyTierAgentDown")); err != nil || a != "latencytieragentdown" {
		t.Errorf("runbookAnchor(%q) = %q, %v", runbookURL("LatencyTierAgentDown"), a, err)
	}
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
