package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/knobs"
)

// fallbackWhy is the kernel's reason as the agent reports it (the format
// of the kernel's check_rq_for_timeouts()).
const fallbackWhy = "kernel ejected latencytier: runnable task stall (kworker/1:2[812] failed to run for 5.004s)"

// fallbackReport is what an agent reports whose scheduler the kernel
// ejected: scheduler/class Fallback with the kernel's reason, and Applied
// False with reason SchedulerFallback (agent/loop appliedCondition).
func fallbackReport() ([]v1alpha1.SettingResult, metav1.Condition) {
	return []v1alpha1.SettingResult{{Setting: knobs.SchedulerClassID, Desired: "ext:latencytier", Actual: "fair",
			State: v1alpha1.SettingFallback, Message: fallbackWhy}},
		metav1.Condition{Type: v1alpha1.NodeApplied, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonSchedulerFallback,
			Message: "the kernel ejected the scheduler, the node fell back to the fair class (" + knobs.SchedulerClassID + ": " + fallbackWhy + ")"}
}

func tierClass(p *v1alpha1.LatencyProfile) {
	p.Spec.Scheduler.Class = ptr.To(v1alpha1.SchedulerClassTier)
}

// A canary whose kernel ejects the Tier scheduler (scheduler/class
// Fallback) fails: the rollout stops before any other node gets the class
// and rolls the canary back to the revision without it (issue 47). Fails
// before the API's Fallback state: the API server refuses the agent's
// report, and the canary is never failed for its scheduler.
func TestRolloutCanaryFallbackRollsBackAndStops(t *testing.T) {
	needSuite(t)
	nodes, p := rolloutFleet(t, "ro-scx", 6, rolloutPolicy(1, 2))
	sim := startSimAgents(t, nodes, 5*time.Second)
	r1 := currentRevision(p)
	expectRollout(t, "ro-scx", v1alpha1.RolloutComplete)

	r2 := revisionAfter(p, tierClass)
	sim.set(func(s *simAgents) { s.target = r2; s.fallback["ro-scx-00/"+r2] = true })
	editProfile(t, "ro-scx", tierClass)
	eventually(t, "the canary given class Tier", func() error {
		ln, err := getLN("ro-scx-00")
		if err != nil {
			return err
		}
		if s := ln.Spec.Tuning.Scheduler; ln.Spec.Revision == r2 && (s == nil || s.Class == nil || *s.Class != v1alpha1.SchedulerClassTier) {
			return fmt.Errorf("canary at %s without class Tier: %+v", r2, s)
		}
		return nil
	})
	back := expectRollout(t, "ro-scx", v1alpha1.RolloutRolledBack)
	want := "node ro-scx-00 failed to apply: " + v1alpha1.ReasonSchedulerFallback
	if ro := back.Status.Rollout; ro.PreviousRevision != r1 || !strings.Contains(ro.Message, want) || !strings.Contains(ro.Message, fallbackWhy) {
		t.Fatalf("rollout = %+v, want a message with %q and the kernel's reason", ro, want)
	}
	expectCanaryRolledBack(t, sim, "ro-scx", "ro-scx-00", nodes, r1, r2)
	ln, err := getLN("ro-scx-00")
	if err != nil {
		t.Fatal(err)
	}
	if s := ln.Spec.Tuning.Scheduler; s != nil && s.Class != nil {
		t.Fatalf("rolled-back canary still asks for class %s", *s.Class)
	}
}

// The admission policy latencytier-tier-scheduler-gate (shipped in
// config/admission while the manager's gate is off) refuses a profile
// asking for class Tier, naming the gate and how to turn it on; Fair and
// a profile without a class pass. The suite's own manager runs with the
// gate on, so the policy is applied here only, and removed after.
func TestTierSchedulerGatePolicy(t *testing.T) {
	needSuite(t)
	ctx := context.Background()
	const path = "../config/admission/tier-scheduler-gate.yaml"
	if err := applyFile(ctx, path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteFile(t, path) })
	base := v1alpha1.LatencyProfile{Spec: v1alpha1.LatencyProfileSpec{
		NodeSelector: metav1.LabelSelector{MatchLabels: map[string]string{"scx-gate": "none"}}}}
	tier := base.DeepCopy()
	tier.Name = "scx-gate-tier"
	tier.Spec.Scheduler = &v1alpha1.SchedulerSpec{Class: ptr.To(v1alpha1.SchedulerClassTier)}
	eventually(t, "Tier refused by the policy", func() error {
		err := k8s.Create(ctx, tier.DeepCopy())
		if err == nil {
			_ = k8s.Delete(ctx, tier.DeepCopy())
			return fmt.Errorf("created")
		}
		if !strings.Contains(err.Error(), "TierScheduler") || !strings.Contains(err.Error(), "--feature-gates=TierScheduler=true") ||
			!strings.Contains(err.Error(), "spec.scheduler.class") {
			return fmt.Errorf("refused without naming the gate: %v", err)
		}
		return nil
	})
	fair := base.DeepCopy()
	fair.Name = "scx-gate-fair"
	fair.Spec.Scheduler = &v1alpha1.SchedulerSpec{Class: ptr.To(v1alpha1.SchedulerClassFair)}
	if err := k8s.Create(ctx, fair); err != nil {
		t.Fatalf("class Fair refused: %v", err)
	}
	cleanup(t, nil, []string{fair.Name})
	// Turning a profile Tier on update is refused too.
	patched := fair.DeepCopy()
	patched.Spec.Scheduler.Class = ptr.To(v1alpha1.SchedulerClassTier)
	if err := k8s.Patch(ctx, patched, client.MergeFrom(fair)); err == nil || !strings.Contains(err.Error(), "TierScheduler") {
		t.Fatalf("Fair → Tier update: %v, want refused", err)
	}
}

// deleteFile deletes every object of a multi-document YAML file applyFile
// created.
func deleteFile(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("%s: %v", path, err)
			}
			return
		}
		if len(u.Object) > 0 {
			if err := client.IgnoreNotFound(k8s.Delete(context.Background(), &u)); err != nil {
				t.Errorf("%s: deleting %s %s: %v", path, u.GetKind(), u.GetName(), err)
			}
		}
	}
}
