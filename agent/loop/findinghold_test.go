package loop

import (
	"testing"
	"time"

	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// Issue 43's e2e: RunQueueOverloaded found in one window of two under a
// periodic burner was written in every window (8 writes in 12). Held for
// three windows after it was last found, the flapping finding is written
// once; once it has stayed away three windows it goes.
func TestHoldFindingsDebouncesAFlappingFinding(t *testing.T) {
	const window = 10 * time.Second
	overloaded := v1alpha1.Finding{Type: "RunQueueOverloaded", Severity: "Warning", Message: "procs_running 3"}
	r := &Reconciler{}
	t0 := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	var written []v1alpha1.Finding
	writes := 0
	for i := range 12 {
		var next []v1alpha1.Finding
		if i%2 == 0 {
			next = []v1alpha1.Finding{overloaded}
		}
		shown := r.holdFindings(written, next, t0.Add(time.Duration(i)*window), findingHoldWindows*window)
		if findingsKey(shown) != findingsKey(written) {
			written = shown
			writes++
		}
	}
	if writes != 1 || len(written) != 1 {
		t.Errorf("flapping finding written %d times (showing %v), want once and still shown", writes, written)
	}
	// Gone for good: shown for the hold, then dropped.
	last := t0.Add(10 * window)
	for i, want := range []int{1, 1, 0} {
		now := last.Add(time.Duration(i+1) * window)
		if got := r.holdFindings(written, nil, now, findingHoldWindows*window); len(got) != want {
			t.Errorf("%s after it was last found: %d findings shown, want %d", now.Sub(last), len(got), want)
		}
	}
}
