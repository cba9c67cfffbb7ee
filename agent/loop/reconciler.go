package loop

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"latencytier.io/latencytier/agent/apply"
	"latencytier.io/latencytier/agent/facts"
	"latencytier.io/latencytier/agent/host"
	"latencytier.io/latencytier/agent/internal/bound"
	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/agent/nri"
	"latencytier.io/latencytier/agent/partition"
	"latencytier.io/latencytier/agent/snapshot"
	"latencytier.io/latencytier/agent/sysctl"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
)

// Reconciler applies this node's LatencyNode.
type Reconciler struct {
	Client   client.Client
	NodeName string
	Root     *host.Root
	Resync   time.Duration
	// Heartbeat is the longest status stays unwritten when nothing
	// material changed; <= 0: DefaultHeartbeat.
	Heartbeat time.Duration
	// Clock says when a pass runs (status.reportedAt, the heartbeat); nil:
	// the real clock.
	Clock  clock.PassiveClock
	Engine *apply.Engine
	// Meter measures beside the loop; nil when measurement is off.
	Meter *Meter
	// Recorder emits events: on the LatencyNode when a status patch is
	// refused, on a pod when its opt-in is refused.
	Recorder events.EventRecorder
	// Observer is told each pass's status and re-asserts; may be nil.
	Observer Observer
	// AllowedSysctlsFile is the admin's sysctl unlock (Options).
	AllowedSysctlsFile string
	// Health is told each pass's progress; may be nil.
	Health *Health
	// Boot reboots the host when the manager asks (boot.go) and the
	// node's own guard allows it (guard.go).
	Boot BootOptions
	// Reader reads what the agent does not watch, directly from the API
	// server: its Node and the reboot slots; nil: Client.
	Reader client.Reader
	// Hook is the agent's NRI plugin; nil without NRI mode.
	Hook RuntimeHook
	// Pods is where the agent learns its node's pods; nil: the API
	// server's, through Client (APIServer mode: the pod informer, watched
	// with podChanged). A RuntimePods is watched through its Changed.
	Pods PodSource

	// refused are the opt-in refusals already told (pod UID/field).
	refused map[string]bool

	// published is the newest measurement window, which status shows
	// (see measure).
	published *measure.Result
	// passFindings are the findings of the running pass before measure
	// adds the window's.
	passFindings []v1alpha1.Finding
	// last is what the newest full pass computed, which a window pass
	// updates with the window (window.go); nil before the first.
	last *lastPass
	// shown is the status the newest pass computed, with the measurement
	// window it showed; before is the newest pass's of the window before
	// that (windowBefore).
	shown, before *windowStatus

	// driftSeen holds each drifted setting for driftHold after it was last
	// found, so a one-pass re-assert is visible to the controller and to
	// kubectl.
	driftSeen map[string]heldDrift
	// findingSeen is when a pass last found each finding type
	// (holdFindings).
	findingSeen map[string]time.Time
	// debugfsNoted keeps a failed debugfs mount to one log line.
	debugfsNoted bool
	// adminFailure is the last error reading AllowedSysctlsFile, logged once.
	adminFailure string
	// patchFailure is the last status patch error reported (log and event),
	// so a patch the API server keeps refusing is reported once.
	patchFailure string
	// rebootRefused is the last reboot refusal reported (log and event),
	// so a request the guard keeps refusing is reported once.
	rebootRefused string
	// ownersFailure is what Detect last could not read, logged once;
	// ownersSeen the other writers it last found (their names).
	ownersFailure, ownersSeen string
	// podsUnknown is why the pod source last could not tell the node's
	// pods, logged once ("" when it could).
	podsUnknown string
	// tier is the tier scheduler's revision and ejection signal (tier.go);
	// nil: no watcher (tests that build a Reconciler by hand).
	tier *tierState
	// own is the agent's last status write (ownStatus).
	own *ownWrite
	// watchNamespaces starts the Namespace watch (namespaceLabels); nil:
	// none to start (tests that build a Reconciler by hand read through
	// Client alone). namespacesWatched says it started.
	watchNamespaces   func() error
	namespacesWatched bool
}

