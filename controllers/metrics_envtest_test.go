package controllers

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"latencytier.io/latencytier/api/v1alpha1"
)

// gauge reads a series from controller-runtime's registry (what the
// manager's /metrics endpoint serves); ok is false when it is absent.
func gauge(t testing.TB, name string, lbls map[string]string) (float64, bool) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelsMatch(m, lbls) {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok && v == lp.GetValue() {
			n++
		}
	}
	return n == len(want)
}

func TestProfileMetrics(t *testing.T) {
	needSuite(t)
	createNode(t, "met-1", map[string]string{"tier": "met"})
	createNode(t, "met-2", map[string]string{"tier": "met"})
	createProfile(t, "met", 0, map[string]string{"tier": "met"})
	cleanup(t, []string{"met-1", "met-2"}, []string{"met"})
	expectApplying(t, "met-1", "met")
	expectApplying(t, "met-2", "met")
	playAgent(t, "met-1", appliedTrue)
	playAgent(t, "met-2", metav1.Condition{Type: v1alpha1.NodeApplied, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonApplyFailed, Message: "EPERM"})
	expectCondition(t, "met", v1alpha1.ProfileDegraded, metav1.ConditionTrue, v1alpha1.ReasonNodesDegraded)
	eventually(t, "node state gauges", func() error {
		a, _ := gauge(t, "latencytier_profile_nodes", map[string]string{"profile": "met", "state": "Applied"})
		d, _ := gauge(t, "latencytier_profile_nodes", map[string]string{"profile": "met", "state": "Degraded"})
		if a != 1 || d != 1 {
			return errString("gauges not yet 1 applied / 1 degraded")
		}
		return nil
	})
	expectEvent(t, "met", eventDegraded)
}
