package controllers

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// agentServiceAccountName is the agent's service account (config/agent).
const agentServiceAccountName = "latencytier-agent"

// agentClient is a client impersonating the agent's service account with a
// token bound to node (no node when node is "").
func agentClient(t testing.TB, node string) client.Client {
	t.Helper()
	return agentClientIn(t, testNamespace, node)
}

// agentClientIn impersonates the agent's service account of an operator
// installed in namespace ns.
func agentClientIn(t testing.TB, ns, node string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(testEnv.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + agentServiceAccountName,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	if node != "" {
		cfg.Impersonate.Extra = map[string][]string{"authentication.kubernetes.io/node-name": {node}}
	}
	c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// patchStatusAs patches a LatencyNode's status findings as c.
func patchStatusAs(c client.Client, name string) error {
	ln, err := getLN(name)
	if err != nil {
		return err
	}
	patched := ln.DeepCopy()
	patched.Status.Findings = []v1alpha1.Finding{{Type: "Test", Severity: "Info", Message: "written by " + name + "'s reader"}}
	return c.Status().Patch(context.Background(), patched, client.MergeFrom(ln))
}

func TestAdmissionConfinesAgentToItsNode(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	createNode(t, "adm-a", map[string]string{"tier": "adm"})
	createNode(t, "adm-b", map[string]string{"tier": "adm"})
	createProfile(t, "adm", 0, map[string]string{"tier": "adm"})
	cleanup(t, []string{"adm-a", "adm-b"}, []string{"adm"})
	expectApplying(t, "adm-a", "adm")
	expectApplying(t, "adm-b", "adm")
	agentA := agentClient(t, "adm-a")

	// The policy loads asynchronously: wait until it refuses the write to
	// the other node's LatencyNode, with the policy's own message.
	eventually(t, "policy refuses adm-a's agent writing adm-b", func() error {
		err := patchStatusAs(agentA, "adm-b")
		if err == nil {
			return errString("write to another node's LatencyNode was allowed")
		}
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			return err
		}
		if !strings.Contains(err.Error(), "may write only LatencyNode adm-a") {
			return errString("refused, but not by the policy: " + err.Error())
		}
		return nil
	})
	// Its own node is fine.
	if err := patchStatusAs(agentA, "adm-a"); err != nil {
		t.Fatalf("agent refused on its own LatencyNode: %v", err)
	}
	// A token bound to no node writes nothing.
	if err := patchStatusAs(agentClient(t, ""), "adm-a"); err == nil || !strings.Contains(err.Error(), "not bound to a node") {
		t.Fatalf("unbound agent token: err = %v", err)
	}
	// RBAC: no spec writes, no deletes, no profiles.
	ln, err := getLN("adm-a")
	if err != nil {
		t.Fatal(err)
	}
	spec := ln.DeepCopy()
	spec.Spec.Action = v1alpha1.ActionRevert
	if err := agentA.Patch(ctx, spec, client.MergeFrom(ln)); !apierrors.IsForbidden(err) {
		t.Fatalf("agent patched its LatencyNode spec: err = %v", err)
	}
	if err := agentA.Delete(ctx, ln); !apierrors.IsForbidden(err) {
		t.Fatalf("agent deleted its LatencyNode: err = %v", err)
	}
	p := getProfile(t, "adm")
	pp := p.DeepCopy()
	pp.Spec.Priority = 7
	if err := agentA.Patch(ctx, pp, client.MergeFrom(p)); !apierrors.IsForbidden(err) {
		t.Fatalf("agent patched a LatencyProfile: err = %v", err)
	}
	var lps v1alpha1.LatencyProfileList
	if err := agentA.List(ctx, &lps); !apierrors.IsForbidden(err) {
		t.Fatalf("agent listed LatencyProfiles: err = %v", err)
	}
}

// TestAdmissionConfinesAgentInAnyNamespace: installed into another
// namespace (kustomize namespace:), the agent's service account is
// system:serviceaccount:<that namespace>:latencytier-agent; the policy must
// confine it all the same, not silently let it write every LatencyNode.
func TestAdmissionConfinesAgentInAnyNamespace(t *testing.T) {
	needSuite(t)
	const ns = "lt-elsewhere"
	createNode(t, "admns-a", map[string]string{"tier": "admns"})
	createNode(t, "admns-b", map[string]string{"tier": "admns"})
	createProfile(t, "admns", 0, map[string]string{"tier": "admns"})
	cleanup(t, []string{"admns-a", "admns-b"}, []string{"admns"})
	expectApplying(t, "admns-a", "admns")
	expectApplying(t, "admns-b", "admns")
	bindAgentRole(t, "admns-agent", ns)
	agentA := agentClientIn(t, ns, "admns-a")

	// RBAC (the binding) is eventually in force: the own node's status.
	eventually(t, "agent in "+ns+" writes its own LatencyNode status", func() error {
		return patchStatusAs(agentA, "admns-a")
	})
	// The policy loads asynchronously (after suite start).
	eventually(t, "policy refuses the agent in "+ns+" writing another node's LatencyNode", func() error {
		return refusedByPolicy(patchStatusAs(agentA, "admns-b"))
	})
	if err := refusedByPolicy(patchStatusAs(agentClientIn(t, ns, ""), "admns-a")); err != nil {
		t.Fatalf("agent in %s with a token bound to no node: %v", ns, err)
	}
}

// bindAgentRole binds config/agent's ClusterRole to the agent's service
// account in namespace ns, as kustomize's namespace: does for an install
// there; removed at the end of the test.
func bindAgentRole(t testing.TB, name, ns string) {
	t.Helper()
	ctx := context.Background()
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "latencytier-agent"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: agentServiceAccountName, Namespace: ns}},
	}
	if err := k8s.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, binding) })
}

