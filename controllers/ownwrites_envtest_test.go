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
	"latencytier.io/latencytier/controllers/executor"
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
	r := &nodeSelection{Client: lag, Recorder: events.NewFakeRecorder(100), UnreachableAfter: testUnreachable}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Name: name}}
	firstReconcile(t, r, lag, old, name, []v1alpha1.LatencyProfile{*p})
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
	if res, err := r.Reconcile(ctx, req); (err != nil && !errors.As(err, new(executor.StaleError))) || res.RequeueAfter > 0 {
		t.Fatalf("reconcile once the cache caught up: result %+v, err %v: want it to go on", res, err)
	}
	if lag.latencyNodeWrites() != 2 {
		t.Fatalf("after the cache caught up: %d LatencyNode writes, want 2", lag.latencyNodeWrites())
	}
}

// TestNodeWaitsForTheCacheToShowItsOwnLabels: a node reconciled again
// once the cache shows the LatencyNode it has just created, but not yet
// the labels it patched onto the Node just before, must not patch the
// labels again from the older Node. (Before: 303 Node patches for a
// 300-node create in fleetsim, each repeat a full Node write on the API
// server.)
func TestNodeWaitsForTheCacheToShowItsOwnLabels(t *testing.T) {
	const name = "ownlabels-1"
	ctx := context.Background()
	createNode(t, name, map[string]string{"tier": "ownlabels"})
	t.Cleanup(func() { cleanup(t, []string{name}, nil) })
	// As above, the profile lives in the snapshot only.
	p := &v1alpha1.LatencyProfile{
		ObjectMeta: metav1.ObjectMeta{Name: "ownlabels", Generation: 1},
		Spec: v1alpha1.LatencyProfileSpec{
			NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "ownlabels"}},
			TuningSpec:   v1alpha1.TuningSpec{Scheduler: &v1alpha1.SchedulerSpec{Autogroup: ptr.To(v1alpha1.Disabled)}},
		},
	}
	lag := &laggingClient{Client: k8s}
	r := &nodeSelection{Client: lag, Recorder: events.NewFakeRecorder(100), UnreachableAfter: testUnreachable}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Name: name}}
	node := firstReconcile(t, r, lag, &v1alpha1.LatencyNode{}, name, []v1alpha1.LatencyProfile{*p})
	if lag.nodeLabelWrites() != 1 || lag.latencyNodeWrites() != 1 {
		t.Fatalf("first reconcile: %d Node and %d LatencyNode writes, want 1 and 1", lag.nodeLabelWrites(), lag.latencyNodeWrites())
	}
	created, err := getLN(name)
	if err != nil {
		t.Fatal(err)
	}
	// The LatencyNode's create event came first: the cache shows it, and
	// the Node as it was before the label patch.
	lag.hold(created, node, []v1alpha1.LatencyProfile{*p})
	res, err := r.Reconcile(ctx, req)
	if err != nil || lag.nodeLabelWrites() != 1 {
		t.Fatalf("reconcile on a Node cache behind the manager's own label patch: %d Node writes (want 1), err %v", lag.nodeLabelWrites(), err)
	}
	if res.RequeueAfter <= 0 {
		t.Fatalf("result %+v: want a recheck in case the Node's event never comes", res)
	}
	// Once the cache shows the labels (as written: the suite's manager,
	// which sees no profile here, soon takes them off the real Node), the
	// node reconciles as usual and has nothing to write.
	labelled := node.DeepCopy()
	labelled.Labels[v1alpha1.ProfileLabel] = p.Name
	labelled.Labels[v1alpha1.AgentLabel] = v1alpha1.AgentStandard
	labelled.Annotations = map[string]string{v1alpha1.OwnedLabelsAnnotation: v1alpha1.ProfileLabel}
	lag.hold(created, labelled, []v1alpha1.LatencyProfile{*p})
	if res, err := r.Reconcile(ctx, req); err != nil || res.RequeueAfter > 0 {
		t.Fatalf("reconcile once the cache caught up: result %+v, err %v", res, err)
	}
	if lag.nodeLabelWrites() != 1 || lag.latencyNodeWrites() != 1 {
		t.Fatalf("after the cache caught up: %d Node and %d LatencyNode writes, want 1 and 1", lag.nodeLabelWrites(), lag.latencyNodeWrites())
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

// firstReconcile reconciles node name once from a snapshot holding ln,
// the Node as the API server has it now, and profiles, and returns the Node
// it held. The suite's manager, which sees no profile for the node, may
// write the Node between the snapshot and the reconcile's label patch; the
// patch carries the snapshot's resourceVersion, so it is refused with a
// StaleError before anything is written, and the reconcile runs again on a
// fresh snapshot, as the manager's work queue would run it.
func firstReconcile(t *testing.T, r *nodeSelection, lag *laggingClient, ln *v1alpha1.LatencyNode, name string, profiles []v1alpha1.LatencyProfile) *corev1.Node {
	t.Helper()
	req := ctrl.Request{NamespacedName: client.ObjectKey{Name: name}}
	for try := 0; ; try++ {
		node := getNode(t, name)
		lag.hold(ln, node, profiles)
		lag.resetCounts()
		_, err := r.Reconcile(context.Background(), req)
		switch {
		case err == nil:
			return node
		case errors.As(err, new(executor.StaleError)) && try < 20:
		default:
			t.Fatalf("first reconcile (try %d): %v", try+1, err)
		}
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
	// nodeWrites counts writes of Nodes (label patches).
	nodeWrites int
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
	c.mu.Lock()
	defer c.mu.Unlock()
	switch obj.(type) {
	case *v1alpha1.LatencyNode:
		c.lnWrites++
	case *corev1.Node:
		c.nodeWrites++
	}
}

// resetCounts forgets the writes counted so far.
func (c *laggingClient) resetCounts() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lnWrites, c.nodeWrites = 0, 0
}

func (c *laggingClient) nodeLabelWrites() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodeWrites
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

// TestLabelWritesForget: a label patch is waited for until the cached
// Node shows every label it set or removed, or ownWriteTimeout passes
// (someone else changed the labels since).
func TestLabelWritesForget(t *testing.T) {
	t0 := time.Now()
	node := func(lbls map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: lbls}}
	}
	var w ownWrites
	if w.labelsBehind(node(nil), t0) {
		t.Fatal("behind with no label patch recorded")
	}
	patch := withAgentLabel(metadataPatch(map[string]any{v1alpha1.ProfileLabel: "p"}, v1alpha1.ProfileLabel),
		node(nil), v1alpha1.AgentStandard)
	w.wroteLabels("n", patchedLabels(patch), t0)
	if !w.labelsBehind(node(map[string]string{v1alpha1.ProfileLabel: "p"}), t0.Add(time.Second)) {
		t.Fatal("the agent label not yet in the cache: want behind")
	}
	if w.labelsBehind(node(map[string]string{v1alpha1.ProfileLabel: "p", v1alpha1.AgentLabel: v1alpha1.AgentStandard}), t0.Add(time.Second)) ||
		w.labelsBehind(node(nil), t0.Add(time.Second)) {
		t.Fatal("the cache showed the labels: want the patch forgotten (and a later change not waited for)")
	}
	removal := metadataPatch(map[string]any{v1alpha1.ProfileLabel: nil}, nil)
	w.wroteLabels("n", patchedLabels(removal), t0)
	if !w.labelsBehind(node(map[string]string{v1alpha1.ProfileLabel: "p"}), t0.Add(ownWriteTimeout-time.Millisecond)) {
		t.Fatal("a removed label still cached: want behind")
	}
	if w.labelsBehind(node(map[string]string{v1alpha1.ProfileLabel: "p"}), t0.Add(ownWriteTimeout+time.Millisecond)) {
		t.Fatal("past ownWriteTimeout: want the patch forgotten")
	}
	w.wroteLabels("n", patchedLabels(removal), t0)
	w.forgetLabels("n")
	if w.labelsBehind(node(map[string]string{v1alpha1.ProfileLabel: "p"}), t0) {
		t.Fatal("forgotten: want not behind")
	}
}

