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

// TestProfileStatusPatchesDoNotReconcileNodes: a LatencyProfile's status
// changes on every node report during a rollout; its pass looks at each of
// its nodes (cheaply, from the cache, uncopied) but must not decide every
// node afresh on each of them (O(N²) reads and copies for N nodes), yet a
// spec change must still reach every node.
func TestProfileStatusPatchesDoNotReconcileNodes(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	nodes := []string{"watch-1", "watch-2", "watch-3", "watch-4"}
	for _, n := range nodes {
		createNode(t, n, map[string]string{"tier": "watch"})
	}
	createProfile(t, "watch", 0, map[string]string{"tier": "watch"})
	cleanup(t, nodes, []string{"watch"})
	for _, n := range nodes {
		expectApplying(t, n, "watch")
	}
	settle(t)

	const patches = 20
	before := decisionsOf(nodes)
	start := time.Now()
	for i := range patches {
		bogus := int32(1000 + i)
		patchProfileStatus(t, ctx, "watch", bogus)
		// Let each event be handled on its own: wait for the profile
		// controller to write its own count back.
		eventually(t, "profile controller restored status.matched", func() error {
			if m := getProfile(t, "watch").Status.Matched; m == bogus {
				return fmt.Errorf("status.matched still %d", m)
			}
			return nil
		})
	}
	elapsed := time.Since(start)
	after := decisionsOf(nodes)
	// The informers resync once per sync period, and a resync may decide
	// the node again; nothing else may. Two
	// more periods for resyncs straddling the ends of the window and for
	// the truncated one (a CI run under a loaded `go test ./...` counted
	// 43 against 42 allowed; a reconcile per patch would add 20).
	allowed := 2 * (int64(elapsed/testSyncPeriod) + 3)
	t.Logf("%d status patches over %s: node decisions %v -> %v (allowed %d each)",
		patches, elapsed.Round(time.Millisecond), before, after, allowed)
	for _, n := range nodes {
		if got := after[n] - before[n]; got > allowed {
			t.Errorf("node %s decided %d times during %d profile status patches over %s (resyncs explain %d)",
				n, got, patches, elapsed.Round(time.Millisecond), allowed)
		}
	}

	p := getProfile(t, "watch")
	patched := p.DeepCopy()
	patched.Spec.Scheduler.Autogroup = ptr.To(v1alpha1.Enabled)
	if err := k8s.Patch(ctx, patched, client.MergeFrom(p)); err != nil {
		t.Fatal(err)
	}
	want := patched.Generation // the server's answer: the new generation
	if want == p.Generation {
		t.Fatalf("a spec patch left the generation at %d", want)
	}
	for _, n := range nodes {
		eventually(t, n+" applies the new generation", func() error {
			ln, err := getLN(n)
			if err != nil {
				return err
			}
			if ln.Spec.ProfileGeneration != want {
				return fmt.Errorf("profileGeneration = %d, want %d", ln.Spec.ProfileGeneration, want)
			}
			return nil
		})
	}
}

func decisionsOf(nodes []string) map[string]int64 {
	out := make(map[string]int64, len(nodes))
	for _, n := range nodes {
		out[n] = nodeDecisions(n)
	}
	return out
}

func reconcilesOf(nodes []string) map[string]int64 {
	out := make(map[string]int64, len(nodes))
	for _, n := range nodes {
		out[n] = nodeReconciles(n)
	}
	return out
}

// patchProfileStatus writes a status field as a status-only update; the
// profile controller writes its own value back, a second status-only update.
func patchProfileStatus(t testing.TB, ctx context.Context, name string, matched int32) {
	t.Helper()
	p := getProfile(t, name)
	patched := p.DeepCopy()
	patched.Status.Matched = matched
	if err := k8s.Status().Patch(ctx, patched, client.MergeFrom(p)); err != nil {
		t.Fatalf("patching profile status: %v", err)
	}
	if p.Generation != getProfile(t, name).Generation {
		t.Fatalf("a status patch changed the profile's generation")
	}
}
