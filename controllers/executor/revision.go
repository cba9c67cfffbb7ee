package executor

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CreateRevision is the one writer of a new ControllerRevision (a
// profile's tuning, built by planner.NewRevision). When the cache was
// behind and it exists already, the stored one is read and returned.
func (e *Executor) CreateRevision(ctx context.Context, cr *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	err := e.Client.Create(ctx, cr, client.FieldOwner(ManagerRevisions))
	if apierrors.IsAlreadyExists(err) {
		got := &appsv1.ControllerRevision{}
		return got, e.live().Get(ctx, types.NamespacedName{Namespace: cr.Namespace, Name: cr.Name}, got)
	}
	if err != nil {
		return nil, fmt.Errorf("creating revision %s: %w", cr.Name, err)
	}
	return cr, nil
}

// RenumberRevision makes cr the newest revision, number (a profile's
// tuning went back to an earlier one), under an optimistic lock.
func (e *Executor) RenumberRevision(ctx context.Context, cr *appsv1.ControllerRevision, number int64) (*appsv1.ControllerRevision, error) {
	patched := cr.DeepCopy()
	patched.Revision = number
	if err := e.Client.Patch(ctx, patched, client.MergeFromWithOptions(cr, client.MergeFromWithOptimisticLock{}),
		client.FieldOwner(ManagerRevisions)); err != nil {
		return nil, fmt.Errorf("renumbering revision %s: %w", cr.Name, err)
	}
	return patched, nil
}

// DeleteRevision deletes cr, the one it was given (a UID precondition): a
// revision already gone is not an error.
func (e *Executor) DeleteRevision(ctx context.Context, cr *appsv1.ControllerRevision) error {
	if err := e.Client.Delete(ctx, cr, client.Preconditions{UID: &cr.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting revision %s: %w", cr.Name, err)
	}
	return nil
}
