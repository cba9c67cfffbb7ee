package charts

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChartDashboardCopyMatchesConfig: the chart's dashboard ConfigMap
// reads files/latencytier.json (Helm's .Files reaches only inside the
// chart), a copy of config/grafana/latencytier.json, the file whose
// queries config/grafana's tests check; this keeps the two equal.
func TestChartDashboardCopyMatchesConfig(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "config", "grafana", "latencytier.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(chartDir, "files", "latencytier.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("charts/latencytier/files/latencytier.json differs from config/grafana/latencytier.json: " +
			"cp config/grafana/latencytier.json charts/latencytier/files/")
	}
}

// TestChartDashboardToggle: no dashboard by default; with
// monitoring.dashboard.enabled one ConfigMap labelled grafana_dashboard
// "1" (what Grafana's sidecar selects), in the release namespace or the
// one set, carrying the labels and annotations set and the dashboard
// byte for byte (but the final newline).
func TestChartDashboardToggle(t *testing.T) {
	const key = "ConfigMap/mon/latencytier-dashboard"
	for k := range objects(t, "helm template", helm(t, "template", "rel", chartDir, "-n", "mon")) {
		if strings.Contains(k, "dashboard") {
			t.Errorf("%s rendered by default", k)
		}
	}
	want, err := os.ReadFile(filepath.Join(chartDir, "files", "latencytier.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		key  string
	}{
		{[]string{"--set", "monitoring.dashboard.enabled=true"}, key},
		{[]string{"--set", "monitoring.dashboard.enabled=true", "--set", "monitoring.dashboard.namespace=grafana",
			"--set", "monitoring.dashboard.labels.release=prom", "--set", "monitoring.dashboard.annotations.grafana_folder=tier"},
			"ConfigMap/grafana/latencytier-dashboard"},
	} {
		objs := objects(t, "helm template", helm(t, append([]string{"template", "rel", chartDir, "-n", "mon"}, c.args...)...))
		cm, ok := objs[c.key]
		if !ok {
			t.Errorf("%v: no %s in %v", c.args, c.key, keys(objs))
			continue
		}
		md, _ := cm["metadata"].(map[string]any)
		labels, _ := md["labels"].(map[string]any)
		if labels["grafana_dashboard"] != "1" || labels["app.kubernetes.io/instance"] != "rel" {
			t.Errorf("%v: labels %v, want grafana_dashboard \"1\" and the chart's", c.args, labels)
		}
		if len(c.args) > 2 {
			ann, _ := md["annotations"].(map[string]any)
			if labels["release"] != "prom" || ann["grafana_folder"] != "tier" {
				t.Errorf("%v: labels %v, annotations %v: the values did not reach them", c.args, labels, ann)
			}
		}
		data, _ := cm["data"].(map[string]any)
		// A block scalar (|-) ends at the file's last line; its final
		// newline is YAML's, not the dashboard's.
		if got, _ := data["latencytier.json"].(string); got != strings.TrimSuffix(string(want), "\n") {
			t.Errorf("%v: data latencytier.json is not files/latencytier.json (%d bytes, want %d)", c.args, len(got), len(want))
		}
	}
}

// TestChartDashboardValuesRefused: the schema rejects what the template
// cannot use.
func TestChartDashboardValuesRefused(t *testing.T) {
	for _, set := range []string{"monitoring.dashboard.enabled=yes", "monitoring.dashboard.bogus=1",
		"monitoring.dashboard.namespace=Not_A_Namespace", "monitoring.dashboard.labels.x.y=1"} {
		out := helmFails(t, "template", "rel", chartDir, "--set", set)
		if !strings.Contains(out, "values don't meet the specifications of the schema") {
			t.Errorf("--set %s: %s", set, out)
		}
	}
}
