package controllers

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
	"latencytier.io/latencytier/controllers/planner"
)

// The revision's name is the planner's (planner/revision.go): RecordOf
// reads a reboot record's revision back by the same format.
var (
	revisionName    = planner.RevisionName
	currentRevision = planner.CurrentRevision
)

// revisions keeps a profile's tuning history as ControllerRevisions in the
// manager's namespace, owned by the profile (garbage-collected with it):
// it reads them, the planner decides what to store and what to prune, and
// the executor writes.
type revisions struct {
	Reader    client.Reader
	Exec      *executor.Executor
	Namespace string
}

// ensure makes sure p's current tuning is stored as the newest revision and
// returns p's revisions by name.
func (r revisions) ensure(ctx context.Context, p *v1alpha1.LatencyProfile) (map[string]*appsv1.ControllerRevision, error) {
	owned, err := r.list(ctx, p)
	if err != nil {
		return nil, err
	}
	step := planner.StoreRevision(currentRevision(p), numbers(owned))
	switch {
	case step.Create:
		cr, err := planner.NewRevision(p, r.Namespace, step.Name, step.Number)
		if err != nil {
			return nil, err
		}
		if cr, err = r.Exec.CreateRevision(ctx, cr); err != nil {
			return nil, err
		}
		ctrl.LoggerFrom(ctx).Info("Created revision", "revision", step.Name, "number", cr.Revision)
		owned[step.Name] = cr
	case step.Renumber:
		cr, err := r.Exec.RenumberRevision(ctx, owned[step.Name], step.Number)
		if err != nil {
			return nil, err
		}
		owned[step.Name] = cr
	}
	return owned, nil
}

func (r revisions) list(ctx context.Context, p *v1alpha1.LatencyProfile) (map[string]*appsv1.ControllerRevision, error) {
	var list appsv1.ControllerRevisionList
	if err := r.Reader.List(ctx, &list, client.InNamespace(r.Namespace)); err != nil {
		return nil, fmt.Errorf("listing revisions: %w", err)
	}
	owned := map[string]*appsv1.ControllerRevision{}
	for i := range list.Items {
		if metav1.IsControlledBy(&list.Items[i], p) {
			owned[list.Items[i].Name] = &list.Items[i]
		}
	}
	return owned, nil
}

// prune deletes the revisions planner.PruneRevisions names: the oldest
// beyond planner.RevisionHistoryLimit, never one in keep.
func (r revisions) prune(ctx context.Context, owned map[string]*appsv1.ControllerRevision, keep map[string]bool) error {
	for _, name := range planner.PruneRevisions(numbers(owned), keep, planner.RevisionHistoryLimit) {
		if err := r.Exec.DeleteRevision(ctx, owned[name]); err != nil {
			return err
		}
		delete(owned, name)
	}
	return nil
}

// numbers is each revision's number by name.
func numbers(owned map[string]*appsv1.ControllerRevision) map[string]int64 {
	n := make(map[string]int64, len(owned))
	for name, cr := range owned {
		n[name] = cr.Revision
	}
	return n
}

// tuningOf decodes the tuning stored in a revision.
func tuningOf(cr *appsv1.ControllerRevision) (v1alpha1.TuningSpec, error) {
	var t v1alpha1.TuningSpec
	if err := json.Unmarshal(cr.Data.Raw, &t); err != nil {
		return t, fmt.Errorf("decoding revision %s: %w", cr.Name, err)
	}
	return t, nil
}
