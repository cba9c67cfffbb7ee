package controllers

import (
	"context"
	"strconv"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/controllers/executor"
)

// refusedBy is nil when err is a refusal by a rule of admission policy
// name that says want.
func refusedBy(err error, name, want string) error {
	if err := refusedByPolicy(err); err != nil {
		return err
	}
	if !strings.Contains(err.Error(), "'"+name+"'") || !strings.Contains(err.Error(), want) {
		return errString("refused, but not by " + name + " saying " + want + ": " + err.Error())
	}
	return nil
}

// slotLease is reboot slot i held by holder ("" for none).
func slotLease(i int, holder string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "latencytier-reboot-slot-" + strconv.Itoa(i), Namespace: testNamespace}}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	return l
}

// TestAdmissionGuardsRebootSlots: with the admin's one slot
// (config/admission/reboot-slots.yaml), the manager's token can neither
// create nor update nor delete a slot, even with broader RBAC; an agent
// bound to its node takes slot 0 for itself only (not for another node,
// not slot 1 beyond the admin's number, not without a node), gives back
// only its own hold, and writes no other lease. Two slots once the admin
// says so.
func TestAdmissionGuardsRebootSlots(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	mgr := managerClient(t)
	a, b := agentClient(t, "slot-a"), agentClient(t, "slot-b")
	t.Cleanup(func() {
		for i := range 2 {
			_ = k8s.Delete(ctx, slotLease(i, ""))
		}
	})

	// The policies load asynchronously: wait until both refuse, removing
	// what an early try created.
	for _, w := range []struct {
		c      client.Client
		lease  *coordinationv1.Lease
		policy string
		want   string
	}{
		{mgr, slotLease(0, "slot-m"), "latencytier-reboot-slots", "only the latencytier agent"},
		{a, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "slot-not-a-slot", Namespace: testNamespace}}, "latencytier-reboot-slot-writers", "only its reboot slots"},
	} {
		eventually(t, w.policy+" refuses", func() error {
			err := w.c.Create(ctx, w.lease.DeepCopy())
			if err == nil {
				_ = k8s.Delete(ctx, w.lease.DeepCopy())
			}
			return refusedBy(err, w.policy, w.want)
		})
	}
	for _, tc := range []struct {
		name   string
		c      client.Client
		lease  *coordinationv1.Lease
		policy string
		want   string
	}{
		{"slot for another node", a, slotLease(0, "slot-b"), "latencytier-reboot-slots", "only for itself, not for slot-b"},
		{"slot beyond the admin's number", a, slotLease(1, "slot-a"), "latencytier-reboot-slots", "beyond the 1 slots"},
		{"slot without a hold", a, slotLease(0, ""), "latencytier-reboot-slots", "only for itself"},
		{"slot from a token bound to no node", agentClient(t, ""), slotLease(0, "slot-a"), "latencytier-reboot-slots", "with a token bound to its node"},
		{"another lease", a, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "latencytier-manager", Namespace: testNamespace},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("slot-a")}}, "latencytier-reboot-slot-writers", "only its reboot slots"},
	} {
		if err := refusedBy(tc.c.Create(ctx, tc.lease), tc.policy, tc.want); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}

	// The agent takes slot 0 for its node.
	held := slotLease(0, "slot-a")
	if err := a.Create(ctx, held); err != nil {
		t.Fatalf("the agent could not take a free slot: %v", err)
	}
	// The manager, even with broader RBAC, neither takes it nor frees it.
	grantManager(t, "slot-too-broad", rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"},
		Resources: []string{"leases"}, Verbs: []string{"get", "update", "delete"}})
	eventually(t, "policy refuses the manager deleting a held slot it may delete by RBAC", func() error {
		return refusedBy(mgr.Delete(ctx, slotLease(0, "")), "latencytier-reboot-slot-writers", "only a cluster admin deletes reboot slot")
	})
	for holder, want := range map[string]string{"slot-m": "only the latencytier agent", "": "only the latencytier agent"} {
		l := &coordinationv1.Lease{}
		if err := mgr.Get(ctx, client.ObjectKeyFromObject(held), l); err != nil {
			t.Fatal(err)
		}
		l.Spec.HolderIdentity = ptr.To(holder)
		if err := refusedBy(mgr.Update(ctx, l), "latencytier-reboot-slots", want); err != nil {
			t.Errorf("manager sets the holder to %q: %v", holder, err)
		}
	}
	// Another agent cannot free a's hold; a can.
	l := &coordinationv1.Lease{}
	if err := b.Get(ctx, client.ObjectKeyFromObject(held), l); err != nil {
		t.Fatal(err)
	}
	l.Spec.HolderIdentity = nil
	if err := refusedBy(b.Update(ctx, l), "latencytier-reboot-slots", "only for itself, not for nobody, a hold of slot-a"); err != nil {
		t.Errorf("agent b frees a's slot: %v", err)
	}
	if err := a.Update(ctx, l); err != nil {
		t.Fatalf("agent a could not give its slot back: %v", err)
	}

	// Two slots once the admin says so.
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: "latencytier-reboots"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["slots"] = "2"
	if err := k8s.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cm.Data["slots"] = "1"
		_ = k8s.Update(ctx, cm)
	})
	eventually(t, "the agent takes slot 1 of the admin's 2", func() error {
		return a.Create(ctx, slotLease(1, "slot-a"))
	})
	if got := (&coordinationv1.Lease{}); k8s.Get(ctx, client.ObjectKeyFromObject(slotLease(1, "")), got) != nil || ptr.Deref(got.Spec.HolderIdentity, "") != "slot-a" {
		t.Fatalf("slot 1: %+v", got.Spec)
	}
}

