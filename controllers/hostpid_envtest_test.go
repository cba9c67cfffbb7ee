package controllers

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// expectHostPID waits until the agent DaemonSet exists with hostPID want.
func expectHostPID(t *testing.T, what string, want bool) {
	t.Helper()
	eventually(t, what, func() error { return hostPIDIs(want) })
}

func hostPIDIs(want bool) error {
	ds := &appsv1.DaemonSet{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: testNamespace, Name: agentDaemonSetName}, ds); err != nil {
		return err
	}
	if got := ds.Spec.Template.Spec.HostPID; got != want {
		return fmt.Errorf("agent DaemonSet hostPID = %v, want %v", got, want)
	}
	return nil
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

// TestAgentHostPIDFollowsRealtimeGrant: the agent DaemonSet shares the
// host's pid namespace only while a profile grants realtime (sched_setattr
// names threads by tid in the caller's pid namespace), and a profile being
// deleted keeps it until the profile is gone: its revert restores the
// threads' policies with the same call.
func TestAgentHostPIDFollowsRealtimeGrant(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	createProfile(t, "hp-plain", 0, map[string]string{"tier": "hp-none"})
	createProfile(t, "hp-rt", 0, map[string]string{"tier": "hp-none"})
	cleanup(t, nil, []string{"hp-plain", "hp-rt"})
	expectHostPID(t, "profiles without realtime: no hostPID", false)

	setRealtime(t, "hp-rt", true)
	expectHostPID(t, "realtime granted: hostPID", true)
	expectEvent(t, agentDaemonSetName, eventAgentHostPID)

	setRealtime(t, "hp-rt", false)
	expectHostPID(t, "realtime removed: hostPID withdrawn", false)

	setRealtime(t, "hp-rt", true)
	expectHostPID(t, "realtime granted again: hostPID", true)
	// Hold the profile in deletion with a finalizer of the test's own.
	const hold = "test.latencytier.io/hold"
	if err := editFinalizers(ctx, "hp-rt", func(fs []string) []string { return append(fs, hold) }); err != nil {
		t.Fatal(err)
	}
	// Runs before cleanup's wait for the profile to go (LIFO).
	t.Cleanup(func() { _ = dropFinalizer(ctx, "hp-rt", hold) })
	if err := k8s.Delete(ctx, getProfile(t, "hp-rt")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "hp-rt being deleted", func() error {
		if getProfile(t, "hp-rt").DeletionTimestamp.IsZero() {
			return errString("no deletion timestamp yet")
		}
		return nil
	})
	for end := time.Now().Add(2 * testSyncPeriod); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if err := hostPIDIs(true); err != nil {
			t.Fatalf("while the realtime profile is being deleted (its revert restores thread policies): %v", err)
		}
	}
	if err := dropFinalizer(ctx, "hp-rt", hold); err != nil {
		t.Fatal(err)
	}
	eventually(t, "hp-rt gone", func() error { return gone(&v1alpha1.LatencyProfile{}, "hp-rt") })
	expectHostPID(t, "realtime profile deleted: hostPID withdrawn", false)
}

// dropFinalizer removes finalizer f from profile name, if both are there.
func dropFinalizer(ctx context.Context, name, f string) error {
	return editFinalizers(ctx, name, func(fs []string) []string {
		return slices.DeleteFunc(fs, func(x string) bool { return x == f })
	})
}

// editFinalizers patches profile name's finalizers (nothing when it is
// gone), retrying when the manager patched the profile in between.
func editFinalizers(ctx context.Context, name string, edit func([]string) []string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &v1alpha1.LatencyProfile{}
		if err := k8s.Get(ctx, types.NamespacedName{Name: name}, p); err != nil {
			return client.IgnoreNotFound(err)
		}
		orig := p.DeepCopy()
		p.Finalizers = edit(p.Finalizers)
		return k8s.Patch(ctx, p, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	})
}

// reportThreads patches node's LatencyNode status as its agent would: the
// thread policies it holds (applied, or failed to restore), or none.
func reportThreads(t *testing.T, node string, settings ...v1alpha1.SettingResult) {
	t.Helper()
	eventually(t, "agent reports threads on "+node, func() error {
		ln, err := getLN(node)
		if err != nil {
			return err
		}
		patched := ln.DeepCopy()
		patched.Status.Settings = settings
		return k8s.Status().Patch(context.Background(), patched, client.MergeFromWithOptions(ln, client.MergeFromWithOptimisticLock{}))
	})
}

// TestAgentHostPIDOutlastsHeldThreads: removing spec.realtime must not
// withdraw hostPID while an agent still holds thread policies: restoring
// them needs the host's pid namespace, and withdrawing it restarts the
// agent pods, racing the restore. hostPID goes once the agent reports them
// restored (no thread setting left).
func TestAgentHostPIDOutlastsHeldThreads(t *testing.T) {
	needSuite(t)
	createNode(t, "hpt-1", map[string]string{"tier": "hpt"})
	createProfile(t, "hpt", 0, map[string]string{"tier": "hpt"})
	cleanup(t, []string{"hpt-1"}, []string{"hpt"})
	setRealtime(t, "hpt", true)
	expectHostPID(t, "realtime granted: hostPID", true)
	expectApplying(t, "hpt-1", "hpt")
	thread := v1alpha1.SettingResult{Setting: "rtsched/app/rt-pod/uid-1/4242@1234", Desired: "fifo:50", Actual: "fifo:50",
		State: v1alpha1.SettingApplied}
	// A pod asking from a namespace not granted holds nothing.
	refused := v1alpha1.SettingResult{Setting: "rtsched/other/pod/uid-2", Desired: "fifo:10", State: v1alpha1.SettingRefused}
	reportThreads(t, "hpt-1", thread, refused)

	setRealtime(t, "hpt", false)
	expectApplying(t, "hpt-1", "hpt")
	for end := time.Now().Add(2 * testSyncPeriod); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if err := hostPIDIs(true); err != nil {
			t.Fatalf("realtime removed while the agent still holds a thread policy: %v", err)
		}
	}
	reportThreads(t, "hpt-1", refused)
	expectHostPID(t, "threads restored: hostPID withdrawn", false)
}
