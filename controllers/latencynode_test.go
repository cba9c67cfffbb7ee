package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/api/v1alpha1"
)

// A node measuring its baseline measures on the profile's interval: the
// Baseline spec carries spec.measurement (and nothing else of the tuning),
// else the agent falls back to its 30s default (seen on the real cluster: a
// 30s baseline window for a profile measuring every 5s).
func TestJoinSpecBaselineCarriesMeasurement(t *testing.T) {
	p := &v1alpha1.LatencyProfile{Spec: v1alpha1.LatencyProfileSpec{
		TuningSpec: v1alpha1.TuningSpec{
			Scheduler:   &v1alpha1.SchedulerSpec{Autogroup: ptr.To(v1alpha1.Disabled)},
			Measurement: &v1alpha1.MeasurementSpec{Interval: &metav1.Duration{Duration: 5 * time.Second}},
		},
		Rollout: &v1alpha1.RolloutSpec{},
	}}
	s := joinSpec(p)
	if s.Action != v1alpha1.ActionBaseline {
		t.Fatalf("action %s, want Baseline", s.Action)
	}
	if m := s.Tuning.Measurement; m == nil || m.Interval == nil || m.Interval.Duration != 5*time.Second {
		t.Fatalf("baseline measurement %+v, want interval 5s", m)
	}
	if s.Tuning.Scheduler != nil {
		t.Fatalf("baseline spec carries scheduler tuning %+v", s.Tuning.Scheduler)
	}
}
