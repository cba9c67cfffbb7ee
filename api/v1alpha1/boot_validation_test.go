package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// A partition is made of granted pods' CPUs within cpus.isolated, so asking
// for one without isolated CPUs is refused at admission (issue 25: before
// this rule the agent silently made no partition).
func TestPartitionNeedsIsolatedCPUs(t *testing.T) {
	for name, body := range map[string]string{
		"isolated": "cpus:\n  reserved: \"0\"\n  partition: Isolated\n",
		"root":     "cpus:\n  reserved: \"0\"\n  partition: Root\n",
	} {
		err := k8s.Create(context.Background(), profile(t, "partition-noiso-"+name, selector+body))
		if err == nil || !strings.Contains(err.Error(), "cpus.partition Isolated or Root needs cpus.isolated") {
			t.Errorf("%s partition without cpus.isolated: %v, want the rule's message", name, err)
		}
	}
	ok := profile(t, "partition-none-noiso", selector+"cpus:\n  reserved: \"0\"\n  partition: None\n")
	if err := k8s.Create(context.Background(), ok); err != nil {
		t.Errorf("partition None without cpus.isolated refused: %v", err)
	} else {
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), ok) })
	}
}

// bootParameters: typed extras only, bounded; derived arguments need
// isolated CPUs; the policy and the reboot timeouts are validated by the API
// server, naming the field.
func TestBootParametersValidation(t *testing.T) {
	accept := map[string]string{
		"isolated":       isolatedCPUs + "bootParameters: {}\n",
		"reboot":         isolatedCPUs + "bootParameters:\n  policy: Reboot\nreboot:\n  drainTimeout: 5m\n  bootTimeout: 20m\n" + canaryRollout,
		"extras-only":    "bootParameters:\n  skewTick: Enabled\n  maxCState: 1\n",
		"cstate-zero":    "bootParameters:\n  maxCState: 0\n",
		"report-default": isolatedCPUs + "bootParameters:\n  policy: ReportOnly\n",
	}
	for name, body := range accept {
		obj := profile(t, "boot-ok-"+name, selector+body)
		if err := k8s.Create(context.Background(), obj); err != nil {
			t.Errorf("%s: rejected: %v", name, err)
			continue
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
		if p, _, _ := unstructured.NestedString(obj.Object, "spec", "bootParameters", "policy"); name == "isolated" && p != string(v1alpha1.BootReportOnly) {
			t.Errorf("bootParameters.policy defaulted to %q, want ReportOnly", p)
		}
	}
	refuse := map[string][2]string{
		"nothing":  {"bootParameters: {}\n", "bootParameters needs cpus.isolated or an extra"},
		"policy":   {isolatedCPUs + "bootParameters:\n  policy: Always\n", "spec.bootParameters.policy"},
		"cstate":   {"bootParameters:\n  maxCState: 10\n", "spec.bootParameters.maxCState"},
		"negative": {"bootParameters:\n  maxCState: -1\n", "spec.bootParameters.maxCState"},
		"skew":     {"bootParameters:\n  skewTick: yes\n", "spec.bootParameters.skewTick"},
		"drain":    {isolatedCPUs + canaryRollout + "bootParameters:\n  policy: Reboot\nreboot:\n  drainTimeout: 10s\n", "reboot.drainTimeout must be between 30s and 24h"},
		"boot":     {isolatedCPUs + canaryRollout + "bootParameters:\n  policy: Reboot\nreboot:\n  bootTimeout: 48h\n", "reboot.bootTimeout must be between 1m and 24h"},
	}
	for name, c := range refuse {
		err := k8s.Create(context.Background(), profile(t, "boot-bad-"+name, selector+c[0]))
		if err == nil || !strings.Contains(err.Error(), c[1]) {
			t.Errorf("%s: %v, want a rejection containing %q", name, err, c[1])
		}
	}
}

// The manager's per-node reboot record and the agent's boot status are
// stored as written, and an unknown phase or state is refused.
func TestBootStatusAndRebootRecord(t *testing.T) {
	ctx := context.Background()
	ln := &v1alpha1.LatencyNode{
		ObjectMeta: metav1.ObjectMeta{Name: "0-boot"},
		Spec: v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionApply, Profile: "gateway", ProfileGeneration: 1,
			Reboot: &v1alpha1.NodeRebootSpec{Revision: "gateway-abc", Phase: v1alpha1.RebootDraining, Since: metav1.Now()}},
	}
	if err := k8s.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, ln) })
	bad := ln.DeepCopy()
	bad.Spec.Reboot.Phase = "Sleeping"
	if err := k8s.Update(ctx, bad); err == nil || !strings.Contains(err.Error(), "spec.reboot.phase") {
		t.Errorf("reboot.phase Sleeping: %v, want a rejection naming spec.reboot.phase", err)
	}
	ln.Status.Boot = &v1alpha1.BootStatus{State: v1alpha1.BootStaged, Backend: "GRUB", BootID: "b1",
		Arguments: []v1alpha1.BootArgument{{Argument: "nohz_full=1-3", Why: "tick", Present: false}}}
	ln.Status.Summary = v1alpha1.SummarizeNode(ln.Status) // as the agent writes it
	if err := k8s.Status().Update(ctx, ln); err != nil {
		t.Fatal(err)
	}
	cols, row := table(t, "latencynodes")
	if i := indexOf(cols, "Boot"); i < 0 || row[i] != "Staged" {
		t.Errorf("Boot column: cols %v row %v, want Staged", cols, row)
	}
	ln.Status.Boot.State = "Maybe"
	if err := k8s.Status().Update(ctx, ln); err == nil || !strings.Contains(err.Error(), "status.boot.state") {
		t.Errorf("boot.state Maybe: %v, want a rejection naming status.boot.state", err)
	}
}
