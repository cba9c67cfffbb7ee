package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// These tests run the real kube-apiserver and etcd (envtest) with the
// generated CRDs, so every rule below is enforced by the API server exactly
// as `kubectl apply` and GitOps dry-runs will see it.

var (
	k8s     client.Client
	restCfg *rest.Config
	env     *envtest.Environment
)

func TestMain(m *testing.M) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run `make test` (it builds the API server with hack/k8s-binaries.sh)")
		os.Exit(1)
	}
	env = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		os.Exit(1)
	}
	restCfg = cfg
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		panic(err)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// profile builds an unstructured LatencyProfile from a YAML spec, so tests can
// send exactly what a user's manifest would (including values Go types could
// not hold).
func profile(t *testing.T, name, spec string) *unstructured.Unstructured {
	t.Helper()
	doc := fmt.Sprintf("apiVersion: tuning.latencytier.io/v1alpha1\nkind: LatencyProfile\nmetadata:\n  name: %s\nspec:\n%s", name, indent(spec))
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatalf("bad test YAML: %v\n%s", err, doc)
	}
	return u
}

func indent(s string) string {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n") + "\n"
}

const selector = "nodeSelector:\n  matchLabels:\n    tier: gateway\n"

// measured is the measurement grant every rollout needs: the namespaces
// whose pods count as the tier's in a verdict.
const measured = "measurement:\n  namespaceSelector:\n    matchLabels: {latencytier.io/tier: \"true\"}\n"

// canaryRollout is the least a Reboot boot policy needs: a rollout whose
// canary is smaller than the selection, and its measurement grant.
const canaryRollout = measured + "rollout:\n  canary:\n    nodes: 1\n"