// ownWrite is the agent's last status write: the status it patched and the
// object's resourceVersion the patch was made from.
type ownWrite struct {
	uid    types.UID
	from   string
	status v1alpha1.LatencyNodeStatus
}

// ownStatus gives ln, as the informer's cache holds it, the status this
// agent last wrote when the cache has not caught up with that write (it
// still holds the very object the patch was made from): the agent is the
// status's only writer (the manager's RBAC has no latencynodes/status), so
// that is the status the API server holds. Without it a pass soon after a
// write (a measurement window, the next spec) compared with the status
// before it and wrote the same report again: on a loaded API server, whose
// watch lags seconds, most agents wrote twice for one spec change (issue
// 42: 1.95 agent writes per node at bench-scale's 1000-node change).
func (r *Reconciler) ownStatus(ln *v1alpha1.LatencyNode) {
	if o := r.own; o != nil && o.uid == ln.UID && o.from == ln.ResourceVersion {
		ln.Status = *o.status.DeepCopy()
	}
}

// SetupWithManager watches the LatencyNode named NodeName, the node's pods
// (only changes that matter for opt-in or cgroups: the pod informer's
// events in APIServer mode, the runtime's in Runtime mode), the Meter's
// windows, and enqueues once at start so a journal is restored even when
// no LatencyNode exists. Namespace labels (they grant opt-ins) are
// watched from the first pass whose spec grants by namespace
// (namespaceLabels), not before.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: r.NodeName}}
	toNode := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{req}
	})
	start := source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(req)
		return nil
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("latencynode-agent").
		For(&v1alpha1.LatencyNode{}, builder.WithPredicates(notStatusOnly())).
		WatchesRawSource(start)
	switch src := r.Pods.(type) {
	case nil:
		b = b.Watches(&corev1.Pod{}, toNode, builder.WithPredicates(podChanged()))
	case RuntimePods:
		b = b.WatchesRawSource(signalSource(src.Changed(), req))
	}
	if r.tier != nil {
		b = b.WatchesRawSource(signalSource(r.tier.ejected, req))
	}
	if r.Meter != nil {
		window := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: windowRequest, Name: r.NodeName}}
		toWindow := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{window}
		})
		b = b.WatchesRawSource(source.Channel(r.Meter.events, toWindow))
	}
	c, err := b.Build(r)
	if err != nil {
		return err
	}
	namespaces := source.Kind(mgr.GetCache(), &corev1.Namespace{},
		handler.TypedEnqueueRequestsFromMapFunc(func(context.Context, *corev1.Namespace) []reconcile.Request {
			return []reconcile.Request{req}
		}), predicate.TypedLabelChangedPredicate[*corev1.Namespace]{})
	r.watchNamespaces = func() error { return c.Watch(namespaces) }
	return nil
}

// signalSource enqueues req on every signal of changed, until the
// controller stops.
func signalSource(changed <-chan struct{}, req reconcile.Request) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-changed:
					q.Add(req)
				}
			}
		}()
		return nil
	})
}

// notStatusOnly drops updates of the LatencyNode that change only its
// status: the agent's own report coming back, which ran one more full pass
// (every knob read again) after every report. A new
// spec (generation), metadata (annotations such as when the revision was
// set, labels, deletion) and the informer's resync pass. The next pass
// (a pod, a measurement window, the resync) reads the newest status from
// the cache all the same.
func notStatusOnly() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		if o == nil || n == nil || o.GetResourceVersion() == n.GetResourceVersion() {
			return true
		}
		return o.GetGeneration() != n.GetGeneration() ||
			!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) || !maps.Equal(o.GetLabels(), n.GetLabels()) ||
			o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero()
	}}
}

