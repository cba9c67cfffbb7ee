package controllers

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
)

// agentClient is a client impersonating the agent's service account with a
// token bound to node (no node when node is "").
func agentClient(t testing.TB, node string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(testEnv.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + testNamespace + ":" + AgentServiceAccountName,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + testNamespace, "system:authenticated"},
	}
	if node != "" {
		cfg.Impersonate.Extra = map[string][]string{"authentication.kubernetes.io/node-name": {node}}
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
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
