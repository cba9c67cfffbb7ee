package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/api/v1alpha1"
)

func gateProfile(ro *v1alpha1.RolloutSpec) *v1alpha1.LatencyProfile {
	return &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.LatencyProfileSpec{
		TuningSpec: v1alpha1.TuningSpec{BootParameters: &v1alpha1.BootParametersSpec{Policy: v1alpha1.BootReboot}},
		Rollout:    ro}}
}

// TestRebootGate: a Reboot policy stages only under a rollout whose canary
// is smaller than the selection (issue 40).
func TestRebootGate(t *testing.T) {
	count := func(n int32) *v1alpha1.RolloutSpec {
		return &v1alpha1.RolloutSpec{Canary: &v1alpha1.CanarySpec{Nodes: ptr.To(intstr.FromInt32(n))}}
	}
	pct := func(s string) *v1alpha1.RolloutSpec {
		return &v1alpha1.RolloutSpec{Canary: &v1alpha1.CanarySpec{Nodes: ptr.To(intstr.FromString(s))}}
	}
	selector := &v1alpha1.RolloutSpec{Canary: &v1alpha1.CanarySpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "yes"}}}}
	for _, tc := range []struct {
		name               string
		p                  *v1alpha1.LatencyProfile
		selected, canaries int
		open               bool
		reason             string
	}{
		{"no Reboot policy", &v1alpha1.LatencyProfile{}, 3, 0, true, ""},
		{"no rollout", gateProfile(nil), 10, 0, false, v1alpha1.ReasonRebootsNeedRollout},
		{"1 of 3", gateProfile(count(1)), 3, 0, true, v1alpha1.ReasonCanarySmaller},
		{"3 of 3", gateProfile(count(3)), 3, 0, false, v1alpha1.ReasonCanaryNotSmaller},
		{"5 of 3", gateProfile(count(5)), 3, 0, false, v1alpha1.ReasonCanaryNotSmaller},
		{"1 of 1", gateProfile(count(1)), 1, 0, false, v1alpha1.ReasonCanaryNotSmaller},
		{"100%", gateProfile(pct("100%")), 4, 0, false, v1alpha1.ReasonCanaryNotSmaller},
		{"50% of 4", gateProfile(pct("50%")), 4, 0, true, v1alpha1.ReasonCanarySmaller},
		{"99% of 4 rounds up to all", gateProfile(pct("99%")), 4, 0, false, v1alpha1.ReasonCanaryNotSmaller},
		{"selector matches 1 of 3", gateProfile(selector), 3, 1, true, v1alpha1.ReasonCanarySmaller},
		{"selector matches all", gateProfile(selector), 3, 3, false, v1alpha1.ReasonCanaryNotSmaller},
		{"selector matches none: no canary", gateProfile(selector), 3, 0, false, v1alpha1.ReasonCanaryNotSmaller},
		{"no canary, maxInFlight 1 of 2", gateProfile(&v1alpha1.RolloutSpec{}), 2, 0, true, v1alpha1.ReasonCanarySmaller},
		{"no canary, maxInFlight 100%", gateProfile(&v1alpha1.RolloutSpec{MaxInFlight: ptr.To(intstr.FromString("100%"))}), 5, 0, false, v1alpha1.ReasonCanaryNotSmaller},
		{"nothing selected", gateProfile(count(1)), 0, 0, false, v1alpha1.ReasonCanaryNotSmaller},
	} {
		g := rebootGateOf(tc.p, tc.selected, tc.canaries)
		if g.Open != tc.open || g.Reason != tc.reason {
			t.Errorf("%s: open %v reason %q (%s), want %v %q", tc.name, g.Open, g.Reason, g.Message, tc.open, tc.reason)
		}
		tuning := gatedTuning(tc.p.Spec.TuningSpec, g)
		stages := tuning.BootParameters != nil && tuning.BootParameters.Policy == v1alpha1.BootReboot
		if stages != (tc.open && tc.reason != "") {
			t.Errorf("%s: written tuning stages %v", tc.name, stages)
		}
	}
}

// TestDirectTuningStagesNothingWithoutARollout: the node controller's
// spec for a profile without spec.rollout never carries policy Reboot, and
// a node holding it is rewritten (issue 40: every node staged untested
// arguments at once).
func TestDirectTuningStagesNothingWithoutARollout(t *testing.T) {
	p := gateProfile(nil)
	p.Generation = 1
	spec := applySpec(p)
	if bp := spec.Tuning.BootParameters; bp == nil || bp.Policy != v1alpha1.BootReportOnly {
		t.Fatalf("applySpec without a rollout: bootParameters %+v, want policy ReportOnly", bp)
	}
	if p.Spec.BootParameters.Policy != v1alpha1.BootReboot {
		t.Fatal("applySpec changed the profile")
	}
	if spec.Revision != currentRevision(p) {
		t.Errorf("revision %s, want the profile's %s", spec.Revision, currentRevision(p))
	}
	ln := &v1alpha1.LatencyNode{Spec: spec}
	if !specUpToDate(ln, p, currentRevision(p)) {
		t.Error("the gated spec is not up to date: the node controller would write it again and again")
	}
	ln.Spec.Tuning = *p.Spec.TuningSpec.DeepCopy()
	if specUpToDate(ln, p, currentRevision(p)) {
		t.Error("a node holding policy Reboot without a rollout is up to date: it stays staged")
	}
}

func TestRebootsCondition(t *testing.T) {
	now := metav1.NewTime(time.Unix(100, 0))
	var conds []metav1.Condition
	closed := rebootGateOf(gateProfile(nil), 3, 0)
	if !setRebootsCondition(&conds, closed, 1, now) {
		t.Error("closing reported no change")
	}
	c := meta.FindStatusCondition(conds, v1alpha1.ProfileRebootsAllowed)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonRebootsNeedRollout || c.Message == "" {
		t.Fatalf("condition %+v", c)
	}
	if setRebootsCondition(&conds, closed, 1, now) {
		t.Error("still closed reported as closing again (an event per pass)")
	}
	setRebootsCondition(&conds, rebootGate{Open: true}, 1, now)
	if meta.FindStatusCondition(conds, v1alpha1.ProfileRebootsAllowed) != nil {
		t.Error("condition kept without a Reboot policy")
	}
}
