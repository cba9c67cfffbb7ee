package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"latencytier.io/latencytier/api/v1alpha1"
)

// The plugin runs against a real kube-apiserver (envtest) with objects the
// test writes itself, status through the status subresource, as the
// controller and the agents would; it connects with --kubeconfig.

const profileYAML = `
metadata: {name: gateway, labels: {team: payments}}
spec:
  nodeSelector: {matchLabels: {tier: latency}}
  scheduler: {autogroup: Disabled}
  latencyBudget: {runQueueP99: 100us, throttledRatio: "0.01"}
status:
  matched: 3
  applied: 1
  degraded: 1
  outsideBudget: 1
  worstRunQueueP99: 1.2ms
  maxThrottledRatio: "0.2"
  conditions:
  - {type: Ready, status: "False", reason: NodesDegraded, message: 1 node degraded, lastTransitionTime: "2026-01-01T00:00:00Z"}
  rollout:
    phase: RolledBack
    revision: gateway-7f9c
    message: "node w-2 regressed: run-queue p99 300µs → 1.2ms, 4.00× > 1.2×; rolled back"
    improved: 1
    regressed: 1
    verdicts:
    - {node: w-2, verdict: Regressed, revision: gateway-7f9c, message: "run-queue p99 300µs → 1.2ms, 4.00× > 1.2×", lastTransitionTime: "2026-01-01T00:01:00Z"}
`