func TestInvalidProfilesAreRejectedNamingTheField(t *testing.T) {
	long := strings.Repeat("x", 257)
	var many strings.Builder
	many.WriteString("sysctls:\n")
	for i := 0; i < 65; i++ {
		fmt.Fprintf(&many, "- name: net.core.x%d\n  value: \"1\"\n", i)
	}
	cases := []struct {
		name, spec string
		want       []string // every string must appear in the API server's message
	}{
		{"cpulist-open-range", "cpus:\n  reserved: \"1-\"", []string{"spec.cpus.reserved"}},
		{"cpulist-letter", "cpus:\n  reserved: \"a\"", []string{"spec.cpus.reserved"}},
		{"cpulist-descending", "cpus:\n  reserved: \"3-1\"", []string{"spec.cpus.reserved", "descending range"}},
		{"cpulist-empty-entry", "cpus:\n  reserved: \"0,,1\"", []string{"spec.cpus.reserved"}},
		{"isolated-descending", "cpus:\n  reserved: \"0\"\n  isolated: \"7-4\"", []string{"spec.cpus.isolated", "descending range"}},
		{"overlap-single", "cpus:\n  reserved: \"0-1\"\n  isolated: \"1\"", []string{"spec.cpus", "must not overlap"}},
		{"overlap-ranges", "cpus:\n  reserved: \"0,4-6\"\n  isolated: \"2-3,6-7\"", []string{"spec.cpus", "must not overlap"}},
		{"isolated-without-reserved", "cpus:\n  isolated: \"1\"", []string{"spec.cpus", "needs cpus.reserved"}},
		{"sysctl-slash", "sysctls:\n- name: kernel/sysrq\n  value: \"1\"", []string{"spec.sysctls[0].name"}},
		{"sysctl-dotdot", "sysctls:\n- name: net..core\n  value: \"1\"", []string{"spec.sysctls[0].name"}},
		{"sysctl-space", "sysctls:\n- name: \"net.core. rmem\"\n  value: \"1\"", []string{"spec.sysctls[0].name"}},
		{"sysctl-uppercase", "sysctls:\n- name: net.core.RMEM_max\n  value: \"1\"", []string{"spec.sysctls[0].name"}},
		{"sysctl-empty", "sysctls:\n- name: \"\"\n  value: \"1\"", []string{"spec.sysctls[0].name"}},
		{"sysctl-undotted", "sysctls:\n- name: swappiness\n  value: \"1\"", []string{"spec.sysctls[0].name"}},
		{"sysctl-value-too-long", "sysctls:\n- name: net.core.somaxconn\n  value: " + long, []string{"spec.sysctls[0].value"}},
		{"sysctl-too-many", many.String(), []string{"spec.sysctls", "64"}},
		{"sysctl-duplicates-typed", "sysctls:\n- name: kernel.sched_autogroup_enabled\n  value: \"0\"", []string{"spec.sysctls[0]", "duplicates a typed field of spec.scheduler"}},
		{"sysctl-duplicates-migration", "sysctls:\n- name: kernel.sched_migration_cost_ns\n  value: \"5000000\"", []string{"spec.sysctls[0]", "kernel.sched_migration_cost_ns"}},
		{"duration-negative", "scheduler:\n  migrationCost: -5ms", []string{"spec.scheduler.migrationCost"}},
		{"duration-absurd", "scheduler:\n  migrationCost: 90s", []string{"spec.scheduler.migrationCost", "at most 1s"}},
		{"duration-garbage", "scheduler:\n  baseSlice: fast", []string{"spec.scheduler.baseSlice"}},
		{"baseslice-too-small", "scheduler:\n  baseSlice: 1us", []string{"spec.scheduler.baseSlice", "between 100us and 100ms"}},
		{"latency-hours", "scheduler:\n  latency: 2h", []string{"spec.scheduler.latency"}},
		{"rtruntime-over-period", "scheduler:\n  rtRuntime: 2s", []string{"spec.scheduler.rtRuntime"}},
		{"rtruntime-garbage", "scheduler:\n  rtRuntime: always", []string{"spec.scheduler.rtRuntime"}},
		{"autogroup-unknown-enum", "scheduler:\n  autogroup: Off", []string{"spec.scheduler.autogroup", "Enabled", "Disabled"}},
		{"irq-unknown-enum", "cpus:\n  reserved: \"0\"\nirq:\n  affinity: Everywhere", []string{"spec.irq.affinity"}},
		{"irq-reserved-needs-cpus", "irq:\n  affinity: Reserved", []string{"irq.affinity Reserved needs cpus.reserved"}},
		{"quota-unknown-enum", "cpuQuota:\n  policy: Sometimes", []string{"spec.cpuQuota.policy"}},
		// Quota removal and the isolated CPUs are the cluster admin's grant
		// per namespace, never the pod owner's alone.
		{"quota-remove-without-namespaces", "cpuQuota:\n  policy: Remove", []string{"spec.cpuQuota", "cpuQuota.namespaceSelector is required"}},
		{"quota-default-without-namespaces", "cpuQuota: {}", []string{"spec.cpuQuota", "cpuQuota.namespaceSelector is required"}},
		{"isolated-without-namespaces", "cpus:\n  reserved: \"0\"\n  isolated: \"1\"", []string{"spec.cpus", "cpus.namespaceSelector is required"}},
		{"quota-namespace-selector-operator", "cpuQuota:\n  namespaceSelector:\n    matchExpressions:\n    - key: team\n      operator: Equals\n      values: [x]", []string{"spec.cpuQuota.namespaceSelector", "operator"}},
		{"cpus-namespace-selector-labels", "cpus:\n  reserved: \"0\"\n  isolated: \"1\"\n  namespaceSelector:\n    matchLabels:\n" + indent(manyLabels(17)), []string{"spec.cpus.namespaceSelector", "16"}},
		{"measurement-unknown-source", "measurement:\n  source: Magic", []string{"spec.measurement.source"}},
		{"measurement-interval-too-short", "measurement:\n  interval: 100ms", []string{"spec.measurement.interval", "between 5s and 1h"}},
		// Pod labels are the pod owner's: a tenant could label its pod like
		// the tier's and sway a rollout verdict without a namespace grant.
		{"measurement-pods-without-namespaces", "measurement:\n  podSelector:\n    matchLabels: {tier: latency}", []string{"spec.measurement", "measurement.namespaceSelector is required"}},
		// Latency budgets per workload (measurement.budgets).
		{"pod-budget-no-figure", "measurement:\n  budgets:\n  - name: web\n    podSelector: {}", []string{"spec.measurement.budgets[0]", "needs waitPerSecond, runQueueP99 or throttledRatio"}},
		{"pod-budget-p99-too-small", "measurement:\n  budgets:\n  - name: web\n    podSelector: {}\n    runQueueP99: 9us", []string{"spec.measurement.budgets[0].runQueueP99", "between 10us and 10s"}},
		{"pod-budget-p99-too-large", "measurement:\n  budgets:\n  - name: web\n    podSelector: {}\n    runQueueP99: 11s", []string{"spec.measurement.budgets[0].runQueueP99", "between 10us and 10s"}},
		{"pod-budget-p99-garbage", "measurement:\n  budgets:\n  - name: web\n    podSelector: {}\n    runQueueP99: fast", []string{"spec.measurement.budgets[0].runQueueP99"}},
		{"pod-budget-wait-too-small", "measurement:\n  budgets:\n  - name: web\n    podSelector: {}\n    waitPerSecond: 500us", []string{"spec.measurement.budgets[0].waitPerSecond", "between 1ms and 10s"}},
		{"pod-budget-wait-garbage", "measurement:\n  budgets:\n  - name: web\n    podSelector: {}\n    waitPerSecond: soon", []string{"spec.measurement.budgets[0].waitPerSecond"}},
		{"pod-budget-ratio-over-one", "measurement:\n  budgets:\n  - name: web\n    podSelector: {}\n    throttledRatio: \"1.5\"", []string{"spec.measurement.budgets[0].throttledRatio"}},
		{"pod-budget-name", "measurement:\n  budgets:\n  - name: Web_1\n    podSelector: {}\n    throttledRatio: \"0.1\"", []string{"spec.measurement.budgets[0].name"}},
		{"pod-budget-duplicate-name", "measurement:\n  budgets:\n  - name: web\n    podSelector: {}\n    throttledRatio: \"0.1\"\n  - name: web\n    podSelector: {}\n    throttledRatio: \"0.2\"", []string{"spec.measurement.budgets[1]", "Duplicate value"}},
		{"pod-budget-no-selector", "measurement:\n  budgets:\n  - name: web\n    throttledRatio: \"0.1\"", []string{"spec.measurement.budgets[0].podSelector", "Required"}},
		{"pod-budget-operator", "measurement:\n  budgets:\n  - name: web\n    podSelector:\n      matchExpressions:\n      - key: app\n        operator: Equals\n        values: [x]\n    throttledRatio: \"0.1\"", []string{"spec.measurement.budgets[0].podSelector.matchExpressions[0].operator"}},
		{"pod-budget-in-without-values", "measurement:\n  budgets:\n  - name: web\n    podSelector:\n      matchExpressions:\n      - key: app\n        operator: In\n    throttledRatio: \"0.1\"", []string{"spec.measurement.budgets[0].podSelector.matchExpressions[0]", "In and NotIn need at least one"}},
		{"pod-budget-labels", "measurement:\n  budgets:\n  - name: web\n    throttledRatio: \"0.1\"\n    podSelector:\n      matchLabels:\n" + indent(indent(manyLabels(17))), []string{"spec.measurement.budgets[0].podSelector.matchLabels", "16"}},
		{"pod-budget-too-many", "measurement:\n  budgets:\n" + manyBudgets(17), []string{"spec.measurement.budgets", "16"}},
		{"priority-too-high", "priority: 5000", []string{"spec.priority"}},
		{"priority-too-low", "priority: -5000", []string{"spec.priority"}},
		{"budget-p99-garbage", "latencyBudget:\n  runQueueP99: soon", []string{"spec.latencyBudget.runQueueP99"}},
		{"budget-p99-zero", "latencyBudget:\n  runQueueP99: 0s", []string{"spec.latencyBudget.runQueueP99"}},
		{"budget-ratio-over-one", "latencyBudget:\n  throttledRatio: \"1.5\"", []string{"spec.latencyBudget.throttledRatio"}},
		{"budget-ratio-percent", "latencyBudget:\n  throttledRatio: \"1%\"", []string{"spec.latencyBudget.throttledRatio"}},
		// Label selectors are not validated by the API server for custom
		// resources: without these rules a typo is accepted and the
		// controller silently ignores the profile.
		{"selector-operator-lowercase", "nodeSelector:\n  matchExpressions:\n  - key: tier\n    operator: in\n    values: [gateway]", []string{"spec.nodeSelector", "operator"}},
		{"selector-in-without-values", "nodeSelector:\n  matchExpressions:\n  - key: tier\n    operator: In", []string{"spec.nodeSelector", "values"}},
		{"selector-exists-with-values", "nodeSelector:\n  matchExpressions:\n  - key: tier\n    operator: Exists\n    values: [x]", []string{"spec.nodeSelector", "values"}},
		{"selector-too-many-expressions", "nodeSelector:\n  matchExpressions:\n" + strings.Repeat("  - key: tier\n    operator: Exists\n", 17), []string{"spec.nodeSelector", "16"}},
		{"selector-too-many-values", "nodeSelector:\n  matchExpressions:\n  - key: tier\n    operator: In\n    values: [" + strings.Repeat("v,", 64) + "v]", []string{"spec.nodeSelector", "64"}},
		{"selector-too-many-labels", "nodeSelector:\n  matchLabels:\n" + manyLabels(17), []string{"spec.nodeSelector", "16"}},
		{"pod-selector-operator", "cpuQuota:\n  podSelector:\n    matchExpressions:\n    - key: app\n      operator: Equals\n      values: [x]", []string{"spec.cpuQuota.podSelector", "operator"}},
		{"measurement-pod-selector-labels", "measurement:\n  namespaceSelector: {}\n  podSelector:\n    matchLabels:\n" + indent(manyLabels(17)), []string{"spec.measurement.podSelector", "16"}},
		// Safe rollout (issue 12).
		{"rollout-inflight-zero", "rollout:\n  maxInFlight: 0", []string{"spec.rollout.maxInFlight", "rollout.maxInFlight must be"}},
		{"rollout-inflight-percent-over", "rollout:\n  maxInFlight: \"150%\"", []string{"spec.rollout.maxInFlight"}},
		{"rollout-inflight-garbage", "rollout:\n  maxInFlight: \"many\"", []string{"spec.rollout.maxInFlight"}},
		{"rollout-canary-both", "rollout:\n  canary:\n    nodes: 1\n    selector: {matchLabels: {canary: \"\"}}", []string{"spec.rollout.canary", "exactly one of nodes and selector"}},
		{"rollout-canary-neither", "rollout:\n  canary: {}", []string{"spec.rollout.canary", "exactly one"}},
		{"rollout-canary-percent-zero", "rollout:\n  canary:\n    nodes: \"0%\"", []string{"spec.rollout.canary.nodes"}},
		{"rollout-ratio-below-one", "rollout:\n  maxP99Regression: \"0.9\"", []string{"spec.rollout.maxP99Regression", "between 1 and 100"}},
		{"rollout-ratio-garbage", "rollout:\n  maxP99Regression: \"20%\"", []string{"spec.rollout.maxP99Regression"}},
		{"rollout-throttle-over-one", "rollout:\n  maxThrottledRatioIncrease: \"2\"", []string{"spec.rollout.maxThrottledRatioIncrease"}},
		{"rollout-window-below-interval", "measurement:\n  interval: 2m\nrollout:\n  verificationWindow: 1m", []string{"spec", "rollout.verificationWindow must be at least one measurement interval"}},
		{"rollout-window-default-below-interval", "measurement:\n  interval: 5m\nrollout: {}", []string{"rollout.verificationWindow must be at least one measurement interval"}},
		{"rollout-window-too-long", "rollout:\n  verificationWindow: 48h", []string{"spec.rollout.verificationWindow", "between 5s and 24h"}},
		{"rollout-timeout-below-window", "rollout:\n  verificationWindow: 5m\n  inconclusiveTimeout: 1m", []string{"spec.rollout", "inconclusiveTimeout must be at least rollout.verificationWindow"}},
		{"rollout-measurement-disabled", "measurement:\n  source: Disabled\nrollout: {}", []string{"rollout needs measurement"}},
		{"rollout-on-regression-unknown", "rollout:\n  onRegression: Ignore", []string{"spec.rollout.onRegression"}},
		{"rollout-min-samples-zero", "rollout:\n  minSamples: 0", []string{"spec.rollout.minSamples"}},
		{"rollout-min-samples-one", measured + "rollout:\n  minSamples: 1", []string{"spec.rollout.minSamples", "20"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := selector + tc.spec
			if strings.HasPrefix(tc.spec, "nodeSelector:") {
				spec = tc.spec
			}
			obj := profile(t, fmt.Sprintf("bad-%d", i), spec)
			err := k8s.Create(context.Background(), obj)
			if err == nil {
				_ = k8s.Delete(context.Background(), obj)
				t.Fatalf("API server accepted an invalid profile:\n%s", spec)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message does not name %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestBoundaryValuesAreAccepted pins the other side of each rule, so a rule
// that rejects too much fails here.
func TestBoundaryValuesAreAccepted(t *testing.T) {
	specs := map[string]string{
		"cpulists":         "cpus:\n  reserved: \"0,4-6\"\n  isolated: \"1-3,7,8-15\"\n  namespaceSelector: {}",
		"touching":         "cpus:\n  reserved: \"0-1\"\n  isolated: \"2-3\"\n  namespaceSelector:\n    matchLabels:\n" + indent(manyLabels(16)),
		"quota-keep":       "cpuQuota:\n  policy: Keep",
		"durations":        "scheduler:\n  migrationCost: 0s\n  baseSlice: 100us\n  latency: 1s\n  wakeupGranularity: 500us\n  rtRuntime: 950ms",
		"rt-duration":      "scheduler:\n  rtRuntime: 950ms",
		"sysctl-dash":      "sysctls:\n- name: net.ipv4.conf.eth-0.rp_filter\n  value: \"1\"\n- name: vm.swappiness\n  value: \"10\"",
		"budget":           "latencyBudget:\n  runQueueP99: 100us\n  throttledRatio: \"0.000001\"",
		"budget-one":       "latencyBudget:\n  throttledRatio: \"1\"",
		"priority-max":     "priority: 1000",
		"pod-budgets":      "measurement:\n  budgets:\n" + manyBudgets(15) + "  - name: web\n    podSelector:\n      matchLabels:\n" + indent(indent(manyLabels(16))) + "      matchExpressions:\n      - key: app\n        operator: NotIn\n        values: [" + strings.Repeat("v,", 15) + "v]\n      - key: b\n        operator: Exists\n    waitPerSecond: 10s\n    runQueueP99: 10s\n    throttledRatio: \"1\"\n",
		"pod-budget-edge":  "measurement:\n  budgets:\n  - name: a\n    podSelector: {}\n    waitPerSecond: 1ms\n  - name: b\n    podSelector: {}\n    throttledRatio: \"0\"\n  - name: c\n    podSelector: {}\n    runQueueP99: 10us",
		"irq-none":         "irq:\n  affinity: Unchanged",
		"measurement-pods": "measurement:\n  podSelector:\n    matchLabels: {tier: latency}\n  namespaceSelector:\n    matchLabels: {latencytier.io/tier: \"true\"}",
		"pod-selector":     "cpuQuota:\n  namespaceSelector:\n    matchExpressions:\n    - key: kubernetes.io/metadata.name\n      operator: In\n      values: [gateway]\n  podSelector:\n    matchLabels:\n" + indent(manyLabels(16)) + "    matchExpressions:\n    - key: app\n      operator: NotIn\n      values: [" + strings.Repeat("v,", 63) + "v]\n    - key: b\n      operator: DoesNotExist",
		"rollout-bounds":   measured + "  interval: 5s\nrollout:\n  canary:\n    nodes: \"100%\"\n  maxInFlight: 10000\n  verificationWindow: 5s\n  maxP99Regression: \"1\"\n  maxThrottledRatioIncrease: \"0\"\n  minSamples: 20\n  inconclusiveTimeout: 5s\n  onInconclusive: Pass\n  onRegression: Pause\n  paused: true\n  rebootBack: Automatic",
		"rollout-selector": measured + "rollout:\n  canary:\n    selector:\n      matchLabels: {canary: \"\"}\n  maxInFlight: \"25%\"\n  maxP99Regression: \"100\"",
	}
	for name, spec := range specs {
		t.Run(name, func(t *testing.T) {
			obj := profile(t, "ok-"+name, selector+spec)
			if err := k8s.Create(context.Background(), obj); err != nil {
				t.Fatalf("valid profile rejected: %v\n%s", err, spec)
			}
			t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
		})
	}
}

func TestDefaultsAreApplied(t *testing.T) {
	obj := profile(t, "defaults", selector+"cpus:\n  reserved: \"0\"\nirq: {}\ncpuQuota:\n  namespaceSelector: {}\nmeasurement: {}")
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
	var got v1alpha1.LatencyProfile
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: "defaults"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.IRQ.Affinity != v1alpha1.IRQAffinityReserved || got.Spec.CPUQuota.Policy != v1alpha1.CPUQuotaRemove ||
		got.Spec.Measurement.Source != v1alpha1.MeasurementAuto {
		t.Fatalf("defaults not applied: irq=%q quota=%q source=%q", got.Spec.IRQ.Affinity, got.Spec.CPUQuota.Policy, got.Spec.Measurement.Source)
	}
}

func TestRolloutDefaultsAreApplied(t *testing.T) {
	obj := profile(t, "rollout-defaults", selector+measured+"rollout: {}")
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
	var got v1alpha1.LatencyProfile
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: "rollout-defaults"}, &got); err != nil {
		t.Fatal(err)
	}
	ro := got.Spec.Rollout
	if ro.MaxInFlight == nil || ro.MaxInFlight.IntValue() != 1 || ro.VerificationWindow.Duration != time.Minute ||
		ro.MaxP99Regression != "1.2" || ro.MaxThrottledRatioIncrease != "0.05" || ro.MinSamples != 100 ||
		ro.InconclusiveTimeout.Duration != 10*time.Minute || ro.OnInconclusive != v1alpha1.InconclusiveFail ||
		ro.OnRegression != v1alpha1.RegressionRollback || ro.Paused || ro.RebootBack != v1alpha1.RebootBackPause {
		t.Fatalf("rollout defaults = %+v", ro)
	}
}

func samplePaths(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range paths {
		if filepath.Base(p) != "kustomization.yaml" {
			out = append(out, p)
		}
	}
	if len(out) < 2 {
		t.Fatalf("want at least the gateway and isolated-rt samples, found %v", out)
	}
	return out
}

func TestSamplesAreAccepted(t *testing.T) {
	for _, p := range samplePaths(t) {
		t.Run(filepath.Base(p), func(t *testing.T) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(b, &u.Object); err != nil {
				t.Fatal(err)
			}
			u.SetName("sample-" + u.GetName())
			if err := k8s.Create(context.Background(), u); err != nil {
				t.Fatalf("sample %s rejected: %v", p, err)
			}
			t.Cleanup(func() { _ = k8s.Delete(context.Background(), u) })
		})
	}
}

// TestSamplesPassKubectlServerDryRun drives the real kubectl against the
// envtest API server, as a GitOps pipeline's dry run would.
func TestSamplesPassKubectlServerDryRun(t *testing.T) {
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("kubectl not built next to the API server (hack/k8s-binaries.sh builds it): %v", err)
	}
	user, err := env.AddUser(envtest.User{Name: "gitops", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kcPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range samplePaths(t) {
		out, err := exec.Command(kubectl, "--kubeconfig", kcPath, "apply", "--dry-run=server", "-f", p).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "(server dry run)") {
			t.Fatalf("kubectl apply --dry-run=server -f %s: %v\n%s", p, err, out)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	_ = os.WriteFile(bad, []byte("apiVersion: tuning.latencytier.io/v1alpha1\nkind: LatencyProfile\nmetadata:\n  name: bad\nspec:\n  nodeSelector: {}\n  cpus:\n    reserved: \"3-1\"\n"), 0o600)
	out, err := exec.Command(kubectl, "--kubeconfig", kcPath, "apply", "--dry-run=server", "-f", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "spec.cpus.reserved") {
		t.Fatalf("kubectl accepted or did not name the field: %v\n%s", err, out)
	}
}

func TestStatusIsASubresource(t *testing.T) {
	ctx := context.Background()
	lp := &v1alpha1.LatencyProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "status-sub"},
		Spec:       v1alpha1.LatencyProfileSpec{NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}},
	}
	if err := k8s.Create(ctx, lp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, lp) })
	// A status change through the main resource is dropped by the API server.
	lp.Status.Matched = 3
	if err := k8s.Update(ctx, lp); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.LatencyProfile
	_ = k8s.Get(ctx, client.ObjectKeyFromObject(lp), &got)
	if got.Status.Matched != 0 {
		t.Fatalf("status written through the main resource: matched=%d", got.Status.Matched)
	}
	// Through the status subresource it sticks, and spec is untouched.
	patch := client.MergeFrom(got.DeepCopy())
	got.Status.Matched = 3
	got.Status.Applied = 2
	if err := k8s.Status().Patch(ctx, &got, patch); err != nil {
		t.Fatal(err)
	}
	var again v1alpha1.LatencyProfile
	_ = k8s.Get(ctx, client.ObjectKeyFromObject(lp), &again)
	if again.Status.Matched != 3 || again.Status.Applied != 2 || again.Generation != got.Generation {
		t.Fatalf("status patch: matched=%d applied=%d gen %d→%d", again.Status.Matched, again.Status.Applied, got.Generation, again.Generation)
	}
}

