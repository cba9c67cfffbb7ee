package controllers

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/planner"
	"latencytier.io/latencytier/internal/uninstall"
)

// TestUninstallRevertsEveryNode: "latencytier uninstall" (the chart's
// pre-delete hook, make undeploy's first step) deletes every profile and
// returns only once the manager reverted and released every node: no
// profile stuck on its finalizer, no LatencyNode, no profile or agent
// label left. Without an agent answering it gives up at its timeout with
// ErrStuck, naming what is left. Before it, make undeploy deleted the CRDs
// and the manager in one step and left the finalizers to nobody.
func TestUninstallRevertsEveryNode(t *testing.T) {
	needSuite(t)
	createNode(t, "uninst-1", map[string]string{"tier": "uninst"})
	createProfile(t, "uninst", 0, map[string]string{"tier": "uninst"})
	cleanup(t, []string{"uninst-1"}, []string{"uninst"})
	expectApplying(t, "uninst-1", "uninst")
	expectAgent(t, "uninst-1", v1alpha1.AgentStandard)
	eventually(t, "uninst-1 tainted until tuned", func() error {
		if !hasTaint(getNode(t, "uninst-1").Spec.Taints, pendingTaint) {
			return errString("no tuning-pending taint")
		}
		return nil
	})
	// And contended, with the opt-in: the contention taint too.
	patchContention(t, "uninst", map[string]any{"taint": "PreferNoSchedule"})
	playAgent(t, "uninst-1", contention(metav1.ConditionTrue))
	expectTainted(t, []string{"uninst-1"}, 1, "uninst-1")

	// The command's own client (its scheme: a Node list failed with "no
	// kind is registered" when it held only our kinds, and the chart's
	// pre-delete hook failed in make test-e2e).
	uc, err := client.New(testEnv.Config, client.Options{Scheme: uninstall.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// No agent answers the revert: uninstall gives up, naming the node.
	var out bytes.Buffer
	err = uninstall.Run(context.Background(), uc, uninstall.Options{Timeout: 2 * time.Second, Poll: 100 * time.Millisecond, Out: &out})
	if !errors.Is(err, uninstall.ErrStuck) || !strings.Contains(err.Error(), "uninst-1") {
		t.Fatalf("uninstall without an agent: err = %v, want ErrStuck naming uninst-1\n%s", err, out.String())
	}
	expectReverting(t, "uninst-1")

	done := make(chan error, 1)
	go func() {
		done <- uninstall.Run(context.Background(), uc, uninstall.Options{Timeout: time.Minute, Poll: 100 * time.Millisecond, Out: &out})
	}()
	playAgent(t, "uninst-1", revertedTrue)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("uninstall: %v\n%s", err, out.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("uninstall did not return\n%s", out.String())
	}
	// Everything is gone when it returns, not eventually.
	if err := gone(&v1alpha1.LatencyProfile{}, "uninst"); err != nil {
		t.Fatalf("profile after uninstall: %v", err)
	}
	if err := gone(&v1alpha1.LatencyNode{}, "uninst-1"); err != nil {
		t.Fatalf("LatencyNode after uninstall: %v", err)
	}
	if err := agentIs(t, "uninst-1", ""); err != nil {
		t.Fatalf("after uninstall: %v", err)
	}
	if taints := getNode(t, "uninst-1").Spec.Taints; hasTaint(taints, pendingTaint) || hasTaint(taints, planner.ContentionTaint) {
		t.Fatalf("a taint of ours is still on uninst-1 after uninstall: %v", taints)
	}
	if !strings.Contains(out.String(), "every node reverted") {
		t.Errorf("no final progress line:\n%s", out.String())
	}
}
