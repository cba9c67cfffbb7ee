package controllers

import (
	"context"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
	"latencytier.io/latencytier/controllers/planner"
)

// TestAdmissionLetsManagerCordonAndTaintOnlyItsOwn: for managed reboots,
// the tuning-ready gate and the contention taint the manager may change
// exactly spec.unschedulable, its own NoSchedule taint and its own
// PreferNoSchedule contention taint of a Node; another taint (added,
// removed or changed), its own taints with a value or another effect, and
// any other spec field stay refused.
func TestAdmissionLetsManagerCordonAndTaintOnlyItsOwn(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	foreign := corev1.Taint{Key: "example.com/gpu", Value: "yes", Effect: corev1.TaintEffectNoSchedule}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "admtaint-a", Labels: map[string]string{"tier": "admtaint"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{foreign}}}
	if err := k8s.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	cleanup(t, []string{node.Name}, nil)
	mgr := managerClient(t)
	// The API server adds node.kubernetes.io/not-ready on creation: the
	// taints the manager must leave are what the node has now.
	base := getNode(t, node.Name).Spec.Taints
	with := func(extra ...map[string]any) []any {
		var out []any
		for _, t := range base {
			out = append(out, taintMap(t))
		}
		for _, e := range extra {
			out = append(out, e)
		}
		return out
	}

	// The policy loads asynchronously: wait until it refuses another taint.
	eventually(t, "policy refuses the manager adding another taint", func() error {
		return refusedByManagerPolicy(mergePatchNode(mgr, node.Name, map[string]any{"spec": map[string]any{
			"taints": with(map[string]any{"key": "evil", "effect": "NoSchedule"})}}))
	})

	// What the manager's code sends goes through.
	if _, err := executor.New(mgr, k8s).SetNodeTaint(ctx, getNode(t, node.Name), pendingTaint, true); err != nil {
		t.Fatalf("the manager's own taint was refused: %v", err)
	}
	if got := getNode(t, node.Name); !slices.Contains(got.Spec.Taints, foreign) {
		t.Fatalf("adding the pending taint lost the foreign one: %v", got.Spec.Taints)
	}
	if _, err := executor.New(mgr, k8s).SetNodeTaint(ctx, getNode(t, node.Name), pendingTaint, false); err != nil {
		t.Fatalf("removing the manager's own taint was refused: %v", err)
	}
	// The contention taint (measurement.contention.taint), its writer's
	// patch as sent, on and off. The suite's manager takes it off this
	// node, which no profile owns, as soon as it sees it: the add must be
	// written, the removal accepted if there is anything left to remove.
	if wrote, err := executor.New(mgr, k8s).SetNodeTaint(ctx, getNode(t, node.Name), planner.ContentionTaint, true); err != nil || !wrote {
		t.Fatalf("the manager's contention taint was refused (wrote %v): %v", wrote, err)
	}
	if _, err := executor.New(mgr, k8s).SetNodeTaint(ctx, getNode(t, node.Name), planner.ContentionTaint, false); err != nil {
		t.Fatalf("removing the manager's contention taint was refused: %v", err)
	}
	if got := getNode(t, node.Name); hasTaint(got.Spec.Taints, planner.ContentionTaint) || !slices.Contains(got.Spec.Taints, foreign) {
		t.Fatalf("after the contention taint came off: taints %v", got.Spec.Taints)
	}
	r := executor.New(mgr, k8s)
	if err := r.Cordon(ctx, node, "admtaint-1a2b"); err != nil {
		t.Fatalf("cordon refused: %v", err)
	}
	if n := getNode(t, node.Name); !n.Spec.Unschedulable || n.Annotations[v1alpha1.RebootCordonAnnotation] != "admtaint-1a2b" {
		t.Fatalf("cordon did not land with its marker: unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
	}
	if _, err := r.Uncordon(ctx, getNode(t, node.Name)); err != nil {
		t.Fatalf("uncordon refused: %v", err)
	}
	if n := getNode(t, node.Name); n.Spec.Unschedulable || n.Annotations[v1alpha1.RebootCordonAnnotation] != "" {
		t.Fatalf("uncordon left unschedulable %v, annotations %v", n.Spec.Unschedulable, n.Annotations)
	}

	own := map[string]any{"key": v1alpha1.TuningPendingTaint, "effect": "NoSchedule"}
	refused := map[string]map[string]any{
		"remove another taint": {"spec": map[string]any{"taints": []any{own}}},
		"change another taint": {"spec": map[string]any{"taints": append(with()[1:],
			map[string]any{"key": foreign.Key, "value": "no", "effect": "NoSchedule"})}},
		"own taint NoExecute":    {"spec": map[string]any{"taints": with(map[string]any{"key": v1alpha1.TuningPendingTaint, "effect": "NoExecute"})}},
		"own taint with a value": {"spec": map[string]any{"taints": with(map[string]any{"key": v1alpha1.TuningPendingTaint, "value": "x", "effect": "NoSchedule"})}},
		// The contention taint steers, never refuses nor evicts.
		"contention taint NoSchedule":   {"spec": map[string]any{"taints": with(map[string]any{"key": v1alpha1.ContentionTaint, "effect": "NoSchedule"})}},
		"contention taint NoExecute":    {"spec": map[string]any{"taints": with(map[string]any{"key": v1alpha1.ContentionTaint, "effect": "NoExecute"})}},
		"contention taint with a value": {"spec": map[string]any{"taints": with(map[string]any{"key": v1alpha1.ContentionTaint, "value": "x", "effect": "PreferNoSchedule"})}},
		"providerID":                    {"spec": map[string]any{"providerID": "test://b"}},
		"podCIDR":                       {"spec": map[string]any{"podCIDR": "10.0.0.0/24"}},
		"cordon and a label":            {"spec": map[string]any{"unschedulable": true}, "metadata": map[string]any{"labels": map[string]any{"tier": "x"}}},
	}
	for name, p := range refused {
		if err := refusedByManagerPolicy(mergePatchNode(mgr, node.Name, p)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	got := getNode(t, node.Name)
	if !slices.Equal(got.Spec.Taints, base) || got.Spec.ProviderID != "" || got.Spec.PodCIDR != "" ||
		got.Spec.Unschedulable || got.Labels["tier"] != "admtaint" {
		t.Fatalf("a refused patch landed: %+v labels %v", got.Spec, got.Labels)
	}

	if !slices.Contains(base, foreign) {
		t.Fatalf("the node lost its taint at creation: %v", base)
	}

	// Pods: the manager lists and evicts, it never deletes.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "admtaint-pod", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, pod) })
	if err := mgr.List(ctx, &corev1.PodList{}); err != nil {
		t.Fatalf("manager may not list pods: %v", err)
	}
	if err := mgr.Delete(ctx, pod); !apierrors.IsForbidden(err) {
		t.Fatalf("manager deleted a pod: err = %v", err)
	}
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
	if err := mgr.SubResource("eviction").Create(ctx, pod, ev); err != nil {
		t.Fatalf("manager may not evict a pod: %v", err)
	}
}

func taintMap(t corev1.Taint) map[string]any {
	m := map[string]any{"key": t.Key, "effect": string(t.Effect)}
	if t.Value != "" {
		m["value"] = t.Value
	}
	return m
}

// TestManagerNodePolicyNamesEveryNodeSpecField: the manager's node policy
// keeps every NodeSpec field but unschedulable and taints as it was by
// naming each; a field Kubernetes adds would otherwise be the manager's to
// change.
func TestManagerNodePolicyNamesEveryNodeSpecField(t *testing.T) {
	for _, path := range []string{"../config/admission/policy.yaml", "../charts/latencytier/templates/admission-policies.yaml"} {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		typ := reflect.TypeOf(corev1.NodeSpec{})
		for i := 0; i < typ.NumField(); i++ {
			name := strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]
			if name == "unschedulable" || name == "taints" {
				continue
			}
			want := "object.spec.?" + name + " == oldObject.spec.?" + name
			if !strings.Contains(string(raw), want) {
				t.Errorf("%s does not keep NodeSpec.%s: no %q", path, name, want)
			}
		}
	}
}
