package charts

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

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

// TestChartRunbookBaseURL: monitoring.prometheusRule.runbookBaseURL
// replaces the page of every alert's runbook_url and keeps its anchor; the
// default is the rules file's own absolute URL, so the default render is
// the file (TestChartMonitoringToggles compares the whole object).
func TestChartRunbookBaseURL(t *testing.T) {
	render := func(set ...string) map[string]string {
		args := []string{"template", "rel", chartDir, "-n", "mon", "--set", "monitoring.prometheusRule.enabled=true"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		rule, ok := objects(t, "helm template", helm(t, args...))["PrometheusRule/mon/latencytier"]
		if !ok {
			t.Fatal("no PrometheusRule rendered")
		}
		return runbookURLs(t, rule)
	}
	values, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Monitoring struct {
			PrometheusRule struct {
				RunbookBaseURL string `json:"runbookBaseURL"`
			} `json:"prometheusRule"`
		} `json:"monitoring"`
	}
	if err := yaml.Unmarshal(values, &v); err != nil {
		t.Fatal(err)
	}
	const mirror = "https://git.example.com/platform/latencytier/-/blob/v0.2.0/docs/runbooks.md"
	for base, urls := range map[string]map[string]string{
		v.Monitoring.PrometheusRule.RunbookBaseURL: render(),
		mirror: render("monitoring.prometheusRule.runbookBaseURL=" + mirror),
	} {
		if !strings.HasPrefix(base, "https://") {
			t.Errorf("runbook base %q is not an absolute https URL", base)
		}
		for alert, got := range urls {
			if want := base + "#" + strings.ToLower(alert); got != want {
				t.Errorf("base %s: %s runbook_url %q, want %q", base, alert, got, want)
			}
		}
	}
}
