package loop

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// nodeSummary is what kubectl get latencynodes prints for st: each column's
// figure, or "-" where st has none (printer columns print a missing field
// as an empty cell).
func nodeSummary(st v1alpha1.LatencyNodeStatus) v1alpha1.NodeSummary {
	s := v1alpha1.NodeSummary{
		Applied:    conditionStatus(st.Conditions, v1alpha1.NodeApplied),
		P99:        durationText(st.RunQueueP99),
		Drift:      conditionStatus(st.Conditions, v1alpha1.NodeDrifted),
		Throttled:  orUnknown(st.ThrottledRatio),
		Budget:     conditionStatus(st.Conditions, v1alpha1.NodeWithinBudget),
		Reboot:     conditionStatus(st.Conditions, v1alpha1.NodeRebootRequired),
		Partitions: v1alpha1.SummaryUnknown,
		Boot:       v1alpha1.SummaryUnknown,
		NeedsBoot:  v1alpha1.SummaryUnknown,
		Kernel:     v1alpha1.SummaryUnknown,
	}
	s.BaselineP99, s.PodBaselineP99 = evidenceP99s(st.Baseline)
	_, s.PodP99 = evidenceP99s(st.Current)
	if st.Isolation != nil {
		s.Partitions = orUnknown(string(st.Isolation.Partitions))
		goals := make([]string, len(st.Isolation.NeedsBoot))
		for i, g := range st.Isolation.NeedsBoot {
			goals[i] = string(g)
		}
		s.NeedsBoot = orUnknown(strings.Join(goals, ","))
	}
	if st.Boot != nil {
		s.Boot = orUnknown(string(st.Boot.State))
	}
	if st.Kernel != nil {
		s.Kernel = orUnknown(st.Kernel.Version)
	}
	return s
}

// evidenceP99s are an evidence window's run-queue and pod p99s.
func evidenceP99s(e *v1alpha1.LatencyEvidence) (runQueue, pods string) {
	if e == nil {
		return v1alpha1.SummaryUnknown, v1alpha1.SummaryUnknown
	}
	pods = v1alpha1.SummaryUnknown
	if e.Pods != nil {
		pods = durationText(e.Pods.P99)
	}
	return durationText(e.RunQueue.P99), pods
}

func conditionStatus(cs []metav1.Condition, typ string) string {
	if c := meta.FindStatusCondition(cs, typ); c != nil {
		return orUnknown(string(c.Status))
	}
	return v1alpha1.SummaryUnknown
}

func durationText(d *metav1.Duration) string {
	if d == nil {
		return v1alpha1.SummaryUnknown
	}
	return d.Duration.String()
}

func orUnknown(s string) string {
	if s == "" {
		return v1alpha1.SummaryUnknown
	}
	return s
}