// Reconcile runs one pass (a window pass for a measurement window's
// request) and tells Health it started and finished.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.Health.progress()
	var res reconcile.Result
	var err error
	if req.Namespace == windowRequest {
		res, err = r.windowPass(ctx, types.NamespacedName{Name: req.Name})
	} else {
		res, err = r.pass(ctx, req)
	}
	r.Health.passed(err == nil)
	return res, err
}

// pass applies or reverts, then patches status when reportDue says so.
func (r *Reconciler) pass(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	again := reconcile.Result{RequeueAfter: r.Resync}
	ln := &v1alpha1.LatencyNode{}
	err := r.Client.Get(ctx, req.NamespacedName, ln)
	if apierrors.IsNotFound(err) {
		r.publish(nil)
		r.revertOrphan(ctx)
		if r.Observer != nil {
			r.Observer.Observed(v1alpha1.LatencyNodeSpec{}, v1alpha1.LatencyNodeStatus{})
		}
		return again, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("get LatencyNode %s: %w", req.Name, err)
	}
	r.ownStatus(ln)
	var st v1alpha1.LatencyNodeStatus
	baseline, current := r.evidence(ln)
	node := snapshot.Read(r.Root, ln.Spec.Tuning) // the one view of the node this pass decides from
	switch ln.Spec.Action {
	case v1alpha1.ActionRevert:
		r.publish(nil)
		st = r.revert(ctx, ln, node)
	case v1alpha1.ActionBaseline:
		r.publish(nil)
		st = r.baseline(ctx, ln, node)
	default:
		st, err = r.apply(ctx, ln, node)
		if err != nil {
			log.Error(err, "Failed to apply the node's tuning")
		}
	}
	r.bootPass(ctx, ln, &st)
	if r.Hook != nil {
		setCondition(&st, hookCondition(r.Hook.State()), ln.Generation, metav1.Now())
	}
	r.last = &lastPass{uid: ln.UID, generation: ln.Generation, measured: ln.Spec.Action != v1alpha1.ActionRevert,
		status: *st.DeepCopy(), findings: slices.Clone(r.passFindings)}
	st.Baseline, st.Current = baseline, current
	return r.report(ctx, ln, st)
}

// report tells the Observer the pass's status st and patches it into
// ln's status when reportDue says so.
func (r *Reconciler) report(ctx context.Context, ln *v1alpha1.LatencyNode, st v1alpha1.LatencyNodeStatus) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	again := reconcile.Result{RequeueAfter: r.Resync}
	if r.Observer != nil {
		r.Observer.Observed(ln.Spec, st)
	}
	now, heartbeat := r.now(), r.heartbeat()
	st.HeartbeatInterval = &metav1.Duration{Duration: heartbeat}
	st.ReportedAt = ln.Status.ReportedAt
	st.Findings = r.holdFindings(ln.Status.Findings, st.Findings, now, findingHold(ln.Spec.Tuning.Measurement))
	due, why := reportDue(ln.Status, r.windowBefore(ln.UID, st), st, ln.Spec, now, nodeHeartbeat(heartbeat, r.NodeName))
	if !due {
		again.RequeueAfter = min(again.RequeueAfter, r.untilHeartbeat(ln.Status, now))
		return again, nil
	}
	orig := ln.DeepCopy()
	ln.Status = reported(st, now, heartbeat)
	ln.Status.Summary = v1alpha1.SummarizeNode(ln.Status)
	if err := r.Client.Status().Patch(ctx, ln, client.MergeFrom(orig)); err != nil {
		r.statusRefused(ctx, orig, err)
		// Not an error for the workqueue: its backoff would grow to
		// minutes and hold drift re-assertion with it. The next pass
		// comes at the resync interval and tries the patch again.
		return again, nil
	}
	r.own = &ownWrite{uid: ln.UID, from: orig.ResourceVersion, status: *ln.Status.DeepCopy()}
	if r.patchFailure != "" {
		log.Info("Patched LatencyNode status again after refusals")
		r.patchFailure = ""
	}
	log.V(1).Info("Patched LatencyNode status", "why", why, "settings", len(st.Settings))
	again.RequeueAfter = min(again.RequeueAfter, nodeHeartbeat(heartbeat, r.NodeName))
	return again, nil
}

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

