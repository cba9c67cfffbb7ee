package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// `latencytier agent --node-name ... --kubeconfig ...` end to end against a
// real API server, with the measurement hook wired: flags, client, status.
func TestAgentCommand(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		home, _ := os.UserHomeDir()
		assets = filepath.Join(home, ".cache", "latencytier", "k8s", "v1.37.2")
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		t.Fatalf("no envtest binaries in %s: run make test (hack/k8s-binaries.sh builds them)", assets)
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true, BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	user, err := env.AddUser(envtest.User{Name: "agent-test", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	testroot.Write(t, kubeconfig, string(kc))

	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	dis := v1alpha1.Disabled
	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-cmd"}, Spec: v1alpha1.LatencyNodeSpec{
		Action: v1alpha1.ActionApply, Profile: "p", Tuning: v1alpha1.TuningSpec{
			Scheduler:   &v1alpha1.SchedulerSpec{Autogroup: &dis},
			Measurement: &v1alpha1.MeasurementSpec{Interval: &metav1.Duration{Duration: 5 * time.Second}}}}}
	ctx := context.Background()
	if err := c.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}
	root := testroot.New(t, map[string]string{"proc/sys/kernel/sched_autogroup_enabled": "1", "proc/sys/kernel/osrelease": "6.6.8"})

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Main(runCtx, []string{"--node-name=node-cmd", "--host-root=" + root.Dir(), "--kubeconfig=" + kubeconfig, "--resync=500ms", "--health-probe-bind-address=127.0.0.1:0"})
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := c.Get(ctx, types.NamespacedName{Name: "node-cmd"}, ln); err != nil {
			t.Fatal(err)
		}
		applied := meta.IsStatusConditionTrue(ln.Status.Conditions, v1alpha1.NodeApplied)
		budget := meta.FindStatusCondition(ln.Status.Conditions, v1alpha1.NodeWithinBudget)
		if applied && budget != nil {
			t.Logf("WithinBudget: %s %s %q", budget.Status, budget.Reason, budget.Message)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Applied=True and WithinBudget in status: %+v", ln.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := testroot.Read(t, root.Proc("sys", "kernel", "sched_autogroup_enabled")); got != "0" {
		t.Fatalf("autogroup = %s, want 0", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("agent exited with %v", err)
	}
}