// TestPrinterColumns asks the API server for the Table kubectl renders and
// checks the columns and the values in them.
func TestPrinterColumns(t *testing.T) {
	ctx := context.Background()
	ln := &v1alpha1.LatencyNode{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Spec:       v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionApply, Profile: "gateway", ProfileGeneration: 1},
	}
	if err := k8s.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, ln) })
	patch := client.MergeFrom(ln.DeepCopy())
	ln.Status.RunQueueP99 = &metav1.Duration{Duration: 85_000}
	ln.Status.ThrottledRatio = "0.012"
	ln.Status.Conditions = []metav1.Condition{
		{Type: v1alpha1.NodeApplied, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonApplied, LastTransitionTime: metav1.Now()},
		{Type: v1alpha1.NodeDrifted, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonNoDrift, LastTransitionTime: metav1.Now()},
	}
	ln.Status.Summary = v1alpha1.SummarizeNode(ln.Status) // as the agent writes it
	if err := k8s.Status().Patch(ctx, ln, patch); err != nil {
		t.Fatal(err)
	}
	cols, row := table(t, "latencynodes")
	want := map[string]string{"Name": "node-a", "Profile": "gateway", "Action": "Apply", "Applied": "True", "P99": "85µs", "Throttled": "0.012", "Drift": "False"}
	for c, v := range want {
		i := indexOf(cols, c)
		if i < 0 {
			t.Fatalf("LatencyNode table lacks column %q: %v", c, cols)
		}
		if fmt.Sprint(row[i]) != v {
			t.Errorf("column %s = %v, want %s", c, row[i], v)
		}
	}
	lpCols, _ := table(t, "latencyprofiles")
	for _, c := range []string{"Matched", "Applied", "Degraded", "Worst-P99", "Throttled", "Ready", "Age"} {
		if indexOf(lpCols, c) < 0 {
			t.Errorf("LatencyProfile table lacks column %q: %v", c, lpCols)
		}
	}
}