// Three nodes: w-1 improved, w-2 regressed with a failed setting, w-3 still
// measuring its baseline.
var nodeYAML = []string{`
metadata: {name: w-1, labels: {zone: a}}
spec:
  action: Apply
  profile: gateway
  profileGeneration: 1
  revision: gateway-7f9c
  reboot: {revision: gateway-7f9c, phase: Draining, since: "2026-01-01T00:02:00Z"}
  tuning: {scheduler: {autogroup: Disabled}, latencyBudget: {runQueueP99: 100us}}
status:
  conditions:
  - {type: Applied, status: "True", reason: Applied, message: all settings hold, lastTransitionTime: "2026-01-01T00:00:00Z"}
  - {type: WithinBudget, status: "True", reason: WithinBudget, message: p99 80µs within 100µs, lastTransitionTime: "2026-01-01T00:00:00Z"}
  settings:
  - {setting: scheduler/autogroup, desired: "0", actual: "0", state: Applied}
  runQueueP99: 80us
  latency:
    source: EBPF
    window: 30s
    classes:
    - {class: Node, samples: 90000, p50: 6us, p99: 80us, p999: 200us, max: 1ms}
  baseline: {action: Baseline, measuredAt: "2026-01-01T00:00:00Z", window: 30s, runQueue: {samples: 80000, p50: 9us, p99: 400us, max: 6ms}}
  current: {action: Apply, revision: gateway-7f9c, measuredAt: "2026-01-01T00:01:00Z", window: 30s, runQueue: {samples: 90000, p50: 6us, p99: 80us, max: 1ms}}
  boot:
    state: Staged
    backend: GRUB
    bootID: 6f1c
    arguments:
    - {argument: "nohz_full=2-3", why: "no scheduler tick on the isolated CPUs"}
    - {argument: "rcu_nocbs=2-3", why: "RCU callbacks on the reserved CPUs"}
    - {argument: "irqaffinity=0-1", why: "IRQs default to the reserved CPUs", present: true}
`, `
metadata: {name: w-2}
spec:
  action: Apply
  profile: gateway
  profileGeneration: 1
  revision: gateway-7f9c
  tuning: {scheduler: {autogroup: Disabled}, latencyBudget: {runQueueP99: 100us, throttledRatio: "0.01"}}
status:
  conditions:
  - {type: Applied, status: "False", reason: PartiallyApplied, message: 1 of 2 settings failed, lastTransitionTime: "2026-01-01T00:00:00Z"}
  - {type: WithinBudget, status: "False", reason: OutsideBudget, message: p99 1.2ms over 100µs, lastTransitionTime: "2026-01-01T00:00:00Z"}
  settings:
  - {setting: scheduler/migrationCost, desired: "5000000", actual: "500000", state: Failed, message: "write /proc/sys/kernel/sched_migration_cost_ns: permission denied"}
  - {setting: scheduler/autogroup, desired: "0", actual: "0", state: Applied}
  kernel: {version: 6.1.0-31-amd64, schedulerClass: CFS, cgroupMode: v2, cgroupDriver: systemd, onlineCPUs: 0-7,
    activeClass: ext, schedExt: {supported: true, state: enabled, ops: scx_lavd, enableSeq: 4}}
  boot: {state: Unsupported, backend: Talos, message: "Talos takes kernel arguments from its machine config, not from a bootloader the agent can stage"}
  runQueueP99: 1.2ms
  throttledRatio: "0.2"
  throttling:
  - {namespace: shop, name: gateway-0, optedIn: true, periods: 600, throttled: 120, ratio: "0.2", throttledTime: 3s}
  findings:
  - {type: AutogroupEnabled, severity: Critical, message: "kernel.sched_autogroup_enabled=1: a cron job gets the gateway's CPU share"}
  latency:
    source: EBPF
    window: 30s
    classes:
    - {class: Node, samples: 70000, p50: 20us, p99: 1.2ms, p999: 4ms, max: 9ms}
    pods:
    - namespace: shop
      name: gateway-0
      waitPerSecond: 38ms
      offenders:
      - {class: Pod, name: batch/nightly-tar, sharePercent: 70}
      - {class: KernelThread, name: ksoftirqd/1, sharePercent: 20}
      - {class: Idle, sharePercent: 10}
    - namespace: shop
      name: "evil\x1b[2J"
      waitPerSecond: 1ms
      offenders:
      - {class: SystemService, name: "system.slice/x\x1b]0;pwned\x07.service", sharePercent: 100}
  baseline: {action: Baseline, measuredAt: "2026-01-01T00:00:00Z", window: 30s, runQueue: {samples: 60000, p50: 15us, p99: 300us, max: 3ms}}
  current: {action: Apply, revision: gateway-7f9c, measuredAt: "2026-01-01T00:01:00Z", window: 30s, runQueue: {samples: 70000, p50: 20us, p99: 1.2ms, max: 9ms}}
`, `
metadata: {name: w-3}
spec:
  action: Baseline
  profile: gateway
status:
  latency:
    source: Schedstat
    window: 30s
    classes:
    - {class: Node, samples: 5000, p50: 10us, p99: 500us, max: 2ms}
  runQueueP99: 500us
`}

var (
	kubeconfig string
	testConfig *rest.Config // the platform user's, for tests that write objects
)

func TestMain(m *testing.M) { os.Exit(runEnv(m)) }

