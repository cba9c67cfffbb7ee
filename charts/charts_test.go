// Package charts holds the Helm chart (charts/latencytier); its test checks
// that the chart lints and that, with default values, it renders the same
// objects as the kustomize tree config/default.
package charts

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const chartDir = "latencytier"

// kubeVersion is the cluster version the chart is rendered for (the
// Kubernetes the project builds and tests against).
const kubeVersion = "1.37.2"

// helm runs the helm CLI pinned in go.mod as a Go tool.
func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", append([]string{"tool", "helm"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

func TestChartLints(t *testing.T) {
	out := helm(t, "lint", "--strict", "--kube-version", kubeVersion, chartDir)
	if !bytes.Contains(out, []byte("0 chart(s) failed")) {
		t.Fatalf("helm lint:\n%s", out)
	}
}

// TestChartRendersConfigDefault fails when the chart and config/default
// drift apart: an RBAC marker, a CRD field, a manager flag or an admission
// rule changed in one and not in the other.
func TestChartRendersConfigDefault(t *testing.T) {
	rendered := helm(t, "template", "latencytier", chartDir, "--include-crds", "--kube-version", kubeVersion)
	// Both sides go through kustomize's YAML parser and printer, so that
	// two parsers' readings of one folded scalar are not a difference.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "chart.yaml"), rendered, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("resources: [chart.yaml]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := objects(t, "helm template", kustomize(t, dir))
	want := objects(t, "kustomize build config/default", kustomize(t, filepath.Join("..", "config", "default")))

	for key, w := range want {
		g, ok := got[key]
		if !ok {
			t.Errorf("%s: in config/default, not rendered by the chart", key)
			continue
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s differs between the chart and config/default:\n%s", key, diff(t, w, g))
		}
	}
	for key, obj := range got {
		if isHook(obj) {
			continue // Helm's own lifecycle (uninstall-hook.yaml); make undeploy runs the command
		}
		if _, ok := want[key]; !ok {
			t.Errorf("%s: rendered by the chart, not in config/default", key)
		}
	}
	if len(want) == 0 {
		t.Fatal("kustomize build config/default rendered nothing")
	}
}

// TestChartValuesReachTheObjects checks the values a user sets land where
// they should, not only that the defaults match.
func TestChartValuesReachTheObjects(t *testing.T) {
	rendered := helm(t, "template", "latencytier", chartDir, "--kube-version", kubeVersion,
		"--set", "namespace.name=tier", "--set", "image.repository=registry.example/latencytier",
		"--set", "image.tag=v1.2.3",
		"--set", "metrics.secure=false", "--set", "admissionPolicies.enabled=false",
		"--set", "sysctls.allowed=vm.panic_on_oom\\,net.ipv4.tcp_*")
	objs := objects(t, "helm template", rendered)
	dep, ok := objs["Deployment/tier/latencytier-manager"]
	if !ok {
		t.Fatalf("no manager Deployment in namespace tier; rendered %v", keys(objs))
	}
	args := fmt.Sprint(dep["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"])
	for _, want := range []string{"--metrics-secure=false"} {
		if !strings.Contains(args, want) {
			t.Errorf("manager args %s lack %s", args, want)
		}
	}
	// The admin's sysctl unlock is rendered even without the policies: the
	// agents read it too.
	cm, ok := objs["ConfigMap/tier/latencytier-sysctls"]
	if got := fmt.Sprint(cm["data"]); !ok || got != "map[allowedSysctls:vm.panic_on_oom,net.ipv4.tcp_*]" {
		t.Errorf("sysctl unlock ConfigMap data = %s (found %v)", got, ok)
	}
	for key := range objs {
		if strings.HasPrefix(key, "ValidatingAdmissionPolicy") {
			t.Errorf("%s rendered with admissionPolicies.enabled=false", key)
		}
		if strings.Contains(key, "/latencytier-system/") {
			t.Errorf("%s still in latencytier-system with namespace.name=tier", key)
		}
	}
}

// isHook: the object is a Helm hook, run by Helm around an install,
// upgrade or uninstall, not part of the installed objects.
func isHook(obj map[string]any) bool {
	md, _ := obj["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	_, ok := ann["helm.sh/hook"]
	return ok
}

// kustomize builds a kustomization directory with the kustomize Go API.
func kustomize(t *testing.T, dir string) []byte {
	t.Helper()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// objects splits a multi-document stream into objects keyed by
// kind/namespace/name, dropping empty documents.
func objects(t *testing.T, what string, stream []byte) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range bytes.Split(stream, []byte("\n---")) {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, doc)
		}
		if len(obj) == 0 {
			continue
		}
		md, _ := obj["metadata"].(map[string]any)
		key := fmt.Sprintf("%s/%s/%s", obj["kind"], md["namespace"], md["name"])
		if md["namespace"] == nil {
			key = fmt.Sprintf("%s/%s", obj["kind"], md["name"])
		}
		if _, dup := out[key]; dup {
			t.Fatalf("%s: %s twice", what, key)
		}
		out[key] = obj
	}
	return out
}

func keys(m map[string]map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// diff shows two objects as YAML, line by line where they differ.
func diff(t *testing.T, want, got map[string]any) string {
	t.Helper()
	w, _ := yaml.Marshal(want)
	g, _ := yaml.Marshal(got)
	dir := t.TempDir()
	wf, gf := filepath.Join(dir, "config-default.yaml"), filepath.Join(dir, "chart.yaml")
	if err := os.WriteFile(wf, w, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gf, g, 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("diff", "-u", wf, gf).CombinedOutput()
	return string(out)
}
