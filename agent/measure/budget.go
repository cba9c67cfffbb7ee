package measure

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/ratio"
)

// budgetInput is what the budget is judged on.
type budgetInput struct {
	budget *v1alpha1.LatencyBudget
	// p99 is the node-wide run-queue p99; nil when not measured.
	p99 *metav1.Duration
	// throttled is the highest throttled ratio of an opted-in pod, and
	// throttledPod names it.
	throttled    float64
	throttledPod string
}

// budgetCondition is the WithinBudget condition (without transition time):
// True when every budgeted figure is inside its budget, False when one is
// outside, Unknown when a budgeted figure was not measured.
func budgetCondition(in budgetInput) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.NodeWithinBudget}
	b := in.budget
	if b == nil || (b.RunQueueP99 == nil && b.ThrottledRatio == nil) {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, v1alpha1.ReasonNoBudget, "the profile sets no latency budget"
		return c
	}
	var outside, within []string
	if b.RunQueueP99 != nil {
		if in.p99 == nil {
			c.Status, c.Reason = metav1.ConditionUnknown, v1alpha1.ReasonNotMeasured
			c.Message = fmt.Sprintf("run-queue latency was not measured; budget p99 %s", b.RunQueueP99.Duration)
			return c
		}
		s := fmt.Sprintf("run-queue p99 %s", in.p99.Duration)
		if in.p99.Duration > b.RunQueueP99.Duration {
			outside = append(outside, s+" > budget "+b.RunQueueP99.Duration.String())
		} else {
			within = append(within, s+" <= budget "+b.RunQueueP99.Duration.String())
		}
	}
	if b.ThrottledRatio != nil {
		limit, ok := ratio.Parse(*b.ThrottledRatio)
		s := fmt.Sprintf("throttled ratio %s", formatRatio(in.throttled))
		if in.throttledPod != "" {
			s += " (" + in.throttledPod + ")"
		}
		if ok && in.throttled > limit {
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

// ChangedMaterially reports whether cur differs enough from prev to be worth
// a status write: a source appeared or went, a class p99 moved by more than
// 10%, the throttled ratio, the set of finding types and severities, the
// budget verdict, or who made the measured pods wait (podWaitsMoved)
// changed. Counts and evidence that move every window do not.
func ChangedMaterially(prev, cur *Result) bool {
	if prev == nil || cur == nil {
		return prev != cur
	}
	if (prev.Latency == nil) != (cur.Latency == nil) || prev.ThrottledRatio != cur.ThrottledRatio {
		return true
	}
	if prev.Budget.Status != cur.Budget.Status || prev.Budget.Reason != cur.Budget.Reason {
		return true
	}
	if findingKeys(prev.Findings) != findingKeys(cur.Findings) {
		return true
	}
	if prev.Latency == nil {
		return false
	}
	if prev.Latency.Source != cur.Latency.Source || len(prev.Latency.Classes) != len(cur.Latency.Classes) {
		return true
	}
	for i, c := range cur.Latency.Classes {
		if P99Moved(prev.Latency.Classes[i].P99, c.P99) {
			return true
		}
	}
	return podWaitsMoved(prev.Latency.Pods, cur.Latency.Pods)
}

func findingKeys(fs []v1alpha1.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.Type + "/" + f.Severity + ";")
	}
	return b.String()
}

// P99Moved says a p99 moved by more than 10% (or appeared or went): the
// move ChangedMaterially counts, and the agent's rule for its evidence.
func P99Moved(a, b *metav1.Duration) bool {
	if a == nil || b == nil {
		return (a == nil) != (b == nil)
	}
	x, y := float64(a.Duration), float64(b.Duration)
	return y > 1.1*x || y < x/1.1
}
