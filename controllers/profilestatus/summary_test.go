package profilestatus

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// TestProfileSummary: every column kubectl get latencyprofiles prints
// beside the counts is a figure of the status or "-", never empty; the
// rollout's counts are "-" without a rollout and numbers (0 too) with one.
func TestProfileSummary(t *testing.T) {
	dash := v1alpha1.SummaryUnknown
	for name, c := range map[string]struct {
		st   v1alpha1.LatencyProfileStatus
		want v1alpha1.ProfileSummary
	}{
		"nothing yet": {v1alpha1.LatencyProfileStatus{}, v1alpha1.ProfileSummary{WorstP99: dash, Throttled: dash,
			Ready: dash, Reason: dash, Rollout: dash, Revision: dash, Improved: dash, Unchanged: dash, Regressed: dash, Inconclusive: dash}},
		"ready, rolled back": {v1alpha1.LatencyProfileStatus{
			WorstRunQueueP99: &metav1.Duration{Duration: 6400 * time.Microsecond}, MaxThrottledRatio: "1.0000",
			Conditions: []metav1.Condition{{Type: v1alpha1.ProfileReady, Status: metav1.ConditionFalse, Reason: "RolledBack"}},
			Rollout:    &v1alpha1.RolloutStatus{Phase: "RolledBack", Revision: "gw-b732907b", Regressed: 1},
		}, v1alpha1.ProfileSummary{WorstP99: "6.4ms", Throttled: "1.0000", Ready: "False", Reason: "RolledBack",
			Rollout: "RolledBack", Revision: "gw-b732907b", Improved: "0", Unchanged: "0", Regressed: "1", Inconclusive: "0"}},
	} {
		if got := v1alpha1.SummarizeProfile(c.st); got != c.want {
			t.Errorf("%s: got %+v\nwant %+v", name, got, c.want)
		}
	}
}