func table(t *testing.T, resource string) ([]string, []interface{}) {
	t.Helper()
	if resource == "latencyprofiles" {
		lp := profile(t, "table-row", selector)
		if err := k8s.Create(context.Background(), lp); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), lp) })
	}
	cfg := rest.CopyConfig(restCfg)
	cfg.GroupVersion = &v1alpha1.GroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = unstructuredNegotiator()
	rc, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rc.Get().Resource(resource).SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var tbl metav1.Table
	if err := yaml.Unmarshal(raw, &tbl); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range tbl.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if len(tbl.Rows) == 0 {
		t.Fatalf("empty table for %s", resource)
	}
	return cols, tbl.Rows[0].Cells
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

func TestLatencyNodeApplyNeedsAProfile(t *testing.T) {
	ctx := context.Background()
	ln := &v1alpha1.LatencyNode{
		ObjectMeta: metav1.ObjectMeta{Name: "no-profile"},
		Spec:       v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionApply},
	}
	err := k8s.Create(ctx, ln)
	if err == nil || !strings.Contains(err.Error(), "profile is required when action is Apply") {
		_ = k8s.Delete(ctx, ln)
		t.Fatalf("Apply without a profile: want rejection naming profile, got %v", err)
	}
	ln.Spec.Action = v1alpha1.ActionRevert
	if err := k8s.Create(ctx, ln); err != nil {
		t.Fatalf("Revert without a profile must be accepted: %v", err)
	}
	_ = k8s.Delete(ctx, ln)
}

