package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// specPatch is a JSON patch that replaces ln's spec only if the spec is
// still the one the manager read: it tests metadata.generation, which only
// a spec write moves, where an optimistic lock (resourceVersion) would
// also lose to every status write. An agent reports every interval, and at
// 1000 nodes a quarter of the spec patches of a profile change lost that
// way and went round again. stamp, when set, also records in the
// RevisionSetAtAnnotation when the spec changed.
func specPatch(ln *v1alpha1.LatencyNode, spec v1alpha1.LatencyNodeSpec, stamp string) (client.Patch, error) {
	ops := []jsonOp{
		{Op: "test", Path: "/metadata/generation", Value: ln.Generation},
		{Op: "add", Path: "/spec", Value: spec},
	}
	if stamp != "" {
		if ln.Annotations == nil {
			ops = append(ops, jsonOp{Op: "add", Path: "/metadata/annotations",
				Value: map[string]string{v1alpha1.RevisionSetAtAnnotation: stamp}})
		} else {
			ops = append(ops, jsonOp{Op: "add", Path: "/metadata/annotations/" + pointerEscape(v1alpha1.RevisionSetAtAnnotation), Value: stamp})
		}
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	return client.RawPatch(types.JSONPatchType, raw), nil
}

// jsonOp is one RFC 6902 operation.
type jsonOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// pointerEscape escapes a key for a JSON pointer (RFC 6901).
func pointerEscape(key string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// WriteSpec replaces ln's spec with spec (stamping the change when stamp
// is set), carrying ln's reboot record over: WriteLatencyNodeSpec.
func (e *Executor) WriteSpec(ctx context.Context, ln *v1alpha1.LatencyNode, spec v1alpha1.LatencyNodeSpec, now time.Time, stamp bool) (int64, error) {
	w := SpecWrite{Spec: spec}
	if stamp {
		w.Stamp = now
	}
	return e.WriteLatencyNodeSpec(ctx, ln, w)
}

// SpecWrite is one write of a LatencyNode's spec.
type SpecWrite struct {
	Spec v1alpha1.LatencyNodeSpec
	// Stamp, when set, records in the RevisionSetAtAnnotation when the
	// spec changed (the rollout's verification clock).
	Stamp time.Time
	// Record: Spec.Reboot is the reboot record to write (nil clears it).
	// Otherwise ln's record is carried over: the record is the managed
	// reboots' (controllers/reboot_act.go), only they set or clear it.
	Record bool
}

// WriteLatencyNodeSpec is the one writer of a LatencyNode's spec (and its
// revision-set-at annotation), field manager ManagerLatencyNode: it
// replaces ln's spec with w's unless someone wrote the spec since ln was
// read: then the error is a StaleError and the reconcile runs again on
// the newer object. It returns the generation the write gave ln.
func (e *Executor) WriteLatencyNodeSpec(ctx context.Context, ln *v1alpha1.LatencyNode, w SpecWrite) (int64, error) {
	spec := w.Spec
	if !w.Record {
		spec.Reboot = ln.Spec.Reboot
	}
	var at string
	if !w.Stamp.IsZero() {
		at = w.Stamp.UTC().Format(time.RFC3339)
	}
	patch, err := specPatch(ln, spec, at)
	if err != nil {
		return 0, err
	}
	written := ln.DeepCopy()
	if err := e.Client.Patch(ctx, written, patch, client.FieldOwner(ManagerLatencyNode)); err != nil {
		if specMoved(err) {
			return 0, StaleError{fmt.Errorf("patching LatencyNode %s spec: written since generation %d: %w", ln.Name, ln.Generation, err)}
		}
		return 0, IgnoreStale(ctx, fmt.Errorf("patching LatencyNode %s spec: %w", ln.Name, err))
	}
	return written.Generation, nil
}

// specMoved reports whether err is the API server refusing a specPatch
// because an operation did not apply: the generation test failed (someone
// wrote the spec since), or the annotations the stamp goes into are gone.
// The API server says so with a bare 422 (no causes, no detail); a spec it
// finds invalid comes back as 422 with the field's cause.
func specMoved(err error) bool {
	var se apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &se) {
		return false
	}
	d := se.Status().Details
	return d == nil || len(d.Causes) == 0
}
