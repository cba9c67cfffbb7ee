package fleetsim

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers"
)

// observer watches every LatencyNode through one informer (as the admin
// user, outside both measured FlowSchemas), so waiting for "all applied"
// costs the API server one watch, not a LIST per poll.
type observer struct {
	c cache.Cache
	// logf, when set, gets the progress of a wait every progressEvery.
	logf func(format string, args ...any)
}

// progressEvery is how often a wait logs how far the fleet is.
const progressEvery = 5 * time.Second

func startObserver(ctx context.Context, admin *rest.Config, logf func(string, ...any)) (*observer, error) {
	cfg := rest.CopyConfig(admin)
	cfg.UserAgent = "fleetsim-observer"
	c, err := cache.New(cfg, cache.Options{Scheme: controllers.NewScheme()})
	if err != nil {
		return nil, err
	}
	if _, err := c.GetInformer(ctx, &v1alpha1.LatencyNode{}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("observer cache did not sync")
	}
	return &observer{c: c, logf: logf}, nil
}

// progress counts the LatencyNodes of profile whose agent reported on the
// spec of profile generation gen (Applied condition at the LatencyNode's
// generation, status.profileGeneration == gen), and how many of those
// report Applied True.
// written counts those whose spec the manager wrote for gen.
func (o *observer) progress(ctx context.Context, profile string, gen int64) (reported, applied, written, total int, err error) {
	var list v1alpha1.LatencyNodeList
	if err := o.c.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return 0, 0, 0, 0, err
	}
	for i := range list.Items {
		ln := &list.Items[i]
		if ln.Spec.Profile != profile {
			continue
		}
		total++
		if ln.Spec.ProfileGeneration == gen {
			written++
		}
		c := meta.FindStatusCondition(ln.Status.Conditions, v1alpha1.NodeApplied)
		if c == nil || c.ObservedGeneration != ln.Generation || ln.Spec.ProfileGeneration != gen ||
			ln.Status.ProfileGeneration != gen {
			continue
		}
		reported++
		if c.Status == metav1.ConditionTrue {
			applied++
		}
	}
	return reported, applied, written, total, nil
}

// waitReported waits until want LatencyNodes reported on profile
// generation gen and returns how long that took from start.
func (o *observer) waitReported(ctx context.Context, profile string, gen int64, want int, start time.Time, timeout time.Duration) (time.Duration, int, error) {
	deadline := start.Add(timeout)
	nextLog := start.Add(progressEvery)
	for {
		rep, applied, written, total, err := o.progress(ctx, profile, gen)
		if err != nil {
			return 0, 0, err
		}
		if o.logf != nil && time.Now().After(nextLog) {
			o.logf("generation %d, %s: %d LatencyNodes, %d specs written, %d reported", gen,
				time.Since(start).Round(time.Second), total, written, rep)
			nextLog = nextLog.Add(progressEvery)
		}
		if rep >= want {
			return time.Since(start), applied, nil
		}
		if time.Now().After(deadline) {
			return timeout, applied, &incompleteError{Reported: rep, Want: want, After: timeout,
				What: fmt.Sprintf("profile %s generation %d (%d LatencyNodes)", profile, gen, total)}
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// incompleteError is a wait for every node that timed out: a result in
// itself (the goal failed), not a broken simulator.
type incompleteError struct {
	Reported, Want int
	After          time.Duration
	What           string
}

func (e *incompleteError) Error() string {
	return fmt.Sprintf("after %s only %d of %d nodes reported %s", e.After, e.Reported, e.Want, e.What)
}

// countNodes counts the LatencyNodes of profile.
func (o *observer) countNodes(ctx context.Context, profile string) (int, error) {
	var list v1alpha1.LatencyNodeList
	if err := o.c.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		if list.Items[i].Spec.Profile == profile {
			n++
		}
	}
	return n, nil
}

// heartbeat is the longest heartbeat interval the profile's nodes report
// (status.heartbeatInterval), 0 when none reports one.
func (o *observer) heartbeat(ctx context.Context, profile string) time.Duration {
	var list v1alpha1.LatencyNodeList
	if err := o.c.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return 0
	}
	var hb time.Duration
	for i := range list.Items {
		ln := &list.Items[i]
		if ln.Spec.Profile == profile && ln.Status.HeartbeatInterval != nil {
			hb = max(hb, ln.Status.HeartbeatInterval.Duration)
		}
	}
	return hb
}