func runEnv(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		out, err := exec.Command("../../hack/k8s-binaries.sh", "--print-dir").Output()
		if err != nil {
			os.Stderr.WriteString("kubectl-latency tests need envtest binaries: hack/k8s-binaries.sh\n")
			return 1
		}
		os.Setenv("KUBEBUILDER_ASSETS", strings.TrimSpace(string(out)))
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		os.Stderr.WriteString("starting envtest: " + err.Error() + "\n")
		return 1
	}
	defer func() { _ = env.Stop() }()
	user, err := env.AddUser(envtest.User{Name: "platform", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	kc, err := user.KubeConfig()
	if err == nil {
		kubeconfig = filepath.Join(os.TempDir(), "kubectl-latency-test.kubeconfig")
		err = os.WriteFile(kubeconfig, kc, 0o600)
	}
	if err == nil {
		testConfig = user.Config()
		err = createFixtures(context.Background(), testConfig)
	}
	if err != nil {
		os.Stderr.WriteString("fixtures: " + err.Error() + "\n")
		return 1
	}
	defer os.Remove(kubeconfig)
	return m.Run()
}

// createFixtures creates each object, then writes its status through the
// status subresource (the create drops it).
func createFixtures(ctx context.Context, cfg *rest.Config) error {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	objs := []client.Object{}
	var p v1alpha1.LatencyProfile
	if err := yaml.UnmarshalStrict([]byte(profileYAML), &p); err != nil {
		return err
	}
	objs = append(objs, &p)
	for _, y := range nodeYAML {
		var n v1alpha1.LatencyNode
		if err := yaml.UnmarshalStrict([]byte(y), &n); err != nil {
			return err
		}
		objs = append(objs, &n)
	}
	for _, o := range objs {
		withStatus := o.DeepCopyObject().(client.Object)
		if err := c.Create(ctx, o); err != nil {
			return err
		}
		switch w := withStatus.(type) {
		case *v1alpha1.LatencyProfile:
			w.ResourceVersion = o.GetResourceVersion()
		case *v1alpha1.LatencyNode:
			w.ResourceVersion = o.GetResourceVersion()
		}
		if err := c.Status().Update(ctx, withStatus); err != nil {
			return err
		}
	}
	return nil
}

// run runs "kubectl latency ARGS --kubeconfig ..." and returns stdout.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &errOut})
	root.SetArgs(append([]string{"--kubeconfig", kubeconfig}, args...))
	err := root.Execute()
	t.Logf("$ kubectl latency %s\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
	return out.String(), err
}

// lineIndex is the line number of the first line matching re, -1 if none.
func lineIndex(out, re string) int {
	r := regexp.MustCompile(re)
	for i, l := range strings.Split(out, "\n") {
		if r.MatchString(l) {
			return i
		}
	}
	return -1
}

func TestStatusListsNodesWorstFirstWithBeforeAfter(t *testing.T) {
	out, err := run(t, "status", "gateway")
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`^gateway\s+False\s+3\s+1\s+1\s+1\s+1\.2ms\s+0\.2\s+RolledBack$`,
		`^  w-2\s+Regressed\s+300µs\s+1\.2ms\s+4\.00×\s+Regressed\s+0\.2\s+1 Failed, 1 Applied$`,
		`^    scheduler/migrationCost\s+Failed\s+want 5000000\s+have 500000\s+.*permission denied$`,
		`^  w-1\s+Applied\s+400µs\s+80µs\s+0\.20×\s+Improved\s+-\s+1 Applied$`,
		`^  w-3\s+Baseline\s+-\s+500µs\s+-\s+-`,
		`^Rollout gateway-7f9c: node w-2 regressed`,
	} {
		if lineIndex(out, re) < 0 {
			t.Errorf("no line matches %s", re)
		}
	}
	// Regressed, then still measuring its baseline (not tuned yet), then
	// applied and improved.
	if w2, w3, w1 := lineIndex(out, `^  w-2`), lineIndex(out, `^  w-3`), lineIndex(out, `^  w-1`); !(w2 < w3 && w3 < w1) {
		t.Errorf("nodes not worst first: w-2 at %d, w-3 at %d, w-1 at %d", w2, w3, w1)
	}
	if lineIndex(out, `^    scheduler/autogroup`) >= 0 {
		t.Error("status lists an Applied setting; it lists only the ones that do not hold")
	}
}

func TestStatusWithoutProfileShowsAll(t *testing.T) {
	out, err := run(t, "status")
	if err != nil {
		t.Fatal(err)
	}
	if lineIndex(out, `^gateway\s`) < 0 || lineIndex(out, `^  w-3\s`) < 0 {
		t.Error("status without a profile misses gateway or its nodes")
	}
	if _, err := run(t, "status", "nosuch"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("status of a missing profile: err %v, want not found", err)
	}
}

