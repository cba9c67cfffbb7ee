package findings

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/ratio"
)

// BudgetInput is what the budget is judged on.
type BudgetInput struct {
	Budget *v1alpha1.LatencyBudget
	// P99 is the node-wide run-queue p99; nil when not measured.
	P99 *metav1.Duration
	// Throttled is the highest throttled ratio of an opted-in pod, and
	// ThrottledPod names it.
	Throttled    float64
	ThrottledPod string
}

// Budget is the WithinBudget condition (without transition time):
// True when every budgeted figure is inside its budget, False when one is
// outside, Unknown when a budgeted figure was not measured.
func Budget(in BudgetInput) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.NodeWithinBudget}
	b := in.Budget
	if b == nil || (b.RunQueueP99 == nil && b.ThrottledRatio == nil) {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, v1alpha1.ReasonNoBudget, "the profile sets no latency budget"
		return c
	}
	var outside, within []string
	if b.RunQueueP99 != nil {
		if in.P99 == nil {
			c.Status, c.Reason = metav1.ConditionUnknown, v1alpha1.ReasonNotMeasured
			c.Message = fmt.Sprintf("run-queue latency was not measured; budget p99 %s", b.RunQueueP99.Duration)
			return c
		}
		s := fmt.Sprintf("run-queue p99 %s", in.P99.Duration)
		if in.P99.Duration > b.RunQueueP99.Duration {
			outside = append(outside, s+" > budget "+b.RunQueueP99.Duration.String())
		} else {
			within = append(within, s+" <= budget "+b.RunQueueP99.Duration.String())
		}
	}
	if b.ThrottledRatio != nil {
		limit, ok := ratio.Parse(*b.ThrottledRatio)
		s := fmt.Sprintf("throttled ratio %s", ratio.Format(in.Throttled))
		if in.ThrottledPod != "" {
			s += " (" + in.ThrottledPod + ")"
		}
		if ok && in.Throttled > limit {
			outside = append(outside, s+" > budget "+*b.ThrottledRatio)
		} else {
			within = append(within, s+" <= budget "+*b.ThrottledRatio)
		}
	}
	if len(outside) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonOutsideBudget
		c.Message = strings.Join(append(outside, within...), "; ")
		return c
	}
	c.Status, c.Reason, c.Message = metav1.ConditionTrue, v1alpha1.ReasonWithinBudget, strings.Join(within, "; ")
	return c
}
