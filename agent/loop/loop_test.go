package loop

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/testroot"
	"latencytier.io/latencytier/agent/journal"
	"latencytier.io/latencytier/agent/knob"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// startAPI starts a real kube-apiserver and etcd with the CRDs.
func startAPI(t *testing.T) (client.Client, *envtest.Environment) {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		home, _ := os.UserHomeDir()
		assets = filepath.Join(home, ".cache", "latencytier", "k8s", "v1.37.2")
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		t.Fatalf("no envtest binaries in %s: run make test (hack/k8s-binaries.sh builds them)", assets)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, env
}

// fakeHost is a kernel layout in a temp dir: two scheduler sysctls and two
// IRQs, so the loop runs without touching the real kernel.
func fakeHost(t *testing.T) *host.Root {
	return testroot.New(t, map[string]string{
		"proc/sys/kernel/osrelease":               "6.6.8",
		"proc/sys/kernel/sched_autogroup_enabled": "1",
		"proc/sys/kernel/sched_rt_runtime_us":     "950000",
		"proc/irq/default_smp_affinity":           "3",
		"proc/irq/24/smp_affinity_list":           "0-1",
		"proc/irq/41/smp_affinity_list":           "0-1",
		"sys/kernel/debug/sched/base_slice_ns":    "3000000",
		"sys/devices/system/cpu/online":           "0-1",
		"proc/cmdline":                            "ro quiet",
		"sys/fs/cgroup/cgroup.controllers":        "cpuset cpu",
		"sys/fs/cgroup/cgroup.subtree_control":    "cpuset cpu",
		"sys/fs/cgroup/system.slice/cpuset.cpus":  "",
		"sys/fs/cgroup/user.slice/cpuset.cpus":    "",
		"sys/fs/cgroup/init.scope/cpuset.cpus":    "",
	})
}

func startAgent(t *testing.T, env *envtest.Environment, root *host.Root, nodeName string) {
	t.Helper()
	startObservedAgent(t, env, root, nodeName, 300*time.Millisecond, nil)
}

// startObservedAgent runs the agent loop for nodeName with resync and
// observer (nil: none) until the test ends.
func startObservedAgent(t *testing.T, env *envtest.Environment, root *host.Root, nodeName string, resync time.Duration, obs Observer) {
	t.Helper()
	runAgent(t, env, Options{NodeName: nodeName, Root: root, Resync: resync, Observer: obs})
}

// runAgent runs the agent loop with o (its log, and its API server config
// unless o has one, filled in) until the test ends.
func runAgent(t *testing.T, env *envtest.Environment, o Options) {
	t.Helper()
	o.Log = testr.NewWithOptions(t, testr.Options{Verbosity: 1})
	if o.Config == nil {
		o.Config = env.Config
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, o)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func conditionIs(ln *v1alpha1.LatencyNode, typ string, s metav1.ConditionStatus) bool {
	c := meta.FindStatusCondition(ln.Status.Conditions, typ)
	return c != nil && c.Status == s
}

func spec() v1alpha1.LatencyNodeSpec {
	dis := v1alpha1.Disabled
	rt := "900ms" // below the 1s period: Unlimited needs cpus.isolated
	res := "0"
	return v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionApply, Profile: "gateway", ProfileGeneration: 1,
		Tuning: v1alpha1.TuningSpec{
			Scheduler: &v1alpha1.SchedulerSpec{Autogroup: &dis, RTRuntime: &rt,
				Latency: &metav1.Duration{Duration: 12 * time.Millisecond}},
			CPUs: &v1alpha1.CPUSpec{Reserved: &res},
			IRQ:  &v1alpha1.IRQSpec{Affinity: v1alpha1.IRQAffinityReserved},
		}}
}

