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
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	cmd := exec.Command(helmBinary(t), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

var helmPath = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("go", "tool", "-n", "helm").Output()
	return strings.TrimSpace(string(out)), err
})

// helmBinary is the path of the pinned helm that go tool builds (once,
// not once per call: the tests run helm about a hundred times).
func helmBinary(t *testing.T) string {
	t.Helper()
	p, err := helmPath()
	if err != nil {
		t.Fatalf("go tool -n helm: %v", err)
	}
	return p
}

// helmFails runs helm expecting it to fail, and returns what it printed.
func helmFails(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(helmBinary(t), args...).CombinedOutput()
	if err == nil {
		t.Fatalf("helm %s succeeded, want a failure", strings.Join(args, " "))
	}
	return string(out)
}

// TestChartRendersWithoutKubeVersion: helm template with Helm's own default
// cluster version (no --kube-version), as a newcomer runs it first. It
// failed while Chart.yaml had kubeVersion >=1.30 (Helm assumes 1.20).
func TestChartRendersWithoutKubeVersion(t *testing.T) {
	objs := objects(t, "helm template", helm(t, "template", "rel", chartDir))
	if _, ok := objs["ValidatingAdmissionPolicy/latencytier-agent-own-node"]; !ok {
		t.Errorf("no admission policies rendered: %v", keys(objs))
	}
	out := helm(t, "lint", "--strict", chartDir)
	if !bytes.Contains(out, []byte("0 chart(s) failed")) {
		t.Fatalf("helm lint without --kube-version:\n%s", out)
	}
}

// TestChartRefusesClusterWithoutAdmissionPolicies: the 1.30 floor still
// holds where it matters, against a cluster (whose discovery lists kinds,
// as --api-versions group/version/Kind simulates) that does not serve
// ValidatingAdmissionPolicy v1; one that serves it renders.
func TestChartRefusesClusterWithoutAdmissionPolicies(t *testing.T) {
	out := helmFails(t, "template", "rel", chartDir, "--api-versions", "v1/Namespace", "--kube-version", "1.29.0")
	if !strings.Contains(out, "needs Kubernetes 1.30 or later") {
		t.Errorf("refusal does not say why:\n%s", out)
	}
	helm(t, "template", "rel", chartDir, "--api-versions", "v1/Namespace",
		"--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy", "--kube-version", kubeVersion)
}

func TestChartLints(t *testing.T) {
	out := helm(t, "lint", "--strict", "--kube-version", kubeVersion, chartDir)
	if !bytes.Contains(out, []byte("0 chart(s) failed")) {
		t.Fatalf("helm lint:\n%s", out)
	}
}

// configDefaultLayout are the values that render config/default's layout:
// everything in latencytier-system, a Namespace the release owns (the
// chart's default is the release's namespace, which Helm creates).
var configDefaultLayout = []string{"--namespace", "default",
	"--set", "namespace.name=latencytier-system", "--set", "namespace.create=true"}

// TestChartRendersConfigDefault fails when the chart and config/default
// drift apart: an RBAC marker, a CRD field, a manager flag or an admission
// rule changed in one and not in the other. The chart's values are its
// defaults but for configDefaultLayout; its objects' Helm-only labels
// (helmLabels) are dropped, nothing else is.
func TestChartRendersConfigDefault(t *testing.T) {
	rendered := helm(t, append([]string{"template", "latencytier", chartDir, "--include-crds", "--kube-version", kubeVersion}, configDefaultLayout...)...)
	got := objects(t, "helm template", throughKustomize(t, rendered))
	for _, obj := range got {
		dropHelmLabels(obj)
	}
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
		"--set", "metrics.secure=false",
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
	// The admin's sysctl unlock: the policy's parameter, and the agents read it too.
	cm, ok := objs["ConfigMap/tier/latencytier-sysctls"]
	if got := fmt.Sprint(cm["data"]); !ok || got != "map[allowedSysctls:vm.panic_on_oom,net.ipv4.tcp_*]" {
		t.Errorf("sysctl unlock ConfigMap data = %s (found %v)", got, ok)
	}
	for key := range objs {
		if strings.Contains(key, "/latencytier-system/") {
			t.Errorf("%s still in latencytier-system with namespace.name=tier", key)
		}
	}
}