func (r *Reconciler) heartbeat() time.Duration {
	if r.Heartbeat <= 0 {
		return DefaultHeartbeat
	}
	return r.Heartbeat
}

// untilHeartbeat is how long until written's heartbeat is due (at least a
// second), so a pass comes then even with a resync longer than the
// heartbeat. An overdue heartbeat (its patch refused) waits for the resync,
// as any refused patch does.
func (r *Reconciler) untilHeartbeat(written v1alpha1.LatencyNodeStatus, now time.Time) time.Duration {
	if written.ReportedAt == nil {
		return r.Resync
	}
	if d := written.ReportedAt.Add(nodeHeartbeat(r.heartbeat(), r.NodeName)).Sub(now); d > 0 {
		return max(d, time.Second)
	}
	return r.Resync
}

// statusRefused reports a status patch the API server refused, in the log
// and as a Warning event on the LatencyNode, once per distinct error.
func (r *Reconciler) statusRefused(ctx context.Context, ln *v1alpha1.LatencyNode, err error) {
	log := ctrl.LoggerFrom(ctx)
	if err.Error() == r.patchFailure {
		log.V(1).Info("LatencyNode status patch still refused", "error", err.Error())
		return
	}
	r.patchFailure = err.Error()
	log.Error(err, "Failed to patch LatencyNode status; tuning and drift re-assertion go on", "retryIn", r.Resync.String())
	if r.Recorder != nil {
		r.Recorder.Eventf(ln, nil, corev1.EventTypeWarning, eventStatusRefused, "PatchStatus",
			"the API server refused this node's status (tuning and drift re-assertion go on; retried every %s): %s",
			r.Resync, bound.String(err.Error(), 512))
	}
}

// eventStatusRefused is the reason of the event a refused status patch emits.
const eventStatusRefused = "StatusRefused"

