package v1alpha1_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// A contention spec left out, or its fields, takes the defaults; a value
// outside the CRD's bounds (a LatencyNode is not trusted to have been
// validated) takes its default too, and the problem names the field.
func TestContentionResolved(t *testing.T) {
	def := v1alpha1.ContentionSpec{WaitPerSecond: &metav1.Duration{Duration: v1alpha1.ContentionDefaultWaitPerSecond},
		RaiseAfterWindows: v1alpha1.ContentionDefaultRaiseAfter, ClearAfterWindows: v1alpha1.ContentionDefaultClearAfter}
	d := func(v time.Duration) *metav1.Duration { return &metav1.Duration{Duration: v} }
	for _, c := range []struct {
		name    string
		in      *v1alpha1.ContentionSpec
		want    v1alpha1.ContentionSpec
		problem string
	}{
		{"absent", nil, def, ""},
		{"empty", &v1alpha1.ContentionSpec{}, def, ""},
		{"set", &v1alpha1.ContentionSpec{WaitPerSecond: d(20 * time.Millisecond), RaiseAfterWindows: 4, ClearAfterWindows: 1},
			v1alpha1.ContentionSpec{WaitPerSecond: d(20 * time.Millisecond), RaiseAfterWindows: 4, ClearAfterWindows: 1}, ""},
		{"wait under the floor", &v1alpha1.ContentionSpec{WaitPerSecond: d(0)}, def, "measurement.contention.waitPerSecond 0s"},
		{"wait the idle background", &v1alpha1.ContentionSpec{WaitPerSecond: d(7 * time.Millisecond)}, def,
			"measurement.contention.waitPerSecond 7ms is outside 15ms..10s"},
		{"one window", &v1alpha1.ContentionSpec{RaiseAfterWindows: 1}, def, "measurement.contention.raiseAfterWindows 1"},
		{"negative", &v1alpha1.ContentionSpec{ClearAfterWindows: -3}, def, "measurement.contention.clearAfterWindows -3"},
	} {
		got, problems := c.in.Resolved()
		if got.WaitPerSecond.Duration != c.want.WaitPerSecond.Duration || got.RaiseAfterWindows != c.want.RaiseAfterWindows ||
			got.ClearAfterWindows != c.want.ClearAfterWindows {
			t.Errorf("%s: resolved %v/%d/%d, want %v/%d/%d", c.name, got.WaitPerSecond.Duration, got.RaiseAfterWindows, got.ClearAfterWindows,
				c.want.WaitPerSecond.Duration, c.want.RaiseAfterWindows, c.want.ClearAfterWindows)
		}
		if all := strings.Join(problems, "; "); (c.problem == "") != (all == "") || !strings.Contains(all, c.problem) {
			t.Errorf("%s: problems %q, want one naming %q", c.name, all, c.problem)
		}
	}
}

// MaxTainted: maxTaintedPercent of the selected nodes rounded down, at
// least one of any; the default 25 for a value left out or out of bounds;
// none without the opt-in.
func TestContentionMaxTainted(t *testing.T) {
	on := func(pct int32) *v1alpha1.ContentionSpec {
		return &v1alpha1.ContentionSpec{Taint: v1alpha1.ContentionTaintPreferNoSchedule, MaxTaintedPercent: pct}
	}
	for _, c := range []struct {
		name     string
		spec     *v1alpha1.ContentionSpec
		selected int
		want     int
	}{
		{"no settings", nil, 10, 0},
		{"left out", &v1alpha1.ContentionSpec{}, 10, 0},
		{"None", &v1alpha1.ContentionSpec{Taint: v1alpha1.ContentionTaintNone, MaxTaintedPercent: 100}, 10, 0},
		{"default 25% of 8", on(0), 8, 2},
		{"default 25% of 10 rounds down", on(0), 10, 2},
		{"25% of 3 is at least one", on(25), 3, 1},
		{"1% of 1", on(1), 1, 1},
		{"no nodes", on(100), 0, 0},
		{"100%", on(100), 7, 7},
		{"out of bounds takes the default", on(250), 8, 2},
		{"negative takes the default", on(-5), 8, 2},
	} {
		if got := c.spec.MaxTainted(c.selected); got != c.want {
			t.Errorf("%s: MaxTainted(%d) = %d, want %d", c.name, c.selected, got, c.want)
		}
	}
}
