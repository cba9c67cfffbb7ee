package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
)

// TestManagerCannotWriteLatencyNodeStatus: a LatencyNode's status has one
// writer, the node's agent. The manager's generated role (config/rbac)
// held latencynodes/status patch for the rollout's verdicts; impersonating
// its service account, a status patch is Forbidden by RBAC, while its spec
// write still goes through.
func TestManagerCannotWriteLatencyNodeStatus(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	createNode(t, "onewriter-a", map[string]string{"tier": "onewriter"})
	createProfile(t, "onewriter", 0, map[string]string{"tier": "onewriter"})
	cleanup(t, []string{"onewriter-a"}, []string{"onewriter"})
	ln := expectApplying(t, "onewriter-a", "onewriter")
	mgr := managerClient(t)

	patched := ln.DeepCopy()
	patched.Status.Findings = []v1alpha1.Finding{{Type: "Test", Severity: "Info", Message: "written by the manager"}}
	err := mgr.Status().Patch(ctx, patched, client.MergeFrom(ln))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("manager's status patch of LatencyNode onewriter-a: err %v, want Forbidden", err)
	}
	if !strings.Contains(err.Error(), "latencynodes/status") {
		t.Fatalf("refused, but not by RBAC on latencynodes/status: %v", err)
	}
	// The spec stays the manager's: a no-op spec patch is allowed.
	if err := mgr.Patch(ctx, ln.DeepCopy(), client.MergeFrom(ln)); err != nil {
		t.Fatalf("manager's spec patch refused: %v", err)
	}
}

// TestManagerWritesAsLatencytierManager: managedFields name the manager's
// writers latencytier-manager/<role> (and the audit log, through the user
// agent, latencytier-manager), not the binary's name the agent shares.
func TestManagerWritesAsLatencytierManager(t *testing.T) {
	needSuite(t)
	createNode(t, "owner-a", map[string]string{"tier": "owner"})
	createProfile(t, "owner", 0, map[string]string{"tier": "owner"})
	cleanup(t, []string{"owner-a"}, []string{"owner"})
	expectApplying(t, "owner-a", "owner")
	eventually(t, "managedFields name the writers", func() error {
		ln, err := getLN("owner-a")
		if err != nil {
			return err
		}
		if err := managedBy(ln.ManagedFields, executor.ManagerLatencyNode, "", "f:spec"); err != nil {
			return fmt.Errorf("LatencyNode: %w", err)
		}
		p := getProfile(t, "owner")
		if err := managedBy(p.ManagedFields, executor.ManagerProfileStatus, "status", "f:status"); err != nil {
			return fmt.Errorf("LatencyProfile: %w", err)
		}
		return nil
	})
}

// managedBy checks that an entry of subresource holding field is
// manager's (the test's own client, which created the profile, writes as
// the test binary's name, the default the manager had too).
func managedBy(entries []metav1.ManagedFieldsEntry, manager, subresource, field string) error {
	found := false
	for _, e := range entries {
		if e.Manager == manager && e.Subresource == subresource && e.FieldsV1 != nil && strings.Contains(e.FieldsV1.GetRawString(), `"`+field+`"`) {
			found = true
		}
	}
	if !found {
		var names []string
		for _, e := range entries {
			names = append(names, e.Manager+"/"+e.Subresource)
		}
		where := "main resource"
		if subresource != "" {
			where = subresource
		}
		return fmt.Errorf("no entry by %s for the %s holding %s among %v", manager, where, field, names)
	}
	return nil
}

// TestSilentAgentTurnsStale: an agent that reports with a heartbeat and
// then goes silent for more than two heartbeats is Stale in its profile
// (counted in stale and degraded, not applied, Degraded says
// StaleReports) without any other event: the profile is requeued for the
// moment it turns stale. Once the agent reports again, it is Applied.
func TestSilentAgentTurnsStale(t *testing.T) {
	needSuite(t)
	createNode(t, "stale-a", map[string]string{"tier": "stale"})
	createProfile(t, "stale", 0, map[string]string{"tier": "stale"})
	cleanup(t, []string{"stale-a"}, []string{"stale"})
	expectApplying(t, "stale-a", "stale")
	report := func(heartbeat time.Duration) {
		eventually(t, "agent reports with heartbeat "+heartbeat.String(), func() error {
			ln, err := getLN("stale-a")
			if err != nil {
				return err
			}
			patched := ln.DeepCopy()
			st := &patched.Status
			st.ObservedGeneration, st.Profile, st.ProfileGeneration = ln.Generation, ln.Spec.Profile, ln.Spec.ProfileGeneration
			c := appliedTrue
			c.ObservedGeneration = ln.Generation
			meta.SetStatusCondition(&st.Conditions, c)
			st.ReportedAt = &metav1.Time{Time: time.Now()}
			st.HeartbeatInterval = &metav1.Duration{Duration: heartbeat}
			return k8s.Status().Patch(context.Background(), patched, client.MergeFromWithOptions(ln, client.MergeFromWithOptimisticLock{}))
		})
	}
	// A short heartbeat, then silence.
	report(time.Second)
	p := expectCondition(t, "stale", v1alpha1.ProfileDegraded, metav1.ConditionTrue, v1alpha1.ReasonStaleReports)
	if st := p.Status; st.Stale != 1 || st.Degraded != 1 || st.Applied != 0 || len(st.Nodes) != 1 || st.Nodes[0].State != v1alpha1.NodeStateStale {
		t.Fatalf("status of a profile with a silent agent = %+v", st)
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ProfileReady); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Ready = %+v with a stale node, want False", c)
	}
	// It reports again, with a heartbeat long enough for the test.
	report(time.Hour)
	p = expectCondition(t, "stale", v1alpha1.ProfileReady, metav1.ConditionTrue, v1alpha1.ReasonAllNodesApplied)
	if st := p.Status; st.Stale != 0 || st.Degraded != 0 || st.Applied != 1 {
		t.Fatalf("status once the agent reports again = %+v", st)
	}
}
