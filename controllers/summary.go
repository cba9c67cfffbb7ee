package controllers

import (
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"

	"latencytier.io/latencytier/api/v1alpha1"
)

// profileSummary is what kubectl get latencyprofiles prints for st beside
// the counts: each column's figure, or "-" where st has none (printer
// columns print a missing field as an empty cell).
func profileSummary(st v1alpha1.LatencyProfileStatus) v1alpha1.ProfileSummary {
	s := v1alpha1.ProfileSummary{
		WorstP99: v1alpha1.SummaryUnknown, Throttled: orUnknown(st.MaxThrottledRatio),
		Ready: v1alpha1.SummaryUnknown, Reason: v1alpha1.SummaryUnknown,
		Rollout: v1alpha1.SummaryUnknown, Revision: v1alpha1.SummaryUnknown,
		Improved: v1alpha1.SummaryUnknown, Unchanged: v1alpha1.SummaryUnknown,
		Regressed: v1alpha1.SummaryUnknown, Inconclusive: v1alpha1.SummaryUnknown,
	}
	if st.WorstRunQueueP99 != nil {
		s.WorstP99 = st.WorstRunQueueP99.Duration.String()
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ProfileReady); c != nil {
		s.Ready, s.Reason = orUnknown(string(c.Status)), orUnknown(c.Reason)
	}
	if r := st.Rollout; r != nil {
		s.Rollout, s.Revision = orUnknown(string(r.Phase)), orUnknown(r.Revision)
		s.Improved, s.Unchanged = strconv.Itoa(int(r.Improved)), strconv.Itoa(int(r.Unchanged))
		s.Regressed, s.Inconclusive = strconv.Itoa(int(r.Regressed)), strconv.Itoa(int(r.Inconclusive))
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return v1alpha1.SummaryUnknown
	}
	return s
}