func TestExplainShowsFindingsBudgetSettingsAndKernel(t *testing.T) {
	out, err := run(t, "explain", "w-2")
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`^Node:\s+w-2 \(Regressed\)$`,
		`^Profile:\s+gateway generation 1, action Apply, revision gateway-7f9c$`,
		`^  Critical AutogroupEnabled: kernel\.sched_autogroup_enabled=1`,
		`^  run-queue p99 100µs \(measured 1\.2ms\), throttled ratio 0\.01 \(measured 0\.2\)$`,
		`^  WithinBudget\s+False\s+OutsideBudget\s+p99 1\.2ms over 100µs$`,
		`^  before p99 300µs \(p50 15µs, max 3ms, 60000 samples\) under Baseline -`,
		`^  after  p99 1\.2ms .* under Apply gateway-7f9c`,
		`^  verdict Regressed: run-queue p99 300µs → 1\.2ms, 4\.00× > 1\.2× \(revision gateway-7f9c\)$`,
		`^  Node\s+20µs\s+1\.2ms\s+4ms\s+9ms\s+70000$`,
		`^  scheduler/migrationCost\s+5000000\s+500000\s+Failed\s+write`,
		`^  scheduler/autogroup\s+0\s+0\s+Applied`,
		`^  6\.1\.0-31-amd64, scheduler CFS, cgroup v2 \(systemd driver\), online CPUs 0-7$`,
		`^  scheduling class ext: scx_lavd \(enabled, every normal task, enable_seq 4\)$`,
		`^  shop/gateway-0\s+true\s+600\s+120\s+0\.2\s+3s$`,
		`^  who made the measured pods wait:$`,
		`^    shop/gateway-0 waited 38ms per second: 70 % batch/nightly-tar \(pod\), 20 % ksoftirqd/1 \(kernel thread\), 10 % idle exit$`,
	} {
		if lineIndex(out, re) < 0 {
			t.Errorf("no line matches %s", re)
		}
	}
	if _, err := run(t, "explain", "nosuch"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("explain of a missing node: err %v, want not found", err)
	}
}

func TestTopRanksNodesByP99(t *testing.T) {
	out, err := run(t, "top")
	if err != nil {
		t.Fatal(err)
	}
	w2 := lineIndex(out, `^w-2\s+gateway\s+Node\s+20µs\s+1\.2ms\s+4ms\s+9ms\s+70000\s+0\.2\s+OUTSIDE$`)
	w3 := lineIndex(out, `^w-3\s+gateway\s+Node\s+10µs\s+500µs\s+-\s+2ms\s+5000\s+-\s+-$`)
	w1 := lineIndex(out, `^w-1\s+gateway\s+Node\s+6µs\s+80µs\s+200µs\s+1ms\s+90000\s+-\s+within$`)
	if w2 < 0 || w3 < 0 || w1 < 0 || !(w2 < w3 && w3 < w1) {
		t.Errorf("top: w-2 at %d, w-3 at %d, w-1 at %d; want all present, highest p99 first", w2, w3, w1)
	}
	if lineIndex(out, `^w-2  shop/gateway-0 waited 38ms per second: 70 % batch/nightly-tar \(pod\), 20 % ksoftirqd/1`) < 0 {
		t.Errorf("top: no line for w-2's measured pod and who made it wait:\n%s", out)
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("top printed a tenant's terminal escape:\n%q", out)
	}
	out, err = run(t, "top", "--class", "Isolated")
	if err != nil {
		t.Fatal(err)
	}
	if lineIndex(out, `^w-1\s+gateway\s+Isolated\s+-\s+-`) < 0 {
		t.Error("top --class Isolated: nodes without that class should show dashes")
	}
	if _, err := run(t, "top", "--class", "Bogus"); err == nil {
		t.Error("top --class Bogus succeeded")
	}
}

