package figures

import (
	"math"
	"testing"
	"time"
)

// Moved is a move from the written value by Factor, up or down,
// each side first raised to its floor.
func TestMoved(t *testing.T) {
	us := float64(time.Microsecond)
	for _, c := range []struct {
		x, y, floor float64
		want        bool
	}{
		{40 * us, 40 * us, DurationFloor, false},
		{40 * us, 70 * us, DurationFloor, false},
		{40 * us, 72 * us, DurationFloor, true},
		{40 * us, 23 * us, DurationFloor, false},
		{40 * us, 22 * us, DurationFloor, true},
		{2 * us, 9 * us, DurationFloor, false}, // both at the floor
		{2 * us, 18 * us, DurationFloor, true}, // 10 µs → 18 µs
		{0, 0.004, RatioFloor, false},          // under the floor
		{0, 0.01, RatioFloor, true},            // from 0 to 1%
		{math.NaN(), 40 * us, DurationFloor, true},
		{40 * us, math.NaN(), DurationFloor, true},
		{math.NaN(), math.NaN(), DurationFloor, false},
	} {
		if got := Moved(c.x, c.y, c.floor); got != c.want {
			t.Errorf("Moved(%g, %g, %g) = %v, want %v", c.x, c.y, c.floor, got, c.want)
		}
	}
	// The manager's copy of "" (kubectl: "-") once showed "-" for good
	// when the node's ratio became "0.0000".
	if !RatioMoved("", "0") || !RatioMoved("0.0000", "") || RatioMoved("", "x") || RatioMoved("0", "0.001") {
		t.Error("a ratio appearing or going is not a move, or one under the floor is")
	}
}

// A Rule moves by its own factor; Never only on a figure appearing or
// going.
func TestRules(t *testing.T) {
	us := float64(time.Microsecond)
	for _, c := range []struct {
		f    Rule
		x, y float64
		want bool
	}{
		{Factor, 800 * us, 1770 * us, true}, // the holdout's ×2.2 wander
		{Sudden, 800 * us, 1770 * us, false},
		{Sudden, 1830 * us, 7910 * us, true}, // the holdout's hog
		{Sudden, 7910 * us, 1830 * us, true}, // and its going
		{Never, 1 * us, 1e9 * us, false},
		{Never, math.NaN(), 40 * us, true},
		{Never, 40 * us, math.NaN(), true},
	} {
		if got := c.f.Moved(c.x, c.y, DurationFloor); got != c.want {
			t.Errorf("Rule(%g).Moved(%g, %g) = %v, want %v", float64(c.f), c.x, c.y, got, c.want)
		}
	}
	if Never.RatioMoved("0", "0.9") || !Never.RatioMoved("", "0.9") {
		t.Error("Never moves a ratio by its value, or not by its appearing")
	}
}
