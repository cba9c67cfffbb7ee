package executor

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// WriteProfileStatus is the one writer of a profile's status (field
// manager ManagerProfileStatus): a merge patch from p to st carrying the
// resourceVersion p was read at. The profile's pass calls it once at most.
func (e *Executor) WriteProfileStatus(ctx context.Context, p *v1alpha1.LatencyProfile, st v1alpha1.LatencyProfileStatus) (*v1alpha1.LatencyProfile, error) {
	patched := p.DeepCopy()
	patched.Status = st
	err := e.Client.Status().Patch(ctx, patched, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{}),
		client.FieldOwner(ManagerProfileStatus))
	if err != nil {
		return nil, IgnoreStale(ctx, fmt.Errorf("patching status: %w", err))
	}
	return patched, nil
}

// PatchFinalizer is the one writer of a profile's finalizers (field
// manager ManagerProfileFinalizer): a merge patch from p to patched that
// carries only metadata.finalizers and the resourceVersion p was read at.
func (e *Executor) PatchFinalizer(ctx context.Context, p, patched *v1alpha1.LatencyProfile) error {
	if err := e.Client.Patch(ctx, patched, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{}),
		client.FieldOwner(ManagerProfileFinalizer)); err != nil {
		return IgnoreStale(ctx, fmt.Errorf("patching finalizer: %w", err))
	}
	return nil
}