// TestLatencyNodeQuotaNeedsNamespaces: the LatencyNode CRD carries the
// same rule, so a LatencyNode written by hand (or by a stale controller)
// cannot grant quota removal to every namespace by omission.
func TestLatencyNodeQuotaNeedsNamespaces(t *testing.T) {
	ctx := context.Background()
	ln := &v1alpha1.LatencyNode{
		ObjectMeta: metav1.ObjectMeta{Name: "quota-no-namespaces"},
		Spec: v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionApply, Profile: "p", ProfileGeneration: 1,
			Tuning: v1alpha1.TuningSpec{CPUQuota: &v1alpha1.CPUQuotaSpec{Policy: v1alpha1.CPUQuotaRemove}}},
	}
	err := k8s.Create(ctx, ln)
	if err == nil || !strings.Contains(err.Error(), "spec.tuning.cpuQuota") || !strings.Contains(err.Error(), "cpuQuota.namespaceSelector is required") {
		_ = k8s.Delete(ctx, ln)
		t.Fatalf("quota removal without a namespaceSelector: want rejection naming cpuQuota.namespaceSelector, got %v", err)
	}
	ln.Spec.Tuning.CPUQuota.NamespaceSelector = &v1alpha1.NamespaceSelector{}
	if err := k8s.Create(ctx, ln); err != nil {
		t.Fatalf("an explicit {} (every namespace) must be accepted: %v", err)
	}
	_ = k8s.Delete(ctx, ln)
}

