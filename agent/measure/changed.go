package measure

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/api/v1alpha1"
)

// ChangedMaterially reports whether cur differs enough from prev to be worth
// a status write: a source appeared or went, a class p99 moved by more than
// 10%, the throttled ratio, the set of finding types and severities, the
// budget verdict, the contention condition, or who made the measured pods wait (podWaitsMoved)
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
	if prev.Contention.Status != cur.Contention.Status || prev.Contention.Reason != cur.Contention.Reason {
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
