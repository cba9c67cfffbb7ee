package loop

import (
	"context"
	"fmt"
	"sync/atomic"

	ctrl "sigs.k8s.io/controller-runtime"

	"latencytier.io/latencytier/agent/desired"
	"latencytier.io/latencytier/agent/tiersched"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// tierState is the reconciler's side of the tier scheduler
// (agent/tiersched): the revision a pass last asked for it at, which the
// watcher records in an ejection's marker, the signal the watcher sends
// after one, which enqueues a pass, and whether the last pass wanted the
// scheduler, with the wake that starts the watcher when it does.
type tierState struct {
	revision atomic.Pointer[string]
	ejected  chan struct{}
	wanted   atomic.Bool
	wake     chan struct{}
}

func newTierState() *tierState {
	return &tierState{ejected: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
}

// want records whether a pass wants the tier scheduler and, when it
// does, wakes the watcher (before the pass loads it). A Reconciler built
// by hand has no tierState and no watcher.
func (t *tierState) want(w bool) {
	if t == nil {
		return
	}
	t.wanted.Store(w)
	if w {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

func (t *tierState) currentRevision() string {
	if p := t.revision.Load(); p != nil {
		return *p
	}
	return ""
}

func (t *tierState) signal(*tiersched.Exit) {
	select {
	case t.ejected <- struct{}{}:
	default:
	}
}

// schedulerClass is spec.scheduler.class, nil when unset.
func schedulerClass(t v1alpha1.TuningSpec) *v1alpha1.SchedulerClass {
	if t.Scheduler == nil {
		return nil
	}
	return t.Scheduler.Class
}

// tierClass adds the pass's scheduler/class to ds (tiersched.Desire): the
// knob, or the result standing for it (Fallback after an ejection at this
// revision, Unsupported while a pod keeps a CPU limit). With the node's pods
// unknown this pass, the class is neither loaded nor unloaded (its limits
// check needs them).
func (r *Reconciler) tierClass(ln *v1alpha1.LatencyNode, ds *desired.State, podsUnknown error) {
	class := schedulerClass(ln.Spec.Tuning)
	r.tier.want(class != nil && *class == v1alpha1.SchedulerClassTier)
	if class == nil {
		_, _, _ = tiersched.Desire(r.Root, nil, ln.Spec.Revision, nil) // clears a stale marker
		return
	}
	rev := ln.Spec.Revision
	r.tier.revision.Store(&rev)
	if podsUnknown != nil && *class == v1alpha1.SchedulerClassTier {
		ds.Undetermined = append(ds.Undetermined, tiersched.SettingID)
		return
	}
	k, res, err := tiersched.Desire(r.Root, class, rev, ds.Pods)
	if err != nil {
		res = append(res, v1alpha1.SettingResult{Setting: tiersched.SettingID, Desired: string(*class), State: v1alpha1.SettingFailed, Message: err.Error()})
	}
	ds.Knobs = append(ds.Knobs, k...)
	ds.Results = append(ds.Results, res...)
}

// syncGranted gives the attached tier scheduler the granted pods' cgroups
// of this pass (a no-op when none is pinned); a failure is a note for the
// log: the scheduler runs on with the previous set.
func (r *Reconciler) syncGranted(ctx context.Context, ln *v1alpha1.LatencyNode, ds desired.State) {
	if c := schedulerClass(ln.Spec.Tuning); c == nil || *c != v1alpha1.SchedulerClassTier {
		return
	}
	ids, err := tiersched.CgroupIDs(r.Root, ds.Pods)
	if err == nil {
		err = tiersched.SyncGranted(r.Root, ids)
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("Gave the tier scheduler part of the granted pods", "reason", fmt.Sprint(err))
	}
}
