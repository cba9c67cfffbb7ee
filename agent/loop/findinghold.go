package loop

import (
	"time"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// findingHold is how long a finding the status shows stays shown after
// the pass that last found it: ten measurement windows, at least a minute,
// as Drifted is held (driftHold). A finding that comes and goes with a load
// at the edge of its threshold (issue 43's e2e: RunQueueOverloaded under a
// 40% burner, found in one window of two or three, with gaps of up to
// four) is then written once when it appears and once when it has stayed
// away, not in every window; a finding that appears is written at once.
func findingHold(m *v1alpha1.MeasurementSpec) time.Duration {
	return max(10*measureInterval(m), time.Minute)
}

// holdFindings is next's findings plus those of written that next lacks
// (by type) and that a pass found within hold of now. It records, in
// r.findingSeen, when each of next's findings was found.
func (r *Reconciler) holdFindings(written, next []v1alpha1.Finding, now time.Time, hold time.Duration) []v1alpha1.Finding {
	if r.findingSeen == nil {
		r.findingSeen = map[string]time.Time{}
	}
	has := make(map[string]bool, len(next))
	for _, f := range next {
		has[f.Type], r.findingSeen[f.Type] = true, now
	}
	out := next
	for _, f := range written {
		if seen, ok := r.findingSeen[f.Type]; !has[f.Type] && ok && now.Sub(seen) < hold {
			out, has[f.Type] = append(out, f), true
		}
	}
	for t, seen := range r.findingSeen {
		if now.Sub(seen) >= hold {
			delete(r.findingSeen, t)
		}
	}
	return out
}
