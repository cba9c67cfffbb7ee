package controllers

import (
	"context"
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"latencytier.io/latencytier/controllers/executor"
)

// TestLostWriteIsRetried: a write that loses to a newer object (409, or
// 409-like AlreadyExists) is retried by requeueing the request, not
// dropped in the hope that the newer object's event comes back. At 1000
// simulated nodes 189 LatencyNode spec patches conflicted with agents'
// status writes, whose events the node controller filters out, and those
// nodes never got the new spec. Other errors still count as errors.
func TestLostWriteIsRetried(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "tuning.latencytier.io", Resource: "latencynodes"}, "n1", errors.New("the object has been modified"))
	for _, tc := range []struct {
		name    string
		err     error
		requeue bool
		failed  bool
	}{
		{"conflict", conflict, true, false},
		{"already exists", apierrors.NewAlreadyExists(schema.GroupResource{Resource: "latencynodes"}, "n1"), true, false},
		{"other error", errors.New("boom"), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := retryStale(reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
				return reconcile.Result{}, executor.IgnoreStale(ctx, fmt.Errorf("patching LatencyNode spec: %w", tc.err))
			}))
			res, err := r.Reconcile(context.Background(), reconcile.Request{})
			if got := res.RequeueAfter > 0 && err == nil; got != tc.requeue {
				t.Errorf("result %+v, err %v: want requeued without an error = %v", res, err, tc.requeue)
			}
			if (err != nil) != tc.failed {
				t.Errorf("err = %v, want an error = %v", err, tc.failed)
			}
		})
	}
}