// boot shows, per node of the profile, the plan before anything reboots:
// the policy, the backend, the state, how many arguments the running
// kernel lacks, where a managed reboot stands, and under each node every
// argument with why; a node that reports none (w-3) is left out; -o json
// lists the same nodes.
func TestBootShowsThePlanPerNode(t *testing.T) {
	out, err := run(t, "boot", "gateway")
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`^NODE\s+PROFILE\s+POLICY\s+BACKEND\s+STATE\s+MISSING\s+REBOOT\s+MESSAGE$`,
		`^w-1\s+gateway\s+-\s+GRUB\s+Staged\s+2/3\s+Draining\s+-$`,
		`^  nohz_full=2-3\s+missing\s+no scheduler tick on the isolated CPUs`,
		`^  irqaffinity=0-1\s+present\s+IRQs default to the reserved CPUs`,
		`^w-2\s+gateway\s+-\s+Talos\s+Unsupported\s+0/0\s+-\s+Talos takes kernel arguments`,
	} {
		if lineIndex(out, re) < 0 {
			t.Errorf("boot: no line matches %s", re)
		}
	}
	if strings.Contains(out, "w-3") {
		t.Error("boot lists w-3, which reports no boot parameters")
	}
	if i, j := lineIndex(out, `^w-1\s`), lineIndex(out, `^w-2\s`); i < 0 || j < i {
		t.Errorf("boot: w-1 at line %d, w-2 at %d; want by name", i, j)
	}
	out, err = run(t, "boot", "-o", "jsonpath={.items[*].metadata.name}")
	if err != nil || out != "w-1 w-2" {
		t.Errorf("boot -o jsonpath: %q, %v; want w-1 w-2", out, err)
	}
	out, err = run(t, "explain", "w-1")
	if err != nil || !strings.Contains(out, "boot parameters: Staged (GRUB), 2 of 3 arguments missing: nohz_full=2-3 rcu_nocbs=2-3") {
		t.Errorf("explain w-1 lacks the boot summary (%v)", err)
	}
}

// TestSelectorSelectsByTheObjectsLabels: -l selects LatencyNodes (top,
// boot) and LatencyProfiles (status) by their own labels, server-side.
func TestSelectorSelectsByTheObjectsLabels(t *testing.T) {
	out, err := run(t, "top", "-l", "zone=a", "-o", "jsonpath={.items[*].metadata.name}")
	if err != nil || out != "w-1" {
		t.Errorf("top -l zone=a: %q, %v; want w-1", out, err)
	}
	out, err = run(t, "top", "--selector", "zone!=a", "--no-headers")
	if err != nil || lineIndex(out, `^w-1\s`) >= 0 || lineIndex(out, `^w-2\s`) != 0 || lineIndex(out, `^w-3\s`) != 1 {
		t.Errorf("top --selector zone!=a --no-headers: %v; want w-2 then w-3, no header, no w-1", err)
	}
	out, err = run(t, "boot", "-l", "zone=a", "--no-headers")
	if err != nil || lineIndex(out, `^w-1\s+gateway`) != 0 || strings.Contains(out, "w-2") {
		t.Errorf("boot -l zone=a --no-headers: %v; want w-1's rows only", err)
	}
	if out, err = run(t, "status", "-l", "team=payments"); err != nil || lineIndex(out, `^gateway\s`) < 0 {
		t.Errorf("status -l team=payments: %v; want gateway", err)
	}
	if out, err = run(t, "status", "-l", "team=search"); err != nil || out != "No LatencyProfiles found.\n" {
		t.Errorf("status -l team=search: %q, %v; want no profiles", out, err)
	}
	// --sort-by against the cluster: by p99 the same as top's own order,
	// by name the reverse of it for these three.
	if out, err = run(t, "top", "--sort-by", "node", "-o", "jsonpath={.items[*].metadata.name}"); err != nil || out != "w-1 w-2 w-3" {
		t.Errorf("top --sort-by node: %q, %v", out, err)
	}
	if out, err = run(t, "top", "--sort-by", "p99", "--no-headers"); err != nil || !(lineIndex(out, `^w-2\s`) == 0 && lineIndex(out, `^w-3\s`) == 1 && lineIndex(out, `^w-1\s`) == 2) {
		t.Errorf("top --sort-by p99: %v; want w-2 (1.2ms), w-3 (500µs), w-1 (80µs)", err)
	}
}