func (r *Reconciler) apply(ctx context.Context, ln *v1alpha1.LatencyNode, node snapshot.Node) (v1alpha1.LatencyNodeStatus, error) {
	log := ctrl.LoggerFrom(ctx)
	pods, err := r.pods(ctx, ln.Spec.Tuning)
	var podsUnknown error
	if errors.Is(err, nri.ErrPodsUnknown) {
		// Node-wide tuning goes on; what pods hold is left as it is and
		// the pass says why no pod is tuned (renderApply).
		podsUnknown, err = err, nil
	}
	r.notePods(ctx, podsUnknown)
	if err != nil {
		return ln.Status, err
	}
	node.Owners = r.owners(ctx, node, pods)
	layout, perr := sysctl.Probe(r.Root, true)
	if perr != nil && !r.debugfsNoted {
		r.debugfsNoted = true
		log.Info("Could not mount debugfs; debugfs scheduler knobs are reported Unsupported", "error", perr.Error())
	}
	if layout.DebugfsMounted {
		log.Info("Mounted debugfs to reach the scheduler knobs", "path", r.Root.Sys("kernel", "debug"))
	}
	staged := stagedArgs(r.Root, ln.Status.Boot) // before the engine unstages what the plan no longer holds
	ds, boot, rep, err := r.renderApply(ctx, ln, node, layout, pods, podsUnknown)
	if err == nil && rep.Written > len(rep.Drifts) && waitsOnWrites(ds.Results) {
		// A setting that had to wait for one of this pass's writes (a
		// slice's cpuset on the controller enabled after a boot) is
		// rendered again now, so the first pass after a boot reports the
		// profile Applied instead of a resync later.
		log.V(1).Info("Rendering again: this pass's writes let waiting settings apply")
		first := rep
		ds, boot, rep, err = r.renderApply(ctx, ln, node, layout, pods, podsUnknown)
		rep = mergeReports(first, rep)
	}
	rep.Results = partition.Explain(rep.Results)
	if len(rep.Held) > 0 {
		log.V(1).Info("Left settings as applied that this pass could not determine", "scopes", ds.Undetermined, "settings", len(rep.Held))
	}
	for _, d := range rep.Drifts {
		log.Info("Re-asserted a setting someone else changed", "setting", d.ID, "ours", d.Ours, "theirs", d.Theirs,
			"likely", culprit(d.ID, ds.IRQBalancePID))
	}
	if rep.Written > 0 {
		log.Info("Applied tuning", "profile", ln.Spec.Profile, "writes", rep.Written)
	}
	r.Health.progress()
	kf := facts.ReadOn(r.Root, node.Cmdline, layout.EEVDF, layout.DebugfsMounted || wasMounted(ln))
	r.Health.progress()
	r.publishGrants(ctx, ln, kf.OnlineCPUs)
	now := metav1.Now()
	reasserted := len(rep.Drifts)
	if r.Observer != nil && reasserted > 0 {
		ids := make([]string, 0, reasserted)
		for _, d := range rep.Drifts {
			ids = append(ids, d.ID)
		}
		r.Observer.Reasserted(ids)
	}
	rep.Drifts = r.drifts(rep.Drifts, now.Time)
	bs := boot.Settle(r.Root, rep.Results)
	if boot.Knob == nil {
		bs = unstaged(r.Root, node.Cmdline, staged, bs)
	}
	st := applyStatus(ln.Status, applyInput{Node: ln, Report: rep, Err: err, Results: ds.Results,
		Kernel: kf, IRQBalancePID: ds.IRQBalancePID, Reasserted: reasserted, Now: now, Boot: &bs})
	st.Isolation = isolation(r.Root, ln.Spec.Tuning.CPUs, kf.CmdlineIsolation, rep.Results, ds.Results)
	r.held(ln, node, ln.Spec.Tuning, ds.Pods, err == nil)
	r.measure(ctx, ln, &st)
	return st, err
}

// notePods logs when the node's pods become unknown (once per reason) and
// known again.
func (r *Reconciler) notePods(ctx context.Context, unknown error) {
	log := ctrl.LoggerFrom(ctx)
	switch {
	case unknown != nil && unknown.Error() != r.podsUnknown:
		r.podsUnknown = unknown.Error()
		log.Error(unknown, "Tuned no pod: the node's pods are unknown; node-wide tuning goes on, pods' settings are left as they are")
	case unknown == nil && r.podsUnknown != "":
		r.podsUnknown = ""
		log.Info("Learned the node's pods again")
	}
}

// isolation accounts for the node's isolation mechanisms, probing
// partitions in the kubepods cgroup kubelet uses here.
func isolation(root *host.Root, cpus *v1alpha1.CPUSpec, cmdline []string, results ...[]v1alpha1.SettingResult) *v1alpha1.IsolationStatus {
	return partition.Account(cpus, partition.Probe(root, partition.Kubepods(root)), cmdline, results...)
}

// adminList reads the admin's sysctl unlock for this pass. Unreadable, it
// unlocks nothing (fail closed: the sysctls it unlocked are reverted).
func (r *Reconciler) adminList(ctx context.Context) knobs.AdminList {
	admin, err := sysctl.ReadAdminList(r.AllowedSysctlsFile)
	if err != nil {
		if err.Error() != r.adminFailure {
			ctrl.LoggerFrom(ctx).Error(err, "Failed to read the admin's sysctl unlock; only the built-in allowlist applies", "file", r.AllowedSysctlsFile)
		}
		r.adminFailure = err.Error()
		return nil
	}
	r.adminFailure = ""
	return admin
}

// wasMounted keeps the debugfsMounted fact once the agent mounted it: later
// passes find it mounted already.
func wasMounted(ln *v1alpha1.LatencyNode) bool {
	return ln.Status.Kernel != nil && ln.Status.Kernel.DebugfsMounted
}