// TestChartManagerPodValues: manager.affinity, podAnnotations and
// priorityClassName reach the manager's pod as given (the affinity
// replacing the default anti-affinity whole); by default only that
// anti-affinity is set (TestChartRendersConfigDefault holds the defaults to config/default).
// The chart had no such values.
func TestChartManagerPodValues(t *testing.T) {
	rendered := helm(t, "template", "latencytier", chartDir, "-n", "tier", "--kube-version", kubeVersion,
		"--set", "manager.priorityClassName=cluster-critical", "--set", "manager.podAnnotations.example\\.com/team=platform",
		"--set-json", `manager.affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"In","values":["system"]}]}]}},"podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":10,"podAffinityTerm":{"topologyKey":"kubernetes.io/hostname","labelSelector":{"matchLabels":{"app.kubernetes.io/component":"agent"}}}}]}}`)
	obj, ok := objects(t, "helm template", rendered)["Deployment/tier/latencytier-manager"]
	if !ok {
		t.Fatal("no manager Deployment")
	}
	dep := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict(mustYAML(t, obj), dep); err != nil {
		t.Fatal(err)
	}
	pod := dep.Spec.Template
	want := &corev1.Affinity{
		NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"system"}}}}}}},
		PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/component": "agent"}}}}}},
	}
	if !reflect.DeepEqual(pod.Spec.Affinity, want) {
		t.Errorf("manager affinity:\n%s", diffObjects(t, want, pod.Spec.Affinity))
	}
	if got := pod.Annotations["example.com/team"]; got != "platform" {
		t.Errorf("manager pod annotations %v, want example.com/team: platform", pod.Annotations)
	}
	if pod.Spec.PriorityClassName != "cluster-critical" {
		t.Errorf("manager priorityClassName %q, want cluster-critical", pod.Spec.PriorityClassName)
	}

	obj = objects(t, "helm template", helm(t, "template", "latencytier", chartDir, "-n", "tier"))["Deployment/tier/latencytier-manager"]
	dep = &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict(mustYAML(t, obj), dep); err != nil {
		t.Fatal(err)
	}
	// The default affinity only spreads the replicas (TestChartManagerReplicasAndPDB).
	if p := dep.Spec.Template; p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity != nil || p.Spec.Affinity.PodAffinity != nil ||
		p.Annotations != nil || p.Spec.PriorityClassName != "" {
		t.Errorf("defaults set affinity %v, annotations %v, priorityClassName %q; want only the replicas' anti-affinity", p.Spec.Affinity, p.Annotations, p.Spec.PriorityClassName)
	}
}

// helmLabels are Helm's own standard labels, which the chart puts on the
// metadata of every object it renders and config/default cannot know (the
// release, the chart's version, who manages it). They are the only
// difference the comparison with config/default ignores.
var helmLabels = []string{
	"helm.sh/chart",
	"app.kubernetes.io/instance",
	"app.kubernetes.io/version",
	"app.kubernetes.io/managed-by",
}

