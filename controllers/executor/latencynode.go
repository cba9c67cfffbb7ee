package executor

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// CreateLatencyNode creates ln (field manager ManagerLatencyNode, the
// writer of its spec). One that exists already is a StaleError: the
// cache was behind.
func (e *Executor) CreateLatencyNode(ctx context.Context, ln *v1alpha1.LatencyNode) error {
	if err := e.Client.Create(ctx, ln, client.FieldOwner(ManagerLatencyNode)); err != nil {
		return IgnoreStale(ctx, fmt.Errorf("creating LatencyNode: %w", err))
	}
	return nil
}

// DeleteLatencyNode deletes ln, the object read and no other of its name
// (a UID precondition); one already gone is no error.
func (e *Executor) DeleteLatencyNode(ctx context.Context, ln *v1alpha1.LatencyNode) error {
	return client.IgnoreNotFound(e.Client.Delete(ctx, ln, client.Preconditions{UID: &ln.UID}))
}
