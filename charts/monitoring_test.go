package charts

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode"

	"sigs.k8s.io/yaml"
)

// TestChartRulesCopyMatchesConfig: the chart reads its PrometheusRule's
// rules from files/latencytier.rules.yaml (Helm's .Files reaches only
// inside the chart), a copy of config/prometheus/latencytier.rules.yaml,
// the file promtool tests; this keeps the two equal.
func TestChartRulesCopyMatchesConfig(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "config", "prometheus", "latencytier.rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(chartDir, "files", "latencytier.rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("charts/latencytier/files/latencytier.rules.yaml differs from config/prometheus/latencytier.rules.yaml: " +
			"cp config/prometheus/latencytier.rules.yaml charts/latencytier/files/")
	}
}

// TestChartMonitoringToggles: by default the chart renders nothing of the
// Prometheus Operator's (its CRDs may be absent); with
// monitoring.podMonitor.enabled and monitoring.prometheusRule.enabled it
// renders the objects of config/prometheus (the PodMonitor, its scraper's
// identity and binding, the PrometheusRule), equal to kustomize's but for
// the Helm-only labels and the app.kubernetes.io/name label, which the
// chart puts on every object and config/prometheus' ServiceAccount, Secret
// and ClusterRoleBinding do not carry; and the labels values reach them.
func TestChartMonitoringToggles(t *testing.T) {
	monitoring := []string{"PodMonitor/", "PrometheusRule/", "ServiceAccount/latencytier-system/latencytier-metrics-scraper",
		"Secret/", "ClusterRoleBinding/latencytier-metrics-scraper"}
	isMonitoring := func(key string) bool {
		for _, p := range monitoring {
			if strings.HasPrefix(key, p) {
				return true
			}
		}
		return false
	}
	for key := range objects(t, "helm template", helm(t, append([]string{"template", "latencytier", chartDir}, configDefaultLayout...)...)) {
		if isMonitoring(key) {
			t.Errorf("%s rendered by default", key)
		}
	}

	rendered := helm(t, append([]string{"template", "latencytier", chartDir,
		"--set", "monitoring.podMonitor.enabled=true", "--set", "monitoring.podMonitor.credentials=LongLivedTokenSecret",
		"--set", "monitoring.prometheusRule.enabled=true"}, configDefaultLayout...)...)
	got := map[string]map[string]any{}
	for key, obj := range objects(t, "helm template", throughKustomize(t, rendered)) {
		if isMonitoring(key) {
			dropHelmLabels(obj)
			got[key] = obj
		}
	}
	want := objects(t, "kustomize build config/prometheus", kustomize(t, filepath.Join("..", "config", "prometheus")))
	for key, w := range want {
		g, ok := got[key]
		if !ok {
			t.Errorf("%s: in config/prometheus, not rendered by the chart", key)
			continue
		}
		if wmd, _ := w["metadata"].(map[string]any); wmd["labels"] == nil {
			gmd, _ := g["metadata"].(map[string]any)
			if labels, _ := gmd["labels"].(map[string]any); len(labels) == 1 && labels["app.kubernetes.io/name"] == "latencytier" {
				delete(gmd, "labels")
			}
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s differs between the chart and config/prometheus:\n%s", key, diff(t, w, g))
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			t.Errorf("%s: rendered by the chart, not in config/prometheus", key)
		}
	}

	objs := objects(t, "helm template", helm(t, "template", "rel", chartDir, "-n", "mon",
		"--set", "monitoring.podMonitor.enabled=true", "--set", "monitoring.podMonitor.credentials=LongLivedTokenSecret", "--set", "monitoring.prometheusRule.enabled=true",
		"--set", "monitoring.podMonitor.labels.release=prom", "--set", "monitoring.prometheusRule.labels.release=prom2",
		"--set", "monitoring.podMonitor.interval=15s"))
	for key, release := range map[string]string{"PodMonitor/mon/latencytier": "prom", "PrometheusRule/mon/latencytier": "prom2"} {
		md, _ := objs[key]["metadata"].(map[string]any)
		labels, _ := md["labels"].(map[string]any)
		if labels["release"] != release {
			t.Errorf("%s: labels %v, want release=%s", key, labels, release)
		}
	}
	if b := objs["ClusterRoleBinding/latencytier-metrics-scraper"]; !strings.Contains(string(mustYAML(t, b)), "namespace: mon") {
		t.Errorf("scraper binding does not name namespace mon:\n%s", mustYAML(t, b))
	}
	if !strings.Contains(string(mustYAML(t, objs["PodMonitor/mon/latencytier"])), "interval: 15s") {
		t.Error("monitoring.podMonitor.interval did not reach the PodMonitor")
	}
}

