package controllers

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/featuregate"
)

// The manager's --feature-gates: off by default, on when named, and an
// unknown gate refuses to start naming the flag and the gate.
func TestManagerFeatureGatesFlag(t *testing.T) {
	f, err := parseManagerFlags(nil)
	if err != nil || f.gates.Enabled(featuregate.TierScheduler) {
		t.Fatalf("default: gates %v, %v; want TierScheduler off", f.gates, err)
	}
	f, err = parseManagerFlags([]string{"--feature-gates=TierScheduler=true"})
	if err != nil || !f.gates.Enabled(featuregate.TierScheduler) {
		t.Fatalf("--feature-gates=TierScheduler=true: gates %v, %v", f.gates, err)
	}
	_, err = parseManagerFlags([]string{"--feature-gates=TierSched=true"})
	if err == nil || !strings.Contains(err.Error(), "--feature-gates") || !strings.Contains(err.Error(), `unknown feature gate "TierSched"`) ||
		!strings.Contains(err.Error(), "TierScheduler") {
		t.Fatalf("unknown gate: %v; want an error naming the flag, the gate and the known gates", err)
	}
}

func tierProfile(s *v1alpha1.SchedulerSpec) *v1alpha1.LatencyProfile {
	p := &v1alpha1.LatencyProfile{ObjectMeta: metav1.ObjectMeta{Name: "tier", Generation: 3}}
	p.Spec.Scheduler = s
	return p
}

// With the gate off the manager acts on a Tier profile without the class
// (and without spec.scheduler when the class was all it set, so the
// revision is the profile's that never asked); with it on, or for Fair,
// unchanged. The profile read from the cache is never changed.
func TestGatedProfile(t *testing.T) {
	off, on := featuregate.Gates{}, featuregate.Gates{}.With(featuregate.TierScheduler, true)
	tier, fair := ptr.To(v1alpha1.SchedulerClassTier), ptr.To(v1alpha1.SchedulerClassFair)
	dis := ptr.To(v1alpha1.Disabled)
	for _, tc := range []struct {
		name  string
		in    *v1alpha1.SchedulerSpec
		gates featuregate.Gates
		want  *v1alpha1.SchedulerSpec
	}{
		{"tier, gate off, class only", &v1alpha1.SchedulerSpec{Class: tier}, off, nil},
		{"tier, gate off, with autogroup", &v1alpha1.SchedulerSpec{Class: tier, Autogroup: dis}, off, &v1alpha1.SchedulerSpec{Autogroup: dis}},
		{"tier, gate on", &v1alpha1.SchedulerSpec{Class: tier}, on, &v1alpha1.SchedulerSpec{Class: tier}},
		{"fair, gate off", &v1alpha1.SchedulerSpec{Class: fair}, off, &v1alpha1.SchedulerSpec{Class: fair}},
		{"no class", &v1alpha1.SchedulerSpec{Autogroup: dis}, off, &v1alpha1.SchedulerSpec{Autogroup: dis}},
		{"no scheduler", nil, off, nil},
	} {
		p := tierProfile(tc.in)
		before := p.DeepCopy()
		got := gatedProfile(p, tc.gates)
		if !equality.Semantic.DeepEqual(got.Spec.Scheduler, tc.want) {
			t.Errorf("%s: scheduler %+v, want %+v", tc.name, got.Spec.Scheduler, tc.want)
		}
		if !equality.Semantic.DeepEqual(p, before) {
			t.Errorf("%s: gatedProfile changed its argument", tc.name)
		}
		// What a node is given and the revision follow the gated profile.
		if gotClass := applySpec(got).Tuning.Scheduler; !equality.Semantic.DeepEqual(gotClass, tc.want) {
			t.Errorf("%s: LatencyNode spec scheduler %+v, want %+v", tc.name, gotClass, tc.want)
		}
	}
	// Refused, the revision is that of the same profile without the class.
	refused := gatedProfile(tierProfile(&v1alpha1.SchedulerSpec{Class: tier, Autogroup: dis}), off)
	if currentRevision(refused) != currentRevision(tierProfile(&v1alpha1.SchedulerSpec{Autogroup: dis})) {
		t.Error("a refused class still changes the revision")
	}
	if currentRevision(gatedProfile(tierProfile(&v1alpha1.SchedulerSpec{Class: tier, Autogroup: dis}), on)) == currentRevision(refused) {
		t.Error("turning the gate on does not make a new revision")
	}
}

// The profile says why its class is not applied, once: False with the
// gate's name and flag, an event only when it turns False; True with the
// gate on; gone when the profile no longer asks for Tier.
func TestSchedulerClassCondition(t *testing.T) {
	off, on := featuregate.Gates{}, featuregate.Gates{}.With(featuregate.TierScheduler, true)
	now := metav1.Now()
	p := tierProfile(&v1alpha1.SchedulerSpec{Class: ptr.To(v1alpha1.SchedulerClassTier)})
	var conds []metav1.Condition
	if !setSchedulerClassCondition(&conds, p, off, now) {
		t.Error("first refusal: no event")
	}
	c := meta.FindStatusCondition(conds, v1alpha1.ProfileSchedulerClassAccepted)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonFeatureGateDisabled || c.ObservedGeneration != 3 ||
		!strings.Contains(c.Message, "TierScheduler") || !strings.Contains(c.Message, "--feature-gates=TierScheduler=true") {
		t.Fatalf("gate off: %+v", c)
	}
	if setSchedulerClassCondition(&conds, p, off, now) {
		t.Error("a standing refusal raised a second event")
	}
	setSchedulerClassCondition(&conds, p, on, now)
	if c := meta.FindStatusCondition(conds, v1alpha1.ProfileSchedulerClassAccepted); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonFeatureGateEnabled {
		t.Errorf("gate on: %+v", c)
	}
	setSchedulerClassCondition(&conds, tierProfile(nil), off, now)
	if len(conds) != 0 {
		t.Errorf("no Tier asked: conditions %+v, want none", conds)
	}
}
