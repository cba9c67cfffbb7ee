package loop

import (
	"testing"
	"time"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Issue 43's e2e: RunQueueOverloaded found in one window of two or three
// under a periodic burner was written in every window (8 writes in 12).
// Held for findingHold after it was last found, the flapping finding is
// written once; once it has stayed away that long it goes.
func TestHoldFindingsDebouncesAFlappingFinding(t *testing.T) {
	const window = 10 * time.Second
	hold := findingHold(&v1alpha1.MeasurementSpec{Interval: dur(window)})
	if hold != 100*time.Second {
		t.Fatalf("hold %s at 10s windows, want 100s", hold)
	}
	overloaded := v1alpha1.Finding{Type: "RunQueueOverloaded", Severity: "Warning", Message: "procs_running 3"}
	r := &Reconciler{}
	t0 := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	var written []v1alpha1.Finding
	writes := 0
	for i := range 12 {
		var next []v1alpha1.Finding
		if i%3 == 0 || i == 4 {
			next = []v1alpha1.Finding{overloaded}
		}
		shown := r.holdFindings(written, next, t0.Add(time.Duration(i)*window), hold)
		if findingsKey(shown) != findingsKey(written) {
			written = shown
			writes++
		}
	}
	if writes != 1 || len(written) != 1 {
		t.Errorf("flapping finding written %d times (showing %v), want once and still shown", writes, written)
	}
	// Gone for good: shown for the hold, then dropped.
	last := t0.Add(9 * window)
	for i, want := range []int{1, 1, 0} {
		now := last.Add(time.Duration(i+8) * window)
		if got := r.holdFindings(written, nil, now, hold); len(got) != want {
			t.Errorf("%s after it was last found: %d findings shown, want %d", now.Sub(last), len(got), want)
		}
	}
}