// runbookURLs are the runbook_url annotations of a rendered
// PrometheusRule's alerts, by alert.
func runbookURLs(t *testing.T, rule map[string]any) map[string]string {
	t.Helper()
	var pr struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert       string            `json:"alert"`
					Annotations map[string]string `json:"annotations"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(mustYAML(t, rule), &pr); err != nil {
		t.Fatal(err)
	}
	urls := map[string]string{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				urls[r.Alert] = r.Annotations["runbook_url"]
			}
		}
	}
	if len(urls) == 0 {
		t.Fatal("the PrometheusRule has no alerts")
	}
	return urls
}

// githubAnchors are the anchors GitHub gives the headings of a Markdown
// document: the heading in lower case, punctuation but "-" and "_" dropped,
// spaces turned to "-", a repeat suffixed -1, -2, ... Each maps to the
// heading's text.
func githubAnchors(doc string) map[string]string {
	anchors := map[string]string{}
	seen := map[string]int{}
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		anchors[a] = text
	}
	return anchors
}

// TestChartRunbookBaseURL: every alert's runbook_url, whichever base the
// chart is given, is that base and an anchor that resolves to the alert's
// own section of docs/runbooks.md (GitHub's anchor of the heading). The
// base is monitoring.prometheusRule.runbookBaseURL, or by default
// docs/runbooks.md, the path in the repository, as in the rules file
// (so the default render stays that file, which TestChartMonitoringToggles
// compares whole). The default once pointed at a host that served nothing.
func TestChartRunbookBaseURL(t *testing.T) {
	render := func(chart string, set ...string) map[string]string {
		args := []string{"template", "rel", chart, "-n", "mon", "--set", "monitoring.prometheusRule.enabled=true"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		rule, ok := objects(t, "helm template", helm(t, args...))["PrometheusRule/mon/latencytier"]
		if !ok {
			t.Fatal("no PrometheusRule rendered")
		}
		return runbookURLs(t, rule)
	}

	doc, err := os.ReadFile(filepath.Join("..", "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := githubAnchors(string(doc))
	const mirror = "https://git.example.com/platform/latencytier/-/blob/v0.2.0/docs/runbooks.md"
	for base, urls := range map[string]map[string]string{
		"docs/runbooks.md": render(chartDir),
		mirror:             render(chartDir, "monitoring.prometheusRule.runbookBaseURL="+mirror),
	} {
		for alert, got := range urls {
			page, anchor, _ := strings.Cut(got, "#")
			if page != base {
				t.Errorf("%s runbook_url %q: page %s, want %s", alert, got, page, base)
			}
			if heading, ok := anchors[anchor]; !ok {
				t.Errorf("%s runbook_url %q: docs/runbooks.md has no heading with anchor #%s", alert, got, anchor)
			} else if heading != alert {
				t.Errorf("%s runbook_url %q: #%s is the section %q, not the alert's", alert, got, anchor, heading)
			}
		}
	}
}

// TestGithubAnchors: the anchors are GitHub's.
func TestGithubAnchors(t *testing.T) {
	got := githubAnchors("# Runbooks\n## LatencyTierAgentDown\n## What it means: a node's p99 (µs)\n## What it means: a node's p99 (µs)\ntext # not a heading\n")
	for _, a := range []string{"runbooks", "latencytieragentdown", "what-it-means-a-nodes-p99-µs", "what-it-means-a-nodes-p99-µs-1"} {
		if _, ok := got[a]; !ok {
			t.Errorf("no anchor %q in %v", a, got)
		}
	}
}