// dropHelmLabels removes helmLabels from the object's metadata.labels (and
// the map when nothing else is left); nothing else.
func dropHelmLabels(obj map[string]any) {
	md, _ := obj["metadata"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	if labels == nil {
		return
	}
	for _, l := range helmLabels {
		delete(labels, l)
	}
	if len(labels) == 0 {
		delete(md, "labels")
	}
}

// TestChartStandardLabels: every object the chart renders (hooks included;
// the CRDs in crds/ are copied, not templated, so Helm cannot label them)
// carries Helm's standard labels on its metadata, and no selector or pod
// template carries the Helm-only ones: a selector is immutable, so a label
// that changes with the release or the chart version there would make
// every upgrade fail, and in a pod template it would restart every agent
// on a chart-only bump.
func TestChartStandardLabels(t *testing.T) {
	chart := chartMeta(t)
	want := map[string]string{
		"helm.sh/chart":                fmt.Sprintf("latencytier-%s", chart["version"]),
		"app.kubernetes.io/name":       "latencytier",
		"app.kubernetes.io/instance":   "rel",
		"app.kubernetes.io/version":    fmt.Sprint(chart["appVersion"]),
		"app.kubernetes.io/managed-by": "Helm",
	}
	objs := objects(t, "helm template", helm(t, "template", "rel", chartDir, "--namespace", "tier"))
	if len(objs) < 20 {
		t.Fatalf("rendered only %v", keys(objs))
	}
	for key, obj := range objs {
		md, _ := obj["metadata"].(map[string]any)
		labels, _ := md["labels"].(map[string]any)
		for k, v := range want {
			if got := fmt.Sprint(labels[k]); got != v {
				t.Errorf("%s: label %s = %q, want %q", key, k, got, v)
			}
		}
		spec, _ := obj["spec"].(map[string]any)
		sel, _ := spec["selector"].(map[string]any)
		tmpl, _ := spec["template"].(map[string]any)
		tmd, _ := tmpl["metadata"].(map[string]any)
		for where, m := range map[string]any{"spec.selector.matchLabels": sel["matchLabels"], "spec.template.metadata.labels": tmd["labels"]} {
			m, _ := m.(map[string]any)
			for _, l := range helmLabels {
				if _, ok := m[l]; ok {
					t.Errorf("%s: %s carries %s", key, where, l)
				}
			}
		}
	}
}

// chartMeta reads the chart's Chart.yaml.
func chartMeta(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestChartImageTagIsAppVersion: with image.tag unset, the manager, the
// agents and the uninstall hook run the image of the chart's appVersion
// (Helm's convention: a chart release installs the image it was released
// with), checked on a copy of the chart with another appVersion; image.tag
// still overrides it.
func TestChartImageTagIsAppVersion(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "latencytier")
	if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	meta, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	meta = []byte(strings.Replace(string(meta), "\nappVersion: dev\n", "\nappVersion: \"9.8.7\"\n", 1))
	if err := os.WriteFile(filepath.Join(dir, "Chart.yaml"), meta, 0o644); err != nil {
		t.Fatal(err)
	}
	for tag, want := range map[string]string{"": "latencytier:9.8.7", "v1.2.3": "latencytier:v1.2.3"} {
		rendered := helm(t, "template", "rel", dir, "--set", "image.tag="+tag)
		images := map[string]bool{}
		for key, obj := range objects(t, "helm template", rendered) {
			spec, _ := obj["spec"].(map[string]any)
			tmpl, _ := spec["template"].(map[string]any)
			pod, _ := tmpl["spec"].(map[string]any)
			containers, _ := pod["containers"].([]any)
			for _, c := range containers {
				image := fmt.Sprint(c.(map[string]any)["image"])
				images[image] = true
				if image != want {
					t.Errorf("image.tag=%q: %s runs %s, want %s", tag, key, image, want)
				}
			}
		}
		if len(images) == 0 {
			t.Errorf("image.tag=%q: no containers rendered", tag)
		}
	}
}

// TestChartReleaseNamespace: by default everything namespaced lands in
// the release's namespace, and whatever names a namespace follows it (RBAC
// subjects, the sysctl policy's paramRef, the hook); the chart renders no
// Namespace then (helm install --create-namespace makes it). It failed
// while everything went to latencytier-system whatever -n said.
// namespace.create renders a privileged Namespace, but never the release's
// own, which Helm cannot own.
func TestChartReleaseNamespace(t *testing.T) {
	rendered := helm(t, "template", "rel", chartDir, "--namespace", "tier")
	objs := objects(t, "helm template", rendered)
	for key := range objs {
		if strings.HasPrefix(key, "Namespace/") {
			t.Errorf("%s rendered with namespace.create unset", key)
		}
	}
	for _, key := range []string{"Deployment/tier/latencytier-manager", "DaemonSet/tier/latencytier-agent",
		"DaemonSet/tier/latencytier-agent-hostpid", "ConfigMap/tier/latencytier-sysctls", "Job/tier/latencytier-uninstall"} {
		if _, ok := objs[key]; !ok {
			t.Errorf("no %s; rendered %v", key, keys(objs))
		}
	}
	// Every namespace named anywhere (metadata, subjects, paramRef) is tier.
	if n := strings.Count(string(rendered), "latencytier-system"); n != 0 {
		t.Errorf("latencytier-system named %d times with --namespace tier", n)
	}
	if n := strings.Count(string(rendered), "namespace: tier"); n < 12 {
		t.Errorf("namespace tier named only %d times", n)
	}

	objs = objects(t, "helm template", helm(t, "template", "rel", chartDir, "--namespace", "default",
		"--set", "namespace.name=latencytier-system", "--set", "namespace.create=true"))
	ns, ok := objs["Namespace/latencytier-system"]
	labels, _ := ns["metadata"].(map[string]any)["labels"].(map[string]any)
	if !ok || labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("namespace.create: Namespace latencytier-system %v, labels %v", ok, labels)
	}
	if out := helmFails(t, "template", "rel", chartDir, "-n", "tier", "--set", "namespace.create=true"); !strings.Contains(out, "set it") {
		t.Errorf("namespace.create without a name:\n%s", out)
	}
	if out := helmFails(t, "template", "rel", chartDir, "-n", "tier", "--set", "namespace.create=true", "--set", "namespace.name=tier"); !strings.Contains(out, "release's own namespace") {
		t.Errorf("namespace.create of the release namespace:\n%s", out)
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

// throughKustomize passes a rendered stream through kustomize's YAML parser
// and printer, as the kustomize side of a comparison goes, so that two
// parsers' readings of one folded scalar are not a difference.
func throughKustomize(t *testing.T, rendered []byte) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "chart.yaml"), rendered, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("resources: [chart.yaml]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return kustomize(t, dir)
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

func mustYAML(t *testing.T, v any) []byte {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// No insecure install mode (issue 40): with admissionPolicies.enabled=false
// the agent's RBAC could forge any node's status and the manager's relabel
// any node, so the chart refuses to render, saying why, instead of leaving
// the policies out. It rendered without them before.
func TestChartRefusesToRenderWithoutAdmissionPolicies(t *testing.T) {
	out := helmFails(t, "template", "rel", chartDir, "--kube-version", kubeVersion, "--set", "admissionPolicies.enabled=false")
	for _, want := range []string{"admissionPolicies.enabled=false is not supported", "ValidatingAdmissionPolicies", "only your own"} {
		if !strings.Contains(out, want) {
			t.Errorf("helm template output lacks %q:\n%s", want, out)
		}
	}
	objs := objects(t, "helm template", helm(t, "template", "rel", chartDir, "--kube-version", kubeVersion))
	var policies int
	for key := range objs {
		if strings.HasPrefix(key, "ValidatingAdmissionPolicy/") {
			policies++
		}
	}
	if policies == 0 {
		t.Errorf("the default render has no ValidatingAdmissionPolicy; rendered %v", keys(objs))
	}
}
