package controllers

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// impersonate is a client acting as user with groups.
func impersonate(t testing.TB, user string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(testEnv.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bindClusterRole binds ClusterRole role to user for the test.
func bindClusterRole(t testing.TB, name, role string, subject rbacv1.Subject) {
	t.Helper()
	ctx := context.Background()
	b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{subject}}
	if err := k8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, b) })
}

// refusedByAgentLabelPolicy is nil when err is the agent-label policy's refusal.
func refusedByAgentLabelPolicy(err error) error {
	if err := refusedByPolicy(err); err != nil {
		return err
	}
	if !strings.Contains(err.Error(), "only the latencytier manager sets") {
		return errString("refused, but not by the agent-label policy: " + err.Error())
	}
	return nil
}

// TestNodeCannotAttractAgent: the agent DaemonSets require the manager's
// agent label by value. A node's kubelet (with the system:node role's
// rights, which include patching its own Node) may not set that label,
// neither on an update nor when it registers; nor may any other identity
// with Node patch rights but the manager's. A node that gives itself the
// profile label (which the old DaemonSet's affinity, Exists on
// latencytier.io/profile, followed) gets no agent label from the manager
// unless a profile selects it.
func TestNodeCannotAttractAgent(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	createNode(t, "place-a", map[string]string{"tier": "place-nobody"})
	cleanup(t, []string{"place-a", "place-b"}, nil)
	const kubeletUser = "system:node:place-a"
	bindClusterRole(t, "place-kubelet", "system:node", rbacv1.Subject{Kind: "User", Name: kubeletUser, APIGroup: "rbac.authorization.k8s.io"})
	kubelet := impersonate(t, kubeletUser, "system:nodes")
	attract := map[string]any{"metadata": map[string]any{"labels": map[string]any{v1alpha1.AgentLabel: v1alpha1.AgentHostPID}}}

	eventually(t, "the kubelet is refused the agent label on its own node", func() error {
		return refusedByAgentLabelPolicy(mergePatchNode(kubelet, "place-a", attract))
	})
	// With RBAC to patch nodes, the policy is what refuses: other labels
	// of its own node still go through.
	if err := mergePatchNode(kubelet, "place-a", map[string]any{"metadata": map[string]any{
		"labels": map[string]any{v1alpha1.ProfileLabel: "self-chosen"}}}); err != nil {
		t.Fatalf("the kubelet setting another label of its node: %v", err)
	}
	bindClusterRole(t, "place-kubelet-b", "system:node", rbacv1.Subject{Kind: "User", Name: "system:node:place-b", APIGroup: "rbac.authorization.k8s.io"})
	registering := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "place-b",
		Labels: map[string]string{v1alpha1.AgentLabel: v1alpha1.AgentStandard}}}
	eventually(t, "a node registering with the agent label is refused", func() error {
		return refusedByAgentLabelPolicy(impersonate(t, "system:node:place-b", "system:nodes").Create(ctx, registering))
	})
	// Anyone else with node patch rights (an autoscaler, a tenant's
	// operator given too much).
	const other = "system:serviceaccount:tenant:node-labeller"
	bindClusterRole(t, "place-other", "system:node", rbacv1.Subject{Kind: "User", Name: other, APIGroup: "rbac.authorization.k8s.io"})
	if err := refusedByAgentLabelPolicy(mergePatchNode(impersonate(t, other), "place-a", attract)); err != nil {
		t.Fatalf("another service account with node patch rights: %v", err)
	}
	// The node labelled itself with a profile label: no profile selects
	// it, so the manager gives it no agent label (no agent).
	keepAgent(t, "place-a", "", "a node that labelled itself latencytier.io/profile")

	// The manager's service account may (its own label; the manager
	// removes it again, as no profile owns the node).
	if err := mergePatchNode(managerClient(t), "place-a", attract); err != nil {
		t.Fatalf("the manager setting the agent label: %v", err)
	}
	expectAgent(t, "place-a", "")
}

