package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
	"latencytier.io/latencytier/controllers/planner"
)

// TestRevisionsRenumberAndPrune drives a profile's revision history
// against the API server through the executor: each new tuning is stored
// as the newest, a tuning gone back to is renumbered the newest (not
// stored twice), the history is pruned to planner.RevisionHistoryLimit
// without the revisions kept, and every write is the revisions' field
// manager's.
func TestRevisionsRenumberAndPrune(t *testing.T) {
	ctx := context.Background()
	p := &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "revtest", UID: types.UID("revtest-uid")}}
	r := revisions{Reader: k8s, Exec: executor.New(k8s, nil), Namespace: testNamespace}
	t.Cleanup(func() {
		owned, _ := r.list(ctx, p)
		for _, cr := range owned {
			_ = k8s.Delete(ctx, cr)
		}
	})
	tune := func(ms int) string {
		p.Spec.Scheduler = &v1alpha1.SchedulerSpec{MigrationCost: &metav1.Duration{Duration: time.Duration(ms) * time.Millisecond}}
		owned, err := r.ensure(ctx, p)
		if err != nil {
			t.Fatalf("ensure at %d ms: %v", ms, err)
		}
		name := currentRevision(p)
		if owned[name] == nil {
			t.Fatalf("ensure at %d ms returned no revision %s", ms, name)
		}
		return name
	}
	a := tune(1)
	b := tune(2)
	if again := tune(1); again != a {
		t.Fatalf("the same tuning named %s, then %s", a, again)
	}
	stored := func() map[string]int64 {
		t.Helper()
		var got map[string]int64
		eventually(t, "the revisions listed from the API server", func() error {
			var list appsv1.ControllerRevisionList
			if err := k8s.List(ctx, &list, client.InNamespace(testNamespace)); err != nil {
				return err
			}
			got = map[string]int64{}
			for i := range list.Items {
				if metav1.IsControlledBy(&list.Items[i], p) {
					got[list.Items[i].Name] = list.Items[i].Revision
					for _, m := range list.Items[i].ManagedFields {
						if m.Manager != executor.ManagerRevisions {
							return fmt.Errorf("revision %s has field manager %s, want only %s", list.Items[i].Name, m.Manager, executor.ManagerRevisions)
						}
					}
				}
			}
			return nil
		})
		return got
	}
	if got := stored(); len(got) != 2 || got[b] != 2 || got[a] != 3 {
		t.Fatalf("after tunings 1, 2, 1 ms: revisions %v, want %s #2 and %s renumbered #3", got, b, a)
	}
	for ms := 3; ms <= 13; ms++ {
		tune(ms)
	}
	owned, err := r.list(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(owned) != 13 {
		t.Fatalf("13 tunings stored %d revisions", len(owned))
	}
	if err := r.prune(ctx, owned, map[string]bool{a: true}); err != nil {
		t.Fatal(err)
	}
	got := stored()
	if len(got) != planner.RevisionHistoryLimit || got[a] != 3 {
		t.Fatalf("pruned to %v, want %d revisions with the kept %s (#3)", got, planner.RevisionHistoryLimit, a)
	}
	if _, ok := got[b]; ok {
		t.Errorf("pruned to %v: the oldest, %s (#2), is still there", got, b)
	}
}
