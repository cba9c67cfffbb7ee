package controllers

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// TestNodeWaitsForTheCacheToShowItsOwnWrite: a node reconciled again before
// the manager's cache holds the spec it has just written (an agent's report
// from before the write brings it back) must not write the spec again from
// the older object. At 1000 nodes a quarter of a profile change's nodes
// did: one patch each that the API server refused, and a retry. Reads come
// from a snapshot the test holds back, as a lagging informer would; writes
// go to the real API server.
func TestNodeWaitsForTheCacheToShowItsOwnWrite(t *testing.T) {
	const name = "ownwrite-1"
	ctx := context.Background()
	node := createNode(t, name, map[string]string{"tier": "ownwrite"})
	t.Cleanup(func() { cleanup(t, []string{name}, nil) })
	// The profile lives in the snapshot only, so the suite's manager (which
	// sees no profile for this node) leaves the LatencyNode's spec alone
	// until the test's reconciler writes it.
	p := &v1alpha1.LatencyProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "ownwrite", Generation: 1},
		Spec: v1alpha1.LatencyProfileSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "ownwrite"}},
			TuningSpec:   v1alpha1.TuningSpec{Scheduler: &v1alpha1.SchedulerSpec{Autogroup: ptr.To(v1alpha1.Disabled)}},
		},
	}
	ln := renderLatencyNode(node, p, time.Now())
	ln.Spec.Action = v1alpha1.ActionRevert
	if err := k8s.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}
	old, err := getLN(name)
	if err != nil {
		t.Fatal(err)
	}
	lag := &laggingClient{Client: k8s}
	lag.hold(old, getNode(t, name), []v1alpha1.LatencyProfile{*p})
	r := &nodeReconciler{Client: lag, Recorder: events.NewFakeRecorder(100), UnreachableAfter: testUnreachable}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Name: name}}

	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("first reconcile: %v", err)
	}
	if lag.latencyNodeWrites() != 1 {
		t.Fatalf("first reconcile wrote the LatencyNode %d times, want 1", lag.latencyNodeWrites())
	}
	// The cache still shows generation 1: the node comes back (an agent's
	// report) and must wait for its own write, not write again.
	res, err := r.Reconcile(ctx, req)
	if err != nil || lag.latencyNodeWrites() != 1 {
		t.Fatalf("reconcile on a cache behind the manager's own write: %d LatencyNode writes (want 1), err %v", lag.latencyNodeWrites(), err)
	}
	if res.RequeueAfter <= 0 {
		t.Fatalf("result %+v: want a recheck in case the write's event never comes", res)
	}

	// Once the cache shows a newer object (here the suite's manager has
	// reverted the spec, as no real profile selects the node), the node is
	// reconciled as usual: the write goes out again.
	var fresh *v1alpha1.LatencyNode
	eventually(t, "the suite's manager reverts the spec", func() error {
		if fresh, err = getLN(name); err != nil {
			return err
		}
		if fresh.Spec.Action != v1alpha1.ActionRevert || fresh.Generation < 3 {
			return errors.New("not reverted yet")
		}
		return nil
	})
	lag.hold(fresh, getNode(t, name), []v1alpha1.LatencyProfile{*p})
	if res, err := r.Reconcile(ctx, req); (err != nil && !errors.As(err, new(staleError))) || res.RequeueAfter > 0 {
		t.Fatalf("reconcile once the cache caught up: result %+v, err %v: want it to go on", res, err)
	}
	if lag.latencyNodeWrites() != 2 {
		t.Fatalf("after the cache caught up: %d LatencyNode writes, want 2", lag.latencyNodeWrites())
	}
}

