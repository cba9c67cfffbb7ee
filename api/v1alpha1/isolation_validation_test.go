package v1alpha1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// cpus.partition takes None, Isolated or Root; anything else is refused
// naming the field.
func TestCPUPartitionIsAnEnum(t *testing.T) {
	cpus := "cpus:\n  reserved: \"0\"\n  isolated: \"1-3\"\n  namespaceSelector: {}\n  partition: "
	for _, p := range []string{"None", "Isolated", "Root"} {
		obj := profile(t, "partition-"+strings.ToLower(p), selector+cpus+p)
		if err := k8s.Create(context.Background(), obj); err != nil {
			t.Errorf("cpus.partition %s rejected: %v", p, err)
			continue
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
	}
	err := k8s.Create(context.Background(), profile(t, "partition-bad", selector+cpus+"Exclusive"))
	if err == nil || !strings.Contains(err.Error(), "spec.cpus.partition") {
		t.Errorf("cpus.partition Exclusive: %v, want a rejection naming spec.cpus.partition", err)
	}
}

// status.isolation is stored as the agent writes it and shown by
// kubectl get -o wide (Partitions, Needs-Boot).
func TestIsolationStatusAndColumns(t *testing.T) {
	ctx := context.Background()
	ln := &v1alpha1.LatencyNode{
		ObjectMeta: metav1.ObjectMeta{Name: "0-isolation"},
		Spec:       v1alpha1.LatencyNodeSpec{Action: v1alpha1.ActionApply, Profile: "gateway", ProfileGeneration: 1},
	}
	if err := k8s.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, ln) })
	patch := client.MergeFrom(ln.DeepCopy())
	ln.Status.Isolation = &v1alpha1.IsolationStatus{Partitions: v1alpha1.IsolationLive, Confinement: v1alpha1.IsolationLive,
		IRQSteering: v1alpha1.IsolationOff, NeedsBoot: []v1alpha1.BootIsolationGoal{v1alpha1.BootGoalTick, v1alpha1.BootGoalRCUCallbacks}}
	ln.Status.Summary = v1alpha1.SummarizeNode(ln.Status) // as the agent writes it
	if err := k8s.Status().Patch(ctx, ln, patch); err != nil {
		t.Fatal(err)
	}
	cols, row := table(t, "latencynodes")
	for c, v := range map[string]string{"Partitions": "Live", "Needs-Boot": "Tick"} {
		i := indexOf(cols, c)
		if i < 0 {
			t.Fatalf("LatencyNode table lacks column %q: %v", c, cols)
		}
		if got := fmt.Sprint(row[i]); !strings.Contains(got, v) {
			t.Errorf("column %s = %v, want %s", c, got, v)
		}
	}
	bad := ln.DeepCopy()
	patch = client.MergeFrom(ln.DeepCopy())
	bad.Status.Isolation.Partitions = "Sometimes"
	if err := k8s.Status().Patch(ctx, bad, patch); err == nil || !strings.Contains(err.Error(), "status.isolation.partitions") {
		t.Errorf("isolation.partitions Sometimes: %v, want a rejection naming the field", err)
	}
}
