package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// expectAgent waits until node carries agent label value want ("" none).
func expectAgent(t *testing.T, node, want string) {
	t.Helper()
	eventually(t, fmt.Sprintf("node %s agent %q", node, want), func() error { return agentIs(t, node, want) })
}

func agentIs(t *testing.T, node, want string) error {
	got, ok := getNode(t, node).Labels[v1alpha1.AgentLabel]
	if ok != (want != "") || got != want {
		return fmt.Errorf("node %s: %s = %q (set %v), want %q", node, v1alpha1.AgentLabel, got, ok, want)
	}
	return nil
}

// keepAgent fails unless node keeps agent label want for two sync periods.
func keepAgent(t *testing.T, node, want, why string) {
	t.Helper()
	for end := time.Now().Add(2 * testSyncPeriod); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if err := agentIs(t, node, want); err != nil {
			t.Fatalf("%s: %v", why, err)
		}
	}
}

// setRealtime puts spec.realtime on the profile (rt) or removes it.
func setRealtime(t *testing.T, name string, rt bool) {
	t.Helper()
	p := getProfile(t, name)
	orig := p.DeepCopy()
	p.Spec.Realtime = nil
	if rt {
		p.Spec.Realtime = &v1alpha1.RealtimeSpec{NamespaceSelector: &v1alpha1.NamespaceSelector{}}
		// realtime needs cpus.isolated (the CRD's rule).
		p.Spec.CPUs = &v1alpha1.CPUSpec{Reserved: ptr.To("0"), Isolated: ptr.To("1"), NamespaceSelector: &v1alpha1.NamespaceSelector{}}
	}
	if err := k8s.Patch(context.Background(), p, client.MergeFrom(orig)); err != nil {
		t.Fatalf("setting realtime=%v on %s: %v", rt, name, err)
	}
}

// TestAgentHostPIDPerNode: a realtime profile selecting one node gives
// only that node the hostPID agent; every other node a profile owns keeps
// the standard agent, and a realtime profile selecting no node changes no
// node (before, any realtime stanza turned on hostPID for the whole fleet
// and restarted every agent). Removing realtime moves the node back only
// after its agent reports its threads restored, and the switch is an event
// on the node. A node no profile owns has no agent label, so no agent.
func TestAgentHostPIDPerNode(t *testing.T) {
	needSuite(t)
	createNode(t, "hpn-rt", map[string]string{"tier": "hpn-rt"})
	createNode(t, "hpn-plain", map[string]string{"tier": "hpn-plain"})
	createNode(t, "hpn-none", map[string]string{"tier": "hpn-nothing"})
	createProfile(t, "hpn-rt", 0, map[string]string{"tier": "hpn-rt"})
	createProfile(t, "hpn-plain", 0, map[string]string{"tier": "hpn-plain"})
	createProfile(t, "hpn-empty", 0, map[string]string{"tier": "hpn-nobody"})
	cleanup(t, []string{"hpn-rt", "hpn-plain", "hpn-none"}, []string{"hpn-rt", "hpn-plain", "hpn-empty"})
	expectApplying(t, "hpn-rt", "hpn-rt")
	expectApplying(t, "hpn-plain", "hpn-plain")
	expectAgent(t, "hpn-rt", v1alpha1.AgentStandard)
	expectAgent(t, "hpn-plain", v1alpha1.AgentStandard)

	setRealtime(t, "hpn-empty", true)
	setRealtime(t, "hpn-rt", true)
	expectAgent(t, "hpn-rt", v1alpha1.AgentHostPID)
	expectEvent(t, "hpn-rt", eventAgentHostPID)
	keepAgent(t, "hpn-plain", v1alpha1.AgentStandard, "a node whose profile grants no realtime")
	if err := agentIs(t, "hpn-none", ""); err != nil {
		t.Fatalf("a node no profile owns: %v", err)
	}

	// The agent applied a real-time policy; realtime is then removed.
	thread := v1alpha1.SettingResult{Setting: "rtsched/app/rt-pod/uid-1/4242@1234", Desired: "fifo:40", Actual: "fifo:40",
		State: v1alpha1.SettingApplied}
	refused := v1alpha1.SettingResult{Setting: "rtsched/other/pod/uid-2", Desired: "fifo:10", State: v1alpha1.SettingRefused}
	reportThreads(t, "hpn-rt", 1, thread, refused)
	setRealtime(t, "hpn-rt", false)
	eventually(t, "LatencyNode hpn-rt without realtime", func() error {
		ln, err := getLN("hpn-rt")
		if err != nil {
			return err
		}
		if ln.Spec.Tuning.Realtime != nil {
			return errString("spec still grants realtime")
		}
		return nil
	})
	keepAgent(t, "hpn-rt", v1alpha1.AgentHostPID, "realtime removed while the agent still holds a thread policy")
	reportThreads(t, "hpn-rt", 0, refused)
	expectAgent(t, "hpn-rt", v1alpha1.AgentStandard)
	expectEvent(t, "hpn-rt", eventAgentHostPID) // Withdraw as well; reasons are shared
}

// TestAgentHostPIDOutlastsRevert: a realtime profile deleted keeps the
// hostPID agent on its node while the revert restores the threads, and
// the node loses its agent label (so its agent) only once reverted.
func TestAgentHostPIDOutlastsRevert(t *testing.T) {
	needSuite(t)
	createNode(t, "hpr-1", map[string]string{"tier": "hpr"})
	createProfile(t, "hpr", 0, map[string]string{"tier": "hpr"})
	cleanup(t, []string{"hpr-1"}, []string{"hpr"})
	setRealtime(t, "hpr", true)
	expectApplying(t, "hpr-1", "hpr")
	expectAgent(t, "hpr-1", v1alpha1.AgentHostPID)
	reportThreads(t, "hpr-1", 1)
	if err := k8s.Delete(context.Background(), getProfile(t, "hpr")); err != nil {
		t.Fatal(err)
	}
	expectReverting(t, "hpr-1")
	keepAgent(t, "hpr-1", v1alpha1.AgentHostPID, "reverting a realtime profile")
	reportThreads(t, "hpr-1", 0)
	playAgent(t, "hpr-1", revertedTrue)
	expectReleased(t, "hpr-1")
	expectAgent(t, "hpr-1", "")
}

// reportThreads patches node's LatencyNode status as its agent would: the
// count of thread policies it holds and its settings.
func reportThreads(t *testing.T, node string, held int32, settings ...v1alpha1.SettingResult) {
	t.Helper()
	eventually(t, "agent reports threads on "+node, func() error {
		ln, err := getLN(node)
		if err != nil {
			return err
		}
		patched := ln.DeepCopy()
		patched.Status.HeldThreads = held
		patched.Status.Settings = settings
		return k8s.Status().Patch(context.Background(), patched, client.MergeFromWithOptions(ln, client.MergeFromWithOptimisticLock{}))
	})
}