// TestManagerWritesNoWorkload: the manager's service account may not
// create a DaemonSet (or any workload) in its namespace, which it could
// while it rendered the agent (a stolen token was root on every node), and
// may not change a LatencyProfile beyond its revert finalizer, though RBAC
// lets it patch profiles.
func TestManagerWritesNoWorkload(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	mgr := managerClient(t)
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "evil", Namespace: testNamespace},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
				Spec: corev1.PodSpec{HostPID: true, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	eventually(t, "the manager reads profiles (its RBAC is bound)", func() error {
		return mgr.List(ctx, &v1alpha1.LatencyProfileList{})
	})
	if err := mgr.Create(ctx, ds); !apierrors.IsForbidden(err) {
		t.Fatalf("the manager creating a DaemonSet: err = %v, want Forbidden", err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "evil", Namespace: testNamespace}, Spec: ds.Spec.Template.Spec}
	if err := mgr.Create(ctx, pod); !apierrors.IsForbidden(err) {
		t.Fatalf("the manager creating a pod: err = %v, want Forbidden", err)
	}
	// Drains evict (PodDisruptionBudgets hold); a delete would not ask them.
	if err := mgr.Delete(ctx, pod); !apierrors.IsForbidden(err) {
		t.Fatalf("the manager deleting a pod: err = %v, want Forbidden", err)
	}
	if err := mgr.List(ctx, &appsv1.DaemonSetList{}, client.InNamespace(testNamespace)); !apierrors.IsForbidden(err) {
		t.Fatalf("the manager listing DaemonSets: err = %v, want Forbidden", err)
	}

	createProfile(t, "mgrwrite", 0, map[string]string{"tier": "mgrwrite-none"})
	cleanup(t, nil, []string{"mgrwrite"})
	eventually(t, "revert finalizer", func() error {
		if len(getProfile(t, "mgrwrite").Finalizers) == 0 {
			return errString("no finalizer yet")
		}
		return nil
	})
	patchAs := func(edit func(p *v1alpha1.LatencyProfile)) error {
		p := getProfile(t, "mgrwrite")
		orig := p.DeepCopy()
		edit(p)
		return mgr.Patch(ctx, p, client.MergeFrom(orig))
	}
	eventually(t, "the policy refuses the manager changing a profile's spec", func() error {
		err := patchAs(func(p *v1alpha1.LatencyProfile) { p.Spec.Priority = 7 })
		if err := refusedByPolicy(err); err != nil {
			return err
		}
		if !strings.Contains(err.Error(), "may not change the spec of LatencyProfile mgrwrite") {
			return errString("refused without the reason: " + err.Error())
		}
		return nil
	})
	for what, edit := range map[string]func(p *v1alpha1.LatencyProfile){
		"a label":           func(p *v1alpha1.LatencyProfile) { p.Labels["x"] = "y" },
		"an annotation":     func(p *v1alpha1.LatencyProfile) { p.Annotations["x"] = "y" },
		"another finalizer": func(p *v1alpha1.LatencyProfile) { p.Finalizers = append(p.Finalizers, "example.com/hold") },
	} {
		if err := refusedByPolicy(patchAs(edit)); err != nil {
			t.Errorf("the manager adding %s to a profile: %v", what, err)
		}
	}
	if got := getProfile(t, "mgrwrite"); got.Spec.Priority != 0 || got.Labels["x"] != "" || got.Annotations["x"] != "" || len(got.Finalizers) != 1 {
		t.Fatalf("a refused patch landed: %+v", got.ObjectMeta)
	}
	// Its own finalizer, the one write it needs, goes through.
	if err := patchAs(func(p *v1alpha1.LatencyProfile) { p.Finalizers = nil }); err != nil {
		t.Fatalf("the manager removing its finalizer: %v", err)
	}
	if err := mgr.Create(ctx, &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "mgrwrite-new"},
		Spec: getProfile(t, "mgrwrite").Spec}); !apierrors.IsForbidden(err) {
		t.Fatalf("the manager creating a profile: err = %v, want Forbidden", err)
	}
}
