package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
	"latencytier.io/latencytier/controllers/planner"
)

// revisionHistoryLimit is how many ControllerRevisions a profile keeps
// (besides the ones a node or the rollout still refers to).
const revisionHistoryLimit = 10

// The revision's name is the planner's (planner/revision.go): RecordOf
// reads a reboot record's revision back by the same format.
var (
	revisionName    = planner.RevisionName
	currentRevision = planner.CurrentRevision
)

// revisions keeps a profile's tuning history as ControllerRevisions in the
// manager's namespace, owned by the profile (garbage-collected with it).
type revisions struct {
	client.Client
	Namespace string
}

// ensure makes sure p's current tuning is stored as the newest revision and
// returns p's revisions by name.
func (r revisions) ensure(ctx context.Context, p *v1alpha1.LatencyProfile) (map[string]*appsv1.ControllerRevision, error) {
	owned, err := r.list(ctx, p)
	if err != nil {
		return nil, err
	}
	name := currentRevision(p)
	newest := int64(0)
	for _, cr := range owned {
		newest = max(newest, cr.Revision)
	}
	cr, ok := owned[name]
	switch {
	case !ok:
		cr, err = r.create(ctx, p, name, newest+1)
		if err != nil {
			return nil, err
		}
		owned[name] = cr
	case cr.Revision < newest:
		// The tuning went back to an earlier one: it becomes the newest.
		patched := cr.DeepCopy()
		patched.Revision = newest + 1
		if err := r.Patch(ctx, patched, client.MergeFromWithOptions(cr, client.MergeFromWithOptimisticLock{}), client.FieldOwner(executor.ManagerRevisions)); err != nil {
			return nil, fmt.Errorf("renumbering revision %s: %w", name, err)
		}
		owned[name] = patched
	}
	return owned, nil
}

func (r revisions) list(ctx context.Context, p *v1alpha1.LatencyProfile) (map[string]*appsv1.ControllerRevision, error) {
	var list appsv1.ControllerRevisionList
	if err := r.List(ctx, &list, client.InNamespace(r.Namespace)); err != nil {
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

func (r revisions) create(ctx context.Context, p *v1alpha1.LatencyProfile, name string, number int64) (*appsv1.ControllerRevision, error) {
	raw, err := json.Marshal(planner.NodeTuning(&p.Spec.TuningSpec))
	if err != nil {
		return nil, fmt.Errorf("encoding tuning: %w", err)
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: r.Namespace,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "LatencyProfile",
				Name: p.Name, UID: p.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: number,
	}
	if err := r.Create(ctx, cr, client.FieldOwner(executor.ManagerRevisions)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// The cache was behind: read the stored one.
			got := &appsv1.ControllerRevision{}
			return got, r.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: name}, got)
		}
		return nil, fmt.Errorf("creating revision %s: %w", name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Created revision", "revision", name, "number", number)
	return cr, nil
}

// prune deletes the oldest revisions beyond revisionHistoryLimit, never one
// in keep (the target, the rollback target, those nodes hold).
func (r revisions) prune(ctx context.Context, owned map[string]*appsv1.ControllerRevision, keep map[string]bool) error {
	if len(owned) <= revisionHistoryLimit {
		return nil
	}
	all := make([]*appsv1.ControllerRevision, 0, len(owned))
	for _, cr := range owned {
		all = append(all, cr)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Revision < all[j].Revision })
	extra := len(all) - revisionHistoryLimit
	for _, cr := range all {
		if extra == 0 {
			break
		}
		if keep[cr.Name] {
			continue
		}
		if err := r.Delete(ctx, cr, client.Preconditions{UID: &cr.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting revision %s: %w", cr.Name, err)
		}
		delete(owned, cr.Name)
		extra--
	}
	return nil
}

// tuningOf decodes the tuning stored in a revision.
func tuningOf(cr *appsv1.ControllerRevision) (v1alpha1.TuningSpec, error) {
	var t v1alpha1.TuningSpec
	if err := json.Unmarshal(cr.Data.Raw, &t); err != nil {
		return t, fmt.Errorf("decoding revision %s: %w", cr.Name, err)
	}
	return t, nil
}
