package loop

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/agent/internal/testroot"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// TestAgentGuardsItsOwnReboot drives the agent's passes against a real API
// server on a temp-dir Debian host staged for a reboot: a forged Rebooting
// (the node schedulable, or cordoned by a person without the manager's
// marker, or marked for another revision) and a proper request while every
// slot is held are refused: no reboot, no reboot record, a Warning
// RebootRefused event naming what was missing and status.boot saying it.
// With the manager's cordon and a free slot the agent takes the slot and
// reboots once; it gives the slot back after the boot id changed.
func TestAgentGuardsItsOwnReboot(t *testing.T) {
	f := newBootFixture(t, "node-guard")
	ctx := context.Background()
	pass(t, f.agent(), f.name)
	b := f.get().Status.Boot
	if b == nil || b.State != v1alpha1.BootStaged {
		t.Fatalf("after staging: %+v", b)
	}
	record := f.root.Path("var/lib/latencytier/" + rebootFile)
	refused := func(t *testing.T, want string) {
		t.Helper()
		r := f.agent()
		pass(t, r, f.name)
		if *f.reboots != 0 || f.root.Exists(record) {
			t.Fatalf("rebooted %d times (record written: %v) for a request the guard must refuse", *f.reboots, f.root.Exists(record))
		}
		if got := f.get().Status.Boot; got == nil || got.State != v1alpha1.BootStaged || !strings.Contains(got.Message, want) {
			t.Errorf("status.boot %+v, want Staged saying %q", got, want)
		}
		select {
		case ev := <-f.events.Events:
			if !strings.HasPrefix(ev, "Warning RebootRefused ") || !strings.Contains(ev, want) {
				t.Errorf("event %q, want a Warning RebootRefused saying %q", ev, want)
			}
		default:
			t.Errorf("no event for the refused reboot (%s)", want)
		}
	}

	// Forged: Rebooting on a schedulable node.
	f.update(func(s *v1alpha1.LatencyNodeSpec) {
		s.Reboot = &v1alpha1.NodeRebootSpec{Revision: "forged-1", Phase: v1alpha1.RebootRequested, Since: metav1.Now(), BootID: b.BootID}
	})
	refused(t, "node not cordoned by the manager for revision forged-1: the node is schedulable")
	// A person's cordon is not the manager's.
	f.cordon(t, "")
	refused(t, "cordoned without the manager's marker")
	// The manager's marker for another revision.
	f.cordon(t, "gw-0")
	refused(t, `the manager's marker latencytier.io/reboot-cordon names revision "gw-0"`)

	// The manager's cordon, but every slot held (one allowed).
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: slotsNamespace, Name: SlotName(0)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("node-other"), RenewTime: &metav1.MicroTime{Time: time.Now()},
			LeaseDurationSeconds: ptr.To(int32(600))}}
	if err := f.c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	f.cordon(t, "forged-1")
	refused(t, "no reboot slot free: 1 of 1 held by node-other")
	// The admin allows none.
	testroot.Write(t, f.slotsFile, "0")
	refused(t, "no reboot slot: the cluster admin allows 0")
	testroot.Write(t, f.slotsFile, "1")

	// The other node gives its slot back: the agent takes it and reboots once.
	if err := f.c.Get(ctx, types.NamespacedName{Namespace: slotsNamespace, Name: SlotName(0)}, other); err != nil {
		t.Fatal(err)
	}
	other.Spec.HolderIdentity = nil
	if err := f.c.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	pass(t, f.agent(), f.name)
	pass(t, f.agent(), f.name)
	if *f.reboots != 1 {
		t.Fatalf("rebooted %d times with the manager's cordon and a free slot, want 1", *f.reboots)
	}
	holder := func() string {
		t.Helper()
		l := &coordinationv1.Lease{}
		if err := f.c.Get(ctx, types.NamespacedName{Namespace: slotsNamespace, Name: SlotName(0)}, l); err != nil {
			t.Fatal(err)
		}
		return ptr.Deref(l.Spec.HolderIdentity, "")
	}
	if h := holder(); h != f.name {
		t.Fatalf("slot 0 held by %q while the node reboots, want %s", h, f.name)
	}

	// The node comes back: the slot goes back.
	f.boot(t, "77777777-0000-0000-0000-000000000000", "nohz_full=2-3 rcu_nocbs=2-3 isolcpus=managed_irq,2-3 irqaffinity=0-1", "2-3")
	pass(t, f.agent(), f.name)
	if h := holder(); h != "" || *f.reboots != 1 {
		t.Fatalf("after the boot: slot 0 held by %q, %d reboots; want it given back, 1", h, *f.reboots)
	}
	if b := f.get().Status.Boot; b.State != v1alpha1.BootBooted || b.RebootedFor != "forged-1" {
		t.Errorf("after the boot: %+v", b)
	}
}
