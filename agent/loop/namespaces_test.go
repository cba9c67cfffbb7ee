package loop

import (
	"context"
	"net/http"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// TestNamespacesWatchedOnlyWhenGranted: the running agent, against a real
// API server, reads no Namespace while its spec grants nothing by
// namespace (issue 43: every agent held a Namespaces watch, a third of a
// simulated fleet's watches, for labels no spec of it used). Once the
// spec grants cpuQuota by namespace it watches them: with a resync of an
// hour, only that watch's event can start the pass that removes the pod's
// quota after its namespace is labelled.
func TestNamespacesWatchedOnlyWhenGranted(t *testing.T) {
	c, env := startAPI(t)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}); err != nil {
		t.Fatal(err)
	}
	root := fakeHost(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "tenant",
		Annotations: map[string]string{v1alpha1.CPUQuotaAnnotation: v1alpha1.CPUQuotaDisable}},
		Spec: corev1.PodSpec{NodeName: "node-ns", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	cpuMax := root.Cgroup("kubepods", "burstable", "pod"+string(pod.UID), "cpu.max")
	testroot.Write(t, cpuMax, "150000 100000\n")
	ln := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "node-ns"}, Spec: spec()}
	if err := c.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}

	rec := &callLog{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &recorder{log: rec, next: rt} })
	runAgent(t, env, Options{NodeName: "node-ns", Root: root, Resync: time.Hour, Config: cfg})
	key := types.NamespacedName{Name: "node-ns"}
	eventually(t, "the node Applied", func() bool {
		return c.Get(ctx, key, ln) == nil && conditionIs(ln, v1alpha1.NodeApplied, metav1.ConditionTrue)
	})
	// A pass at a pod's change too, still with nothing granted by namespace.
	orig := pod.DeepCopy()
	pod.Labels = map[string]string{"moved": "yes"}
	if err := c.Patch(ctx, pod, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if calls := namespaceCalls(rec); len(calls) > 0 {
		t.Fatalf("with no namespace grant the agent read Namespaces: %+v", calls)
	}

	// The spec grants cpuQuota to namespaces labelled tenantLabel.
	if err := c.Get(ctx, key, ln); err != nil {
		t.Fatal(err)
	}
	orig2 := ln.DeepCopy()
	ln.Spec.ProfileGeneration++
	ln.Spec.Tuning.CPUQuota = &v1alpha1.CPUQuotaSpec{Policy: v1alpha1.CPUQuotaRemove,
		NamespaceSelector: &v1alpha1.NamespaceSelector{MatchLabels: map[string]string{tenantLabel: "true"}}}
	if err := c.Patch(ctx, ln, client.MergeFrom(orig2)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a watch of Namespaces", func() bool {
		for _, call := range namespaceCalls(rec) {
			if call.verb == "watch" {
				return true
			}
		}
		return false
	})
	eventually(t, "the pod's opt-in refused", func() bool {
		if c.Get(ctx, key, ln) != nil || ln.Status.ObservedGeneration != ln.Generation {
			return false
		}
		for _, s := range ln.Status.Settings {
			if s.State == v1alpha1.SettingRefused {
				return true
			}
		}
		return false
	})
	if got := testroot.Read(t, cpuMax); got != "150000 100000" {
		t.Fatalf("cpu.max = %q before the namespace is granted; want the limit kept", got)
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, types.NamespacedName{Name: "tenant"}, ns); err != nil {
		t.Fatal(err)
	}
	orig3 := ns.DeepCopy()
	ns.Labels = map[string]string{tenantLabel: "true"}
	if err := c.Patch(ctx, ns, client.MergeFrom(orig3)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod's quota removed once its namespace is labelled", func() bool {
		return testroot.Read(t, cpuMax) == "max 100000"
	})
}

// namespaceCalls are the recorded requests for Namespaces.
func namespaceCalls(rec *callLog) []apiCall {
	var out []apiCall
	for _, call := range rec.snapshot() {
		if call.resource == "namespaces" {
			out = append(out, call)
		}
	}
	return out
}

// TestByNamespaceSeesEveryNamespaceSelector: every namespaceSelector of
// the tuning, wherever the API puts it, makes the agent read namespace
// labels; a selector byNamespace missed would refuse every pod it grants.
func TestByNamespaceSeesEveryNamespaceSelector(t *testing.T) {
	if byNamespace(v1alpha1.TuningSpec{}) {
		t.Fatal("byNamespace of an empty tuning = true")
	}
	selType := reflect.TypeFor[*v1alpha1.NamespaceSelector]()
	found := 0
	ts := reflect.TypeFor[v1alpha1.TuningSpec]()
	for i := range ts.NumField() {
		f := ts.Field(i)
		if f.Type.Kind() != reflect.Pointer || f.Type.Elem().Kind() != reflect.Struct {
			continue
		}
		for j := range f.Type.Elem().NumField() {
			if f.Type.Elem().Field(j).Type != selType {
				continue
			}
			found++
			var tuning v1alpha1.TuningSpec
			parent := reflect.New(f.Type.Elem())
			parent.Elem().Field(j).Set(reflect.ValueOf(&v1alpha1.NamespaceSelector{}))
			reflect.ValueOf(&tuning).Elem().Field(i).Set(parent)
			if !byNamespace(tuning) {
				t.Errorf("byNamespace misses %s.%s", f.Name, f.Type.Elem().Field(j).Name)
			}
		}
	}
	if found < 4 {
		t.Fatalf("found %d namespaceSelectors in TuningSpec, want the 4 known at least", found)
	}
}