// TestAdmissionKeepsAgentOffControlPlane: the manager cannot label a
// control-plane node (or a master) for the agent, though it can a worker;
// a cluster admin can; deleting the binding (the admin's opt-in) lets the
// manager too.
func TestAdmissionKeepsAgentOffControlPlane(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	cp := createNode(t, "agentcp-cp", map[string]string{"node-role.kubernetes.io/control-plane": ""})
	master := createNode(t, "agentcp-master", map[string]string{"node-role.kubernetes.io/master": ""})
	worker := createNode(t, "agentcp-worker", map[string]string{"tier": "agentcp"})
	cleanup(t, []string{cp.Name, master.Name, worker.Name}, nil)
	mgr := managerClient(t)
	place := func(c client.Client, name string) error {
		return mergePatchNode(c, name, map[string]any{"metadata": map[string]any{"labels": map[string]any{v1alpha1.AgentLabel: "standard"}}})
	}
	eventually(t, "policy refuses the manager placing the agent on a control-plane node", func() error {
		return refusedBy(place(mgr, cp.Name), "latencytier-agent-control-plane", "is a control-plane node")
	})
	if err := refusedBy(place(mgr, master.Name), "latencytier-agent-control-plane", "is a control-plane node"); err != nil {
		t.Errorf("master: %v", err)
	}
	if err := place(mgr, worker.Name); err != nil {
		t.Fatalf("the manager could not place the agent on a worker: %v", err)
	}
	if err := place(k8s, master.Name); err != nil {
		t.Fatalf("a cluster admin could not place the agent on a master: %v", err)
	}
	if got := getNode(t, cp.Name); got.Labels[v1alpha1.AgentLabel] != "" {
		t.Fatalf("the refused label landed: %v", got.Labels)
	}

	// The admin opts in: the binding goes.
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "latencytier-agent-control-plane"}, binding); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		binding.ResourceVersion, binding.UID, binding.CreationTimestamp = "", "", metav1.Time{}
		if err := k8s.Create(ctx, binding); err != nil {
			t.Errorf("restoring the binding: %v", err)
		}
	})
	eventually(t, "the manager places the agent on a control-plane node once the admin opted in", func() error {
		return place(mgr, cp.Name)
	})
}

// TestManagerUncordonLeavesAPersonsCordon: the manager's uncordon lifts
// only a cordon carrying its marker: a node a person cordoned stays
// cordoned; its own cordon goes with the marker (through the manager's
// admission policy, as its service account).
func TestManagerUncordonLeavesAPersonsCordon(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	node := createNode(t, "uncordon-a", map[string]string{"tier": "uncordon"})
	cleanup(t, []string{node.Name}, nil)
	r := executor.New(managerClient(t), k8s)
	if err := mergePatchNode(k8s, node.Name, map[string]any{"spec": map[string]any{"unschedulable": true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Uncordon(ctx, getNode(t, node.Name)); err != nil {
		t.Fatal(err)
	}
	if !getNode(t, node.Name).Spec.Unschedulable {
		t.Fatal("the manager lifted a person's cordon")
	}
	if err := mergePatchNode(k8s, node.Name, map[string]any{"spec": map[string]any{"unschedulable": nil}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Cordon(ctx, getNode(t, node.Name), "uncordon-1a"); err != nil {
		t.Fatalf("the manager's cordon: %v", err)
	}
	if _, err := r.Uncordon(ctx, getNode(t, node.Name)); err != nil {
		t.Fatalf("the manager's uncordon: %v", err)
	}
	if got := getNode(t, node.Name); got.Spec.Unschedulable || got.Annotations[v1alpha1.RebootCordonAnnotation] != "" {
		t.Fatalf("after the manager's own uncordon: unschedulable %v, annotations %v", got.Spec.Unschedulable, got.Annotations)
	}
}
