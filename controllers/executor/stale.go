package executor

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
)

// IgnoreStale drops the errors that only mean the cache was behind the API
// server (a conflict on an optimistic lock, a create of something that
// exists): the watch event for the newer object reconciles again.
func IgnoreStale(ctx context.Context, err error) error {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		ctrl.LoggerFrom(ctx).V(1).Info("Retrying on a newer object", "reason", err.Error())
		return StaleError{err}
	}
	return err
}

// StaleError is a write that lost to a newer object. The reconcile is
// retried (controllers' retryStale turns it into a requeue, not an
// error): the newer object's own event may never come to the controller
// (status-only updates of a LatencyNode are filtered out), and at 1000
// nodes 189 spec patches were dropped that way and never retried. Spec
// writes now lose only to spec writes (WriteSpec), but a create or a
// finalizer patch can still.
type StaleError struct{ error }

func (e StaleError) Unwrap() error { return e.error }

// Stale marks err as a write that lost to a newer object.
func Stale(err error) error { return StaleError{err} }
