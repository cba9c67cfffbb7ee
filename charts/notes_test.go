package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// notes renders templates/NOTES.txt with the given helm arguments. helm
// template leaves NOTES.txt out and helm install --dry-run needs a
// cluster, so a copy of the chart carries it as a defined template that a
// ConfigMap quotes.
func notes(t *testing.T, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "latencytier")
	if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	txt, err := os.ReadFile(filepath.Join(dir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	tpl := `{{- define "test.notes" -}}` + string(txt) + `{{- end -}}`
	if err := os.WriteFile(filepath.Join(dir, "templates", "_notes.tpl"), []byte(tpl), 0o644); err != nil {
		t.Fatal(err)
	}
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: test-notes\ndata:\n  notes: {{ include \"test.notes\" . | quote }}\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "test-notes.yaml"), []byte(cm), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := objects(t, "helm template", helm(t, append([]string{"template", "rel", dir, "--show-only", "templates/test-notes.yaml"}, args...)...))
	for _, obj := range objs {
		return fmt.Sprint(obj["data"].(map[string]any)["notes"])
	}
	t.Fatal("no notes rendered")
	return ""
}

// TestChartNotes: after helm install the user is told what was installed,
// in which namespace (the release's by default), how to check it
// (kubectl get lp, kubectl -n NS get ds) and how to uninstall (the nodes
// are reverted first; the CRDs stay). There were no NOTES before. The
// Pod Security warning needs a cluster (lookup) and is not tested here.
func TestChartNotes(t *testing.T) {
	got := notes(t, append([]string{"-n", "tier", "--set", "monitoring.podMonitor.enabled=true"}, scrapeClassValues...)...)
	for _, want := range []string{
		"in namespace tier: the manager",
		"latencytier-agent-hostpid",
		"PodMonitor latencytier (scrapes the manager and the agents with Prometheus' own\n  short-lived token, scrape class sa-token)",
		"kubectl get lp",
		"kubectl -n tier get ds",
		"kubectl -n tier rollout status deploy/latencytier-manager",
		"helm uninstall rel -n tier",
		"until every node\n  is reverted",
		"The CRDs stay",
		"kubectl delete crd latencyprofiles.tuning.latencytier.io latencynodes.tuning.latencytier.io",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("NOTES lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "PrometheusRule") {
		t.Errorf("NOTES name a PrometheusRule that is not installed:\n%s", got)
	}
	got = notes(t, "-n", "tier", "--set", "uninstall.revertNodes=false")
	if !strings.Contains(got, "BEFORE helm uninstall") {
		t.Errorf("with uninstall.revertNodes=false NOTES.txt does not warn to revert first:\n%s", got)
	}
}
