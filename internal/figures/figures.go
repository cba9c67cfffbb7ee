// Package figures is the one rule for when a measured figure has moved
// enough to be written again (issue 43). A real node's run-queue p99
// wanders from window to window under ordinary load; a reader acts on a
// figure that doubled or halved, not on that wander. The agent applies the
// rule to its LatencyNode status, the manager to the copies in a
// profile's status, each against what it last wrote: that comparison is
// the hysteresis (a figure wandering within Factor of its written value is
// never written for it, wherever the value sits). It imports nothing of
// the project.
package figures

import (
	"math"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Factor is how far a figure moves, up or down, from the value last
// written before it is written again. Below 2 so that a doubling (a hog)
// is written at once; above the ×1.5–1.7 that a p99 wanders window to
// window under ordinary load, so that wander is not.
const Factor = 1.8

// Sudden is how far a figure moves in one window to be written from that
// window alone. A move by Factor but less than Sudden is written only when
// the next window confirms it (the agent's reportDue): a real node's p99
// wandered ×2.2 in a single window under a periodic burner (the holdout,
// issue 43), which a reader does not act on, while a hog holds its move
// window after window (the holdout's hog: ×4.3, written from its first
// window).
const Sudden = 3.0

// A Rule is the factor a figure moves by, up or down, to count as moved:
// Factor, Sudden, or Never.
type Rule float64

// Never is the Rule no figure moves by: only a figure appearing or going
// (unknown to known) counts. A comparison under Never names what changed
// apart from the figures' values.
var Never = Rule(math.Inf(1))

// Figures below these floors count as the floor: a p99 going from 3 µs to
// 8 µs, or a throttled ratio from 0.1% to 0.3%, changes nothing a reader
// does (a budget or a verdict acts far above them), and an idle node's
// figures hop about there.
const (
	DurationFloor = float64(10 * time.Microsecond)
	RatioFloor    = 0.005
)

// WaitFloor is the least run-queue wait per second of a measured pod
// (summed over its tasks) that a reader acts on. Below it a pod's wait, a
// sum over a few wakeups, hops about from window to window: it is written
// as the floor, who caused it is not compared, and nothing is judged on it
// (no NoisyNeighbor finding, no RunQueueContention; the CRD's least
// measurement.contention.waitPerSecond). It is a floor, not a threshold:
// the figures a finding or the condition acts on sit well above it.
const WaitFloor = float64(time.Millisecond)

// Moved says x moved to y by Factor or more, each first raised to floor.
// Unknown figures (NaN) move only to or from a known one.
func Moved(x, y, floor float64) bool { return Rule(Factor).Moved(x, y, floor) }

// Moved says x moved to y by f or more, each first raised to floor.
// Unknown figures (NaN) move only to or from a known one.
func (f Rule) Moved(x, y, floor float64) bool {
	if math.IsNaN(x) || math.IsNaN(y) {
		return math.IsNaN(x) != math.IsNaN(y)
	}
	x, y = max(x, floor), max(y, floor)
	return y >= float64(f)*x || x >= float64(f)*y
}

// DurationMoved is Moved for a duration; absent is unknown.
func DurationMoved(w, n *metav1.Duration) bool { return Rule(Factor).DurationMoved(w, n) }

// DurationMoved is f's Moved for a duration; absent is unknown.
func (f Rule) DurationMoved(w, n *metav1.Duration) bool {
	return f.Moved(durationFigure(w), durationFigure(n), DurationFloor)
}

func durationFigure(d *metav1.Duration) float64 {
	if d == nil {
		return math.NaN()
	}
	return float64(d.Duration)
}

// RatioMoved is Moved for a decimal ratio ("0.013"); "" and an unparsable
// ratio are unknown, so a ratio appearing ("" → "0.0000": kubectl shows
// "-" then 0) or going is a move.
func RatioMoved(w, n string) bool { return Rule(Factor).RatioMoved(w, n) }

// RatioMoved is f's Moved for a decimal ratio, as the package's RatioMoved.
func (f Rule) RatioMoved(w, n string) bool {
	return f.Moved(ratioFigure(w), ratioFigure(n), RatioFloor)
}

func ratioFigure(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return f
}