// manyLabels is a YAML map body of n labels, indented by four spaces.
func manyLabels(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "    l%d: v\n", i)
	}
	return b.String()
}

// TestLatencyNodeStatusDurationsMustParse: an agent's status durations are
// decoded by the controller's typed cache; one that is not a Go duration
// would make every LatencyNode list fail to decode and stall the controller
// for all nodes, so the API server must refuse it.
func TestLatencyNodeStatusDurationsMustParse(t *testing.T) {
	ctx := context.Background()
	ln := &v1alpha1.LatencyNode{
		ObjectMeta: metav1.ObjectMeta{Name: "status-durations"},
		Spec:       v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionRevert},
	}
	if err := k8s.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, ln) })
	patch := func(status string) error {
		return k8s.Status().Patch(ctx, ln, client.RawPatch(types.MergePatchType, []byte(`{"status":`+status+`}`)))
	}
	bad := map[string]string{
		"status.runQueueP99":                 `{"runQueueP99":"soon"}`,
		"status.latency.window":              `{"latency":{"window":"1 m"}}`,
		"status.latency.classes[0].p99":      `{"latency":{"classes":[{"class":"Node","p99":"1.5 ms"}]}}`,
		"status.throttling[0].throttledTime": `{"throttling":[{"namespace":"a","name":"b","throttledTime":"x"}]}`,
	}
	for field, status := range bad {
		err := patch(status)
		if err == nil {
			t.Errorf("API server accepted %s", status)
			continue
		}
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: want Invalid naming %s, got %v", status, field, err)
		}
	}
	// What Go's time.Duration.String writes is accepted.
	ok := `{"runQueueP99":"1m30.5s","latency":{"window":"10s","classes":[{"class":"Node","p50":"500µs","p99":"1.25ms","max":"2h0m0s","buckets":[{"le":"0s","count":1}]}]}}`
	if err := patch(ok); err != nil {
		t.Fatalf("Go-formatted durations refused: %v", err)
	}
	var got v1alpha1.LatencyNode
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(ln), &got); err != nil {
		t.Fatalf("typed read after a status patch: %v", err)
	}
}