// TestOwnWritesForget: a write is waited for only until the cache shows it
// or ownWriteTimeout passes (a LatencyNode deleted by someone else right
// after the write never shows it), and a create is waited for while the
// cache has no LatencyNode at all.
func TestOwnWritesForget(t *testing.T) {
	t0 := time.Now()
	at := func(gen int64) *v1alpha1.LatencyNode {
		return &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
	}
	var w ownWrites
	if w.behind("n", nil, t0) {
		t.Fatal("behind with no write recorded")
	}
	w.wrote("n", 1, t0)
	if !w.behind("n", nil, t0.Add(time.Second)) {
		t.Fatal("a create not yet in the cache: want behind")
	}
	if w.behind("n", at(1), t0.Add(time.Second)) || w.behind("n", nil, t0.Add(time.Second)) {
		t.Fatal("the cache showed the write: want it forgotten (and a later delete not waited for)")
	}
	w.wrote("n", 4, t0)
	if !w.behind("n", at(3), t0.Add(ownWriteTimeout-time.Millisecond)) {
		t.Fatal("cache at generation 3, write at 4: want behind")
	}
	if w.behind("n", at(3), t0.Add(ownWriteTimeout+time.Millisecond)) {
		t.Fatal("past ownWriteTimeout: want the write forgotten")
	}
	w.wrote("n", 5, t0)
	w.forget("n")
	if w.behind("n", at(1), t0) {
		t.Fatal("forgotten: want not behind")
	}
}

// laggingClient reads LatencyNodes, Nodes and LatencyProfiles from a
// snapshot the test holds (an informer cache that has not seen the newest
// events), and writes to the real API server, counting LatencyNode writes.
type laggingClient struct {
	client.Client
	mu       sync.Mutex
	objs     map[schema.GroupKind]client.Object
	profiles []v1alpha1.LatencyProfile
	lnWrites int
}

func (c *laggingClient) hold(ln *v1alpha1.LatencyNode, node *corev1.Node, profiles []v1alpha1.LatencyProfile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.objs = map[schema.GroupKind]client.Object{
		{Group: v1alpha1.GroupVersion.Group, Kind: "LatencyNode"}: ln.DeepCopy(),
		{Kind: "Node"}: node.DeepCopy(),
	}
	c.profiles = profiles
}

func (c *laggingClient) latencyNodeWrites() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lnWrites
}

func (c *laggingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	var gk schema.GroupKind
	switch o := obj.(type) {
	case *v1alpha1.LatencyNode:
		gk = schema.GroupKind{Group: v1alpha1.GroupVersion.Group, Kind: "LatencyNode"}
	case *corev1.Node:
		gk = schema.GroupKind{Kind: "Node"}
	case *v1alpha1.LatencyProfile:
		c.mu.Lock()
		defer c.mu.Unlock()
		for i := range c.profiles {
			if c.profiles[i].Name == key.Name {
				c.profiles[i].DeepCopyInto(o)
				return nil
			}
		}
		return apierrors.NewNotFound(schema.GroupResource{Resource: "latencyprofiles"}, key.Name)
	default:
		return c.Client.Get(ctx, key, obj, opts...)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	held, ok := c.objs[gk]
	if !ok || held.GetName() != key.Name {
		return apierrors.NewNotFound(schema.GroupResource{Resource: gk.Kind}, key.Name)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(held.DeepCopyObject()).Elem())
	return nil
}

func (c *laggingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if l, ok := list.(*v1alpha1.LatencyProfileList); ok {
		c.mu.Lock()
		defer c.mu.Unlock()
		l.Items = append([]v1alpha1.LatencyProfile(nil), c.profiles...)
		return nil
	}
	return c.Client.List(ctx, list, opts...)
}

func (c *laggingClient) count(obj client.Object) {
	if _, ok := obj.(*v1alpha1.LatencyNode); ok {
		c.mu.Lock()
		c.lnWrites++
		c.mu.Unlock()
	}
}

func (c *laggingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.count(obj)
	return c.Client.Create(ctx, obj, opts...)
}

func (c *laggingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.count(obj)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *laggingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.count(obj)
	return c.Client.Update(ctx, obj, opts...)
}

func (c *laggingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.count(obj)
	return c.Client.Delete(ctx, obj, opts...)
}