func TestAgentLoop(t *testing.T) {
	c, env := startAPI(t)
	ctx := context.Background()
	root := fakeHost(t)
	// Another node's LatencyNode: this agent must never touch it.
	other := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}, Spec: spec()}
	mine := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Spec: spec()}
	for _, ln := range []*v1alpha1.LatencyNode{other, mine} {
		if err := c.Create(ctx, ln); err != nil {
			t.Fatal(err)
		}
	}
	startAgent(t, env, root, "node-a")
	autogroup := root.Proc("sys", "kernel", "sched_autogroup_enabled")
	key := types.NamespacedName{Name: "node-a"}
	ln := &v1alpha1.LatencyNode{}

	eventually(t, "Applied=True", func() bool {
		return c.Get(ctx, key, ln) == nil && conditionIs(ln, v1alpha1.NodeApplied, metav1.ConditionTrue)
	})
	if testroot.Read(t, autogroup) != "0" || testroot.Read(t, root.Proc("irq", "41", "smp_affinity_list")) != "0" ||
		testroot.Read(t, root.Cgroup("system.slice", "cpuset.cpus")) != "0" {
		t.Fatal("host not tuned")
	}
	if ln.Status.ObservedGeneration != ln.Generation || ln.Status.Profile != "gateway" || ln.Status.Kernel.SchedulerClass != "EEVDF" {
		t.Fatalf("status = %+v", ln.Status)
	}
	var latency *v1alpha1.SettingResult
	for i := range ln.Status.Settings {
		if ln.Status.Settings[i].Setting == "scheduler/latency" {
			latency = &ln.Status.Settings[i]
		}
	}
	if latency == nil || latency.State != v1alpha1.SettingUnsupported {
		t.Fatalf("latency on EEVDF = %+v, want Unsupported", latency)
	}

	// No change on the host: no status write over several resyncs.
	rv := ln.ResourceVersion
	time.Sleep(1500 * time.Millisecond)
	if err := c.Get(ctx, key, ln); err != nil || ln.ResourceVersion != rv {
		t.Fatalf("status rewritten without a change (rv %s -> %s)", rv, ln.ResourceVersion)
	}

	// Drift: someone flips autogroup back; the agent reports and re-asserts.
	testroot.Write(t, autogroup, "1")
	eventually(t, "Drifted=True", func() bool {
		return c.Get(ctx, key, ln) == nil && conditionIs(ln, v1alpha1.NodeDrifted, metav1.ConditionTrue)
	})
	eventually(t, "autogroup re-asserted", func() bool { return testroot.Read(t, autogroup) == "0" })

	// A pod on this node is seen through the spec.nodeName watch (no cgroup
	// tree here, so it only has to not break anything).
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "default",
		Annotations: map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable}},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}

	// Revert: originals back, Reverted=True, journal gone.
	if err := c.Get(ctx, key, ln); err != nil {
		t.Fatal(err)
	}
	ln.Spec = v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionRevert}
	if err := c.Update(ctx, ln); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Reverted=True", func() bool {
		return c.Get(ctx, key, ln) == nil && conditionIs(ln, v1alpha1.NodeReverted, metav1.ConditionTrue)
	})
	if testroot.Read(t, autogroup) != "1" || testroot.Read(t, root.Proc("irq", "41", "smp_affinity_list")) != "0-1" ||
		testroot.Read(t, root.Cgroup("system.slice", "cpuset.cpus")) != "" ||
		testroot.Read(t, root.Proc("irq", "default_smp_affinity")) != "3" {
		t.Fatal("originals not restored")
	}
	if _, err := os.Stat(journal.Path(root)); !os.IsNotExist(err) {
		t.Fatalf("journal left after revert: %v", err)
	}
	if err := c.Get(ctx, types.NamespacedName{Name: "node-b"}, other); err != nil {
		t.Fatal(err)
	}
	if len(other.Status.Conditions) != 0 || other.Status.Kernel != nil {
		t.Fatalf("agent of node-a wrote node-b's status: %+v", other.Status)
	}
}

// An agent that starts with a journal but no LatencyNode (the profile went
// away while it was down) restores the journal.
func TestAgentRestoresOrphanJournalOnStart(t *testing.T) {
	_, env := startAPI(t)
	root := fakeHost(t)
	autogroup := root.Proc("sys", "kernel", "sched_autogroup_enabled")
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	if _, err := e.Apply(apply.Meta{Profile: "gone"}, []knob.Knob{{ID: "scheduler/autogroup", Path: autogroup, Desired: "0"}}); err != nil {
		t.Fatal(err)
	}
	if testroot.Read(t, autogroup) != "0" {
		t.Fatal("setup apply failed")
	}
	startAgent(t, env, root, "node-z")
	eventually(t, "journal restored", func() bool {
		_, err := os.Stat(journal.Path(root))
		return os.IsNotExist(err) && testroot.Read(t, autogroup) == "1"
	})
}

// TestRevertIfGoneOnShutdown covers the agent's last check before exiting: a
// node that left the tier (LatencyNode deleted) is reverted even though no
// agent will run there again; a node whose LatencyNode exists, or whose API
// server cannot be asked, keeps its tuning.
func TestRevertIfGoneOnShutdown(t *testing.T) {
	c, env := startAPI(t)
	ctx := context.Background()
	root := fakeHost(t)
	autogroup := root.Proc("sys", "kernel", "sched_autogroup_enabled")
	e := &apply.Engine{Root: root, Log: logr.Discard()}
	tune := func() {
		t.Helper()
		if _, err := e.Apply(apply.Meta{Profile: "gateway"}, []knob.Knob{{ID: "scheduler/autogroup", Path: autogroup, Desired: "0"}}); err != nil {
			t.Fatal(err)
		}
	}
	tune()

	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-s"}, Spec: spec()}
	if err := c.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}
	if revertIfGone(ctx, c, e, "node-s", logr.Discard()) || testroot.Read(t, autogroup) != "0" {
		t.Fatal("reverted although the LatencyNode exists (an agent restart must not untune the node)")
	}

	unreachable, err := client.New(&rest.Config{Host: "https://127.0.0.1:1"}, client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, ln); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if revertIfGone(short, unreachable, e, "node-s", logr.Discard()) || testroot.Read(t, autogroup) != "0" {
		t.Fatal("reverted without knowing the LatencyNode is gone")
	}

	if !revertIfGone(ctx, c, e, "node-s", logr.Discard()) {
		t.Fatal("did not revert although the LatencyNode is gone")
	}
	if testroot.Read(t, autogroup) != "1" {
		t.Fatalf("autogroup = %s after revert, want the original 1", testroot.Read(t, autogroup))
	}
	if _, err := os.Stat(journal.Path(root)); !os.IsNotExist(err) {
		t.Fatalf("journal left behind: %v", err)
	}
	_ = env
}