// TestNodeNotInCacheYetKeepsItsLatencyNode: a LatencyNode the cache shows
// before the Node it was made for (the Node's add event behind) is not
// deleted as a gone node's; a live read finds the Node, and the node is
// looked at again. Once the Node is really gone, it is deleted. (Before:
// deleted at once, which a full envtest run hit when the suite's manager
// saw a test's LatencyNode before its Node.)
func TestNodeNotInCacheYetKeepsItsLatencyNode(t *testing.T) {
	const name = "cachelag-1"
	ctx := context.Background()
	node := createNode(t, name, map[string]string{"tier": "cachelag"})
	t.Cleanup(func() { cleanup(t, []string{name}, nil) })
	p := &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "cachelag", Generation: 1}}
	ln := renderLatencyNode(node, p, time.Now())
	ln.Spec.Action = v1alpha1.ActionRevert
	if err := k8s.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}
	held, err := getLN(name)
	if err != nil {
		t.Fatal(err)
	}
	lag := &laggingClient{Client: k8s}
	// The cache holds the LatencyNode and some other Node, not this one.
	lag.hold(held, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cachelag-other"}}, nil)
	r := &nodeSelection{Client: lag, APIReader: k8s, Recorder: events.NewFakeRecorder(100), UnreachableAfter: testUnreachable}
	req := ctrl.Request{NamespacedName: client.ObjectKey{Name: name}}
	res, err := r.Reconcile(ctx, req)
	if err != nil || res.RequeueAfter <= 0 {
		t.Fatalf("reconcile with the Node missing from the cache only: result %+v, err %v: want a recheck", res, err)
	}
	if _, err := getLN(name); err != nil {
		t.Fatalf("the LatencyNode of a Node the API server still has was deleted: %v", err)
	}
	if err := k8s.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("reconcile once the Node is gone: %v", err)
	}
	if _, err := getLN(name); !apierrors.IsNotFound(err) {
		t.Fatalf("the LatencyNode of a deleted Node is still there (err %v)", err)
	}
}

// Reconcile decides node req.Name as its profile's pass does
// (nodeSelection.decide), with the profiles its client lists: these
// tests' one node at a time.
func (r *nodeSelection) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var list v1alpha1.LatencyProfileList
	if err := r.List(ctx, &list); err != nil {
		return ctrl.Result{}, err
	}
	wait, err := r.decide(ctx, req.Name, list.Items)
	return ctrl.Result{RequeueAfter: wait}, err
}