// manyBudgets is n measurement.budgets entries, b0 to b<n-1>, as YAML list
// items under budgets.
func manyBudgets(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - name: b%d\n    podSelector: {}\n    waitPerSecond: 1s\n    runQueueP99: 1ms\n    throttledRatio: \"0.01\"\n", i)
	}
	return b.String()
}

// TestPodBudgetsStatusIsBounded: status.podBudgets holds at most
// MaxPodBudgetResults pods, each verdict one of three, and what the agent
// writes (findings.PodBudgetsStatus's shape, Go durations) is accepted.
func TestPodBudgetsStatusIsBounded(t *testing.T) {
	ctx := context.Background()
	ln := &v1alpha1.LatencyNode{
		ObjectMeta: metav1.ObjectMeta{Name: "status-pod-budgets"},
		Spec:       v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionRevert},
	}
	if err := k8s.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, ln) })
	pods := func(n int, verdict string) string {
		var items []string
		for i := range n {
			items = append(items, fmt.Sprintf(`{"namespace":"shop","name":"web-%d","budget":"web","verdict":%q,"reason":"WaitOverBudget",`+
				`"since":"2026-12-06T12:00:30Z","waitPerSecond":"42ms","wakeUpPerSecond":"1.2ms","queuedBehindOthersPerSecond":"38ms",`+
				`"queuedBehindOwnPerSecond":"800µs","throttledPerSecond":"0s","throttledRatio":"0.0100"}`, i, verdict))
		}
		return `{"status":{"podBudgets":{"outside":40,"omitted":8,"pods":[` + strings.Join(items, ",") + `]}}}`
	}
	patch := func(body string) error {
		return k8s.Status().Patch(ctx, ln, client.RawPatch(types.MergePatchType, []byte(body)))
	}
	if err := patch(pods(v1alpha1.MaxPodBudgetResults, "Outside")); err != nil {
		t.Fatalf("%d pods refused: %v", v1alpha1.MaxPodBudgetResults, err)
	}
	for field, body := range map[string]string{
		"status.podBudgets.pods":            pods(v1alpha1.MaxPodBudgetResults+1, "Outside"),
		"status.podBudgets.pods[0].verdict": pods(1, "Fine"),
	} {
		if err := patch(body); err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), field) {
			t.Errorf("want Invalid naming %s, got %v", field, err)
		}
	}
}
