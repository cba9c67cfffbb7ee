package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// managerSA is the manager's service account (config/manager).
const managerSA = "latencytier-manager"

// managerClient impersonates the manager's service account, which the suite
// binds to the generated role in config/rbac.
func managerClient(t testing.TB) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(testEnv.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + testNamespace + ":" + managerSA,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + testNamespace, "system:authenticated"},
	}
	c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mergePatchNode sends a JSON merge patch to node as c, the way the node
// controller patches its label.
func mergePatchNode(c client.Client, name string, patch map[string]any) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	return c.Patch(context.Background(), n, client.RawPatch(types.MergePatchType, data))
}

// TestAdmissionConfinesManagerToItsLabel: the manager's RBAC lets it patch
// every Node; the admission policy holds it to the latencytier.io/profile
// label and the owned-labels annotation. The label patch the node
// controller really sends goes through; any other label, annotation, the
// spec (taints, unschedulable) or a delete is refused, also with broader
// RBAC than config/rbac grants.
func TestAdmissionConfinesManagerToItsLabel(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	node := createNode(t, "admmgr-a", map[string]string{"tier": "admmgr"})
	cleanup(t, []string{"admmgr-a"}, nil)
	mgr := managerClient(t)

	// The policy loads asynchronously: wait until it refuses a foreign
	// label (a new value each try: one that landed before is no change),
	// then put back what an early try may have changed.
	try := 0
	eventually(t, "policy refuses the manager changing another label", func() error {
		try++
		err := mergePatchNode(mgr, node.Name, map[string]any{"metadata": map[string]any{
			"labels": map[string]any{"tier": fmt.Sprintf("stolen-%d", try)}}})
		if err := refusedByManagerPolicy(err); err != nil {
			return err
		}
		if !strings.Contains(err.Error(), "not tier") {
			return errString("refused without naming the label: " + err.Error())
		}
		return nil
	})
	if err := mergePatchNode(k8s, node.Name, map[string]any{"metadata": map[string]any{
		"labels": map[string]any{"tier": "admmgr"}}}); err != nil {
		t.Fatal(err)
	}

	// The node controller's own patch: label and owned-labels annotation.
	patch, foreign := labelPatch(getNode(t, node.Name), "some-profile")
	if foreign || patch == nil {
		t.Fatalf("labelPatch = %v, foreign %v", patch, foreign)
	}
	if err := mergePatchNode(mgr, node.Name, patch); err != nil {
		t.Fatalf("the manager's own label patch was refused: %v", err)
	}

	refused := map[string]map[string]any{
		"remove another label": {"metadata": map[string]any{"labels": map[string]any{"tier": nil}}},
		"add another label":    {"metadata": map[string]any{"labels": map[string]any{"node-role.kubernetes.io/control-plane": ""}}},
		"another annotation":   {"metadata": map[string]any{"annotations": map[string]any{"example.com/x": "1"}}},
		"taint":                {"spec": map[string]any{"taints": []any{map[string]any{"key": "evil", "effect": "NoSchedule"}}}},
		"finalizer":            {"metadata": map[string]any{"finalizers": []any{"example.com/hold"}}},
		"label and taint together": {"metadata": map[string]any{"labels": map[string]any{v1alpha1.ProfileLabel: "other"}},
			"spec": map[string]any{"taints": []any{map[string]any{"key": "evil", "effect": "NoExecute"}}}},
	}
	for name, p := range refused {
		if err := refusedByManagerPolicy(mergePatchNode(mgr, node.Name, p)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	got := getNode(t, node.Name)
	evil := slices.ContainsFunc(got.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "evil" })
	if got.Labels["tier"] != "admmgr" || evil || got.Spec.Unschedulable || len(got.Finalizers) != 0 {
		t.Fatalf("a refused patch landed: labels %v, spec %+v, finalizers %v", got.Labels, got.Spec, got.Finalizers)
	}

	// RBAC: no create or delete of nodes.
	if err := mgr.Delete(ctx, got); !apierrors.IsForbidden(err) {
		t.Fatalf("manager deleted a node: err = %v", err)
	}
	// Broader RBAC (an admin's mistake): the policy alone still refuses.
	grantManager(t, "admmgr-too-broad", rbacv1.PolicyRule{APIGroups: []string{""},
		Resources: []string{"nodes", "nodes/status"}, Verbs: []string{"create", "update", "patch", "delete"}})
	eventually(t, "policy refuses the manager deleting a node it may delete by RBAC", func() error {
		return refusedByManagerPolicy(mgr.Delete(ctx, getNode(t, node.Name)))
	})
	fresh := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "admmgr-new"}}
	if err := refusedByManagerPolicy(mgr.Create(ctx, fresh)); err != nil {
		t.Fatalf("create of a node: %v", err)
	}
	st := getNode(t, node.Name)
	st.Status.Phase = corev1.NodeRunning
	if err := refusedByManagerPolicy(mgr.Status().Update(ctx, st)); err != nil {
		t.Fatalf("status update of a node: %v", err)
	}
}

// refusedByManagerPolicy is nil when err is a refusal by a rule of the
// manager's policy.
func refusedByManagerPolicy(err error) error {
	if err := refusedByPolicy(err); err != nil {
		return err
	}
	if !strings.Contains(err.Error(), "'latencytier-manager-node-labels'") {
		return errString("refused, but not by the manager's policy: " + err.Error())
	}
	return nil
}

// TestManagerLeaseRights: leader election gets, creates and renews its
// Lease, and nothing more (no delete, no list).
func TestManagerLeaseRights(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	mgr := managerClient(t)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "admmgr-lease", Namespace: testNamespace},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a")}}
	eventually(t, "manager creates a lease (RBAC binding in force)", func() error {
		return mgr.Create(ctx, lease)
	})
	t.Cleanup(func() { _ = k8s.Delete(ctx, lease) })
	if err := mgr.Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil {
		t.Fatalf("get lease: %v", err)
	}
	lease.Spec.HolderIdentity = ptr.To("b")
	if err := mgr.Update(ctx, lease); err != nil {
		t.Fatalf("renew lease: %v", err)
	}
	if err := mgr.Delete(ctx, lease); !apierrors.IsForbidden(err) {
		t.Fatalf("manager deleted a lease: err = %v", err)
	}
	if err := mgr.List(ctx, &coordinationv1.LeaseList{}, client.InNamespace(testNamespace)); !apierrors.IsForbidden(err) {
		t.Fatalf("manager listed leases: err = %v", err)
	}
}

// grantManager binds an extra ClusterRole with rule to the manager's
// service account, removed at the end of the test.
func grantManager(t testing.TB, name string, rule rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: managerSA, Namespace: testNamespace}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = k8s.Delete(ctx, binding)
		_ = k8s.Delete(ctx, role)
	})
}
