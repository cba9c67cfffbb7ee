package loop

import (
	"slices"
	"strings"
	"time"

	"latencytier.io/latencytier/agent/apply"
)

// heldDrift is a drift and when it was last found.
type heldDrift struct {
	apply.Drift
	at time.Time
}

// driftHold is how long Drifted stays True after the last drift.
func (r *Reconciler) driftHold() time.Duration {
	return max(10*r.Resync, time.Minute)
}

// drifts records this pass's drifts and returns those still within the
// hold, by setting. A setting found drifted again within its hold extends
// the hold and keeps the values first reported (the log has each one), so a
// drift repeated on every pass (irqbalance every 10s, perhaps to other CPUs)
// gives the same list and no status write.
func (r *Reconciler) drifts(found []apply.Drift, now time.Time) []apply.Drift {
	if r.driftSeen == nil {
		r.driftSeen = map[string]heldDrift{}
	}
	for _, d := range found {
		if held, ok := r.driftSeen[d.ID]; ok && now.Sub(held.at) < r.driftHold() {
			d = held.Drift
		}
		r.driftSeen[d.ID] = heldDrift{Drift: d, at: now}
	}
	var out []apply.Drift
	for id, d := range r.driftSeen {
		if now.Sub(d.at) >= r.driftHold() {
			delete(r.driftSeen, id)
			continue
		}
		out = append(out, d.Drift)
	}
	slices.SortFunc(out, func(a, b apply.Drift) int { return strings.Compare(a.ID, b.ID) })
	return out
}
