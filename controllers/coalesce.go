package controllers

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"latencytier.io/latencytier/api/v1alpha1"
)

// Every agent reports into its LatencyNode's status on each measurement
// interval; a profile's status aggregates them all. Written on every
// report, a profile of 1000 nodes reporting every 30 s would be rewritten
// 33 times a second. The status gate writes it at most once per interval,
// whatever the number of reports, and a report arriving inside the
// interval reconciles the profile when the interval ends, once.

// defaultStatusInterval is the least time between two status writes of one
// profile that only carry what its nodes reported.
const defaultStatusInterval = 2 * time.Second

// statusGate remembers when each profile's status was last written, and
// (writes) the resourceVersion that write gave the profile.
type statusGate struct {
	interval time.Duration
	now      func() time.Time
	mu       sync.Mutex
	last     map[string]time.Time
	writes   writeLog
}

func newStatusGate(interval time.Duration, now func() time.Time) *statusGate {
	if interval <= 0 {
		interval = defaultStatusInterval
	}
	return &statusGate{interval: interval, now: now, last: map[string]time.Time{}}
}

// wroteVersion records that the manager's status write gave profile
// resourceVersion rv.
func (g *statusGate) wroteVersion(profile, rv string) {
	if g != nil {
		g.writes.record(profile, 0, rv, readClock(g.now))
	}
}

// ownWrite reports whether rv is the version the manager's last status
// write of profile gave it.
func (g *statusGate) ownWrite(profile, rv string) bool {
	return g != nil && g.writes.echo(profile, rv)
}

// wait is how long profile's next status write must wait; 0 means now.
// A nil gate never waits.
func (g *statusGate) wait(profile string) time.Duration {
	if g == nil {
		return 0
	}
	now := readClock(g.now)
	g.mu.Lock()
	defer g.mu.Unlock()
	last, ok := g.last[profile]
	if !ok {
		return 0
	}
	if d := last.Add(g.interval).Sub(now); d > 0 && d <= g.interval {
		return d
	}
	return 0 // due, or a clock that went backwards
}

// wrote records that profile's status was brought up to date: written, or
// found current.
func (g *statusGate) wrote(profile string) {
	if g == nil {
		return
	}
	now := readClock(g.now)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.last[profile] = now
}

// forget drops a deleted profile.
func (g *statusGate) forget(profile string) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.last, profile)
	g.writes.forget(profile)
}

// statusUrgent reports whether a status change must be written at once:
// it answers a new generation, moves the rollout on (phase, revisions,
// message: what the next step is decided on), or reports on a deletion.
// Everything else is the nodes' reports, which the gate spaces out: the
// rollout's node counts among them, which change with every node that
// reports (a fleet of 300 coming up wrote its profile status 82 times in
// 13 s, one per node event, when the counts were urgent too).
func statusUrgent(p *v1alpha1.LatencyProfile, st v1alpha1.LatencyProfileStatus) bool {
	return p.Status.ObservedGeneration != st.ObservedGeneration || !p.DeletionTimestamp.IsZero() ||
		rolloutMoved(p.Status.Rollout, st.Rollout)
}

// rolloutMoved: b is another step of the rollout than a, not only other
// node counts.
func rolloutMoved(a, b *v1alpha1.RolloutStatus) bool {
	if a == nil || b == nil {
		return a != b
	}
	return a.Revision != b.Revision || a.PreviousRevision != b.PreviousRevision ||
		a.ObservedGeneration != b.ObservedGeneration || a.Phase != b.Phase || a.Message != b.Message
}

// latencyNodeToProfiles maps a LatencyNode event to the profiles its spec
// and status name. A status-only change (the agent's report) that comes
// while the profile's gate is closed is queued for when it opens: the
// queue keeps one entry per profile, so a burst costs one reconcile.
func latencyNodeToProfiles(g *statusGate) handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	enqueue := func(q queue, obj client.Object, delay func(string) time.Duration) {
		ln, ok := obj.(*v1alpha1.LatencyNode)
		if !ok {
			return
		}
		for _, name := range profileNames(ln) {
			req := reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}
			if d := delay(name); d > 0 {
				q.AddAfter(req, d)
			} else {
				q.Add(req)
			}
		}
	}
	now := func(string) time.Duration { return 0 }
	return handler.Funcs{
		// A new LatencyNode is a report too: a fleet coming up creates one
		// per node, each reconciling the whole profile when not gated.
		CreateFunc:  func(_ context.Context, e event.CreateEvent, q queue) { enqueue(q, e.Object, g.wait) },
		DeleteFunc:  func(_ context.Context, e event.DeleteEvent, q queue) { enqueue(q, e.Object, now) },
		GenericFunc: func(_ context.Context, e event.GenericEvent, q queue) { enqueue(q, e.Object, now) },
		// A new spec on a LatencyNode is the manager's own write (the node
		// controller's, or this profile's rollout moving it): it changes
		// the profile's status no more than a report does. Passed at once,
		// a 1000-node change ran the profile's pass back to back, each
		// finding its status write gated: half the manager's CPU.
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			enqueue(q, e.ObjectOld, g.wait)
			enqueue(q, e.ObjectNew, g.wait)
		},
	}
}
