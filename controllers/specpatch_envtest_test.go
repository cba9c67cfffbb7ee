package controllers

import (
	"context"
	"errors"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
)

// TestSpecWriteSurvivesStatusWrites: the manager writes a LatencyNode's
// spec from its cache while the node's agent writes status every interval.
// A status write between the two must not cost the spec write (an
// optimistic lock on resourceVersion lost a quarter of the spec patches of
// a profile change at 1000 nodes), and a spec written by someone else
// since must still stop it (a StaleError, so the reconcile runs again).
func TestSpecWriteSurvivesStatusWrites(t *testing.T) {
	const node, profile = "specwrite-1", "specwrite"
	createProfile(t, profile, 0, map[string]string{"tier": profile})
	createNode(t, node, map[string]string{"tier": profile})
	t.Cleanup(func() { cleanup(t, []string{node}, []string{profile}) })
	read := expectApplying(t, node, profile)

	playAgent(t, node) // the agent reports: resourceVersion moves, generation does not
	ctx := context.Background()
	want := *read.Spec.DeepCopy()
	if _, err := executor.New(k8s, k8s).WriteSpec(ctx, read, want, time.Now(), true); err != nil {
		t.Fatalf("spec write from before the agent's status write: %v", err)
	}
	got, err := getLN(node)
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations[v1alpha1.RevisionSetAtAnnotation] == "" || got.Status.ObservedGeneration != read.Generation {
		t.Fatalf("after the write: annotations %v, status.observedGeneration %d (the agent's report must stay)",
			got.Annotations, got.Status.ObservedGeneration)
	}

	// Someone writes the spec: the write from the old read must not land.
	moved := got.DeepCopy()
	moved.Spec.ProfileGeneration += 100
	if err := k8s.Patch(ctx, moved, client.MergeFrom(got)); err != nil {
		t.Fatal(err)
	}
	if moved.Generation == read.Generation {
		t.Fatalf("generation did not move (%d)", moved.Generation)
	}
	stale := want
	stale.Revision = "from-an-old-read"
	_, err = executor.New(k8s, k8s).WriteSpec(ctx, read, stale, time.Now(), false)
	if !errors.As(err, new(executor.StaleError)) {
		t.Fatalf("spec write over a newer spec: err = %v, want a StaleError", err)
	}
	if now, _ := getLN(node); now.Spec.Revision == "from-an-old-read" {
		t.Fatalf("the stale spec landed: %+v", now.Spec)
	}
	// A spec the API server finds invalid is an error, not a lost race
	// (the manager is putting the spec back meanwhile: a write that lost
	// to it is tried again on a fresh read).
	for try := 0; ; try++ {
		fresh, err := getLN(node)
		if err != nil {
			t.Fatal(err)
		}
		bad := *fresh.Spec.DeepCopy()
		bad.Action = "Explode"
		_, err = executor.New(k8s, k8s).WriteSpec(ctx, fresh, bad, time.Now(), false)
		if errors.As(err, new(executor.StaleError)) && try < 20 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if err == nil || errors.As(err, new(executor.StaleError)) {
			t.Fatalf("invalid spec: err = %v, want an error that is not a StaleError", err)
		}
		break
	}
}