// TestAdmissionKeepsAgentOffSpec grants the agent's service account broader
// RBAC than config/agent does (a mistake a cluster admin can make) and checks
// that the admission policy alone still keeps the agent to the status of its
// own LatencyNode: no spec update, no delete, no create, even for its node.
func TestAdmissionKeepsAgentOffSpec(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	createNode(t, "admspec-a", map[string]string{"tier": "admspec"})
	createProfile(t, "admspec", 0, map[string]string{"tier": "admspec"})
	cleanup(t, []string{"admspec-a"}, []string{"admspec"})
	expectApplying(t, "admspec-a", "admspec")
	grantAgent(t, "admspec-too-broad", []string{"create", "update", "patch", "delete"})
	agent := agentClient(t, "admspec-a")

	eventually(t, "policy refuses the agent patching its own LatencyNode spec", func() error {
		ln, err := getLN("admspec-a")
		if err != nil {
			return err
		}
		spec := ln.DeepCopy()
		spec.Spec.Action = v1alpha1.ActionRevert
		return refusedByPolicy(agent.Patch(ctx, spec, client.MergeFrom(ln)))
	})
	ln, err := getLN("admspec-a")
	if err != nil {
		t.Fatal(err)
	}
	if ln.Spec.Action != v1alpha1.ActionApply {
		t.Fatalf("the agent's spec patch went through: action %s", ln.Spec.Action)
	}
	if err := refusedByPolicy(agent.Delete(ctx, ln)); err != nil {
		t.Fatalf("delete of its own LatencyNode: %v", err)
	}
	fresh := &v1alpha1.LatencyNode{ObjectMeta: metav1.ObjectMeta{Name: "admspec-a-new"},
		Spec: v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionRevert}}
	if err := refusedByPolicy(agent.Create(ctx, fresh)); err != nil {
		t.Fatalf("create of a LatencyNode: %v", err)
	}
	// Status of its own node stays writable.
	if err := patchStatusAs(agent, "admspec-a"); err != nil {
		t.Fatalf("agent refused on its own LatencyNode status: %v", err)
	}
}

// TestAgentRoleHasNoStatusUpdate: the agent patches its status; a full
// update (which would overwrite fields it did not read) is not granted.
func TestAgentRoleHasNoStatusUpdate(t *testing.T) {
	needSuite(t)
	createNode(t, "admupd-a", map[string]string{"tier": "admupd"})
	createProfile(t, "admupd", 0, map[string]string{"tier": "admupd"})
	cleanup(t, []string{"admupd-a"}, []string{"admupd"})
	expectApplying(t, "admupd-a", "admupd")
	ln, err := getLN("admupd-a")
	if err != nil {
		t.Fatal(err)
	}
	ln.Status.Findings = []v1alpha1.Finding{{Type: "Test", Severity: "Info", Message: "full update"}}
	err = agentClient(t, "admupd-a").Status().Update(context.Background(), ln)
	if !apierrors.IsForbidden(err) {
		t.Fatalf("agent updated its LatencyNode status with a full update: err = %v", err)
	}
}

// grantAgent binds an extra ClusterRole giving the agent's service account
// verbs on latencynodes, removed at the end of the test.
func grantAgent(t testing.TB, name string, verbs []string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"latencynodes"}, Verbs: verbs,
	}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: agentServiceAccountName, Namespace: testNamespace}},
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

// refusedByPolicy is nil when err is a refusal by an admission policy's rule.
func refusedByPolicy(err error) error {
	if err == nil {
		return errString("the write was allowed")
	}
	if !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
		return errString("refused, but not by the admission policy: " + err.Error())
	}
	// A rule that fails to evaluate denies too (failurePolicy Fail), but
	// with an error instead of the policy's message.
	if strings.Contains(err.Error(), "resulted in error") || strings.Contains(err.Error(), "fails to evaluate") {
		return errString("the policy failed to evaluate instead of refusing: " + err.Error())
	}
	return nil
}
