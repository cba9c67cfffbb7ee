package findings

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/api/v1alpha1"
)

// pod is a measured pod's window: total wait and its offenders (largest
// first), per second of a one-second window.
func pod(offenders ...measure.Offender) measure.PodAttribution {
	a := measure.PodAttribution{Namespace: "shop", Name: "gateway-0", ByClass: map[measure.OffenderClass]time.Duration{}}
	for _, o := range offenders {
		a.Wait += o.Wait
		a.ByClass[o.Class] += o.Wait
	}
	a.Offenders = offenders
	return a
}

func off(class measure.OffenderClass, name string, d time.Duration) measure.Offender {
	return measure.Offender{Class: class, Name: name, Wait: d}
}

// hogWindow: a measured pod waits d a second, 95% of it behind a pod.
func hogWindow(d time.Duration) ContentionWindow {
	return ContentionWindow{Attributed: measure.AttributedPods, Window: time.Second,
		Pods: []measure.PodAttribution{pod(off(measure.OffenderPod, "batch/hog", d*95/100), off(measure.OffenderIdle, "", d*5/100))}}
}

// The hysteresis as golden sequences: each letter is one window (H: the
// pod waits 160 ms/s behind a hog, B: 6.5 ms/s of background, E: 50 ms/s,
// exactly the default threshold, U: the window cannot tell), each
// expected letter the condition after it (T, F, U).
func TestContentionHysteresis(t *testing.T) {
	windows := map[byte]ContentionWindow{
		'H': hogWindow(160 * time.Millisecond),
		'B': hogWindow(6500 * time.Microsecond),
		'E': {Attributed: measure.AttributedPods, Window: time.Second,
			Pods: []measure.PodAttribution{pod(off(measure.OffenderPod, "batch/hog", v1alpha1.ContentionDefaultWaitPerSecond))}},
		'U': {Attributed: measure.AttributedNone, Window: time.Second},
		'N': {Attributed: measure.AttributedNoPods, Window: time.Second},
	}
	for _, tc := range []struct {
		name, spec   string // spec: "" defaults, else raise/clear
		raise, clear int32
		in, want     string
	}{
		{name: "defaults: raised on the third window, cleared on the fifth quiet one",
			in: "BHHHHBBBBBB", want: "FFFTTTTTTFF"},
		{name: "a burst of two windows raises nothing",
			in: "BHHBHHBHHB", want: "FFFFFFFFFF"},
		{name: "at the threshold counts as above",
			in: "EEE", want: "FFT"},
		{name: "a load at the edge does not flap: one window above restarts the quiet count",
			in: "HHHBBBBHBBBBHBBBBB", want: "FFTTTTTTTTTTTTTTTF"},
		{name: "a window that cannot tell is Unknown and starts both counts again",
			in: "HHUHHHUBN", want: "FFUFFTUFU"},
		{name: "Unknown to quiet is False at once",
			in: "UB", want: "UF"},
		{name: "raise after 2, clear after 1", raise: 2, clear: 1,
			in: "HHBHBHH", want: "FTFFFFT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var spec *v1alpha1.ContentionSpec
			if tc.raise != 0 {
				spec = &v1alpha1.ContentionSpec{RaiseAfterWindows: tc.raise, ClearAfterWindows: tc.clear}
			}
			var c Contention
			var got strings.Builder
			for i := range len(tc.in) {
				w := windows[tc.in[i]]
				w.Spec = spec
				cond, _ := c.Judge(w)
				if cond.Type != v1alpha1.NodeRunQueueContention {
					t.Fatalf("condition type %q", cond.Type)
				}
				got.WriteByte(string(cond.Status)[0])
				want := map[byte]string{'T': v1alpha1.ReasonWaitBehindOthers, 'F': v1alpha1.ReasonBelowThreshold}[tc.want[i]]
				if want != "" && cond.Reason != want {
					t.Errorf("window %d: reason %s, want %s (%s)", i+1, cond.Reason, want, cond.Message)
				}
			}
			if got.String() != tc.want {
				t.Errorf("windows %s: condition %s, want %s", tc.in, got.String(), tc.want)
			}
		})
	}
}

// Unknown says why: no attribution on the node, or no measured pod.
func TestContentionUnknownReasons(t *testing.T) {
	var c Contention
	for cover, reason := range map[measure.AttributionCover]string{
		measure.AttributedNone:   v1alpha1.ReasonNoAttribution,
		measure.AttributedNoPods: v1alpha1.ReasonNoMeasuredPods,
	} {
		cond, f := c.Judge(ContentionWindow{Attributed: cover, Window: time.Second})
		if cond.Status != metav1.ConditionUnknown || cond.Reason != reason || f != nil {
			t.Errorf("%q: %s/%s %v, want Unknown/%s and no finding", cover, cond.Status, cond.Reason, f, reason)
		}
	}
}

// Issue 45's cry wolf: on an idle single-node cluster (no systemd slices)
// a measured pod alone on its CPU waits 6.5 ms a second, 90% of it behind
// the host's own processes in the root cgroup. Before, every such window
// was a Warning NoisyNeighbor naming "SystemService /" and telling the
// user to reserve CPUs for system services; now nothing is raised, however
// long it lasts.
func TestIdleBackgroundRaisesNothing(t *testing.T) {
	background := ContentionWindow{Attributed: measure.AttributedPods, Window: 30 * time.Second,
		Pods: []measure.PodAttribution{pod(off(measure.OffenderSystemService, "/", 30*6*time.Millisecond),
			off(measure.OffenderKernelThread, "kworker/1:1", 30*200*time.Microsecond),
			off(measure.OffenderIdle, "", 30*300*time.Microsecond))}}
	var c Contention
	for w := 1; w <= 20; w++ { // 10 minutes of 30 s windows
		cond, f := c.Judge(background)
		if f != nil {
			t.Fatalf("window %d: %s %s: %s", w, f.Severity, f.Type, f.Message)
		}
		if cond.Status != metav1.ConditionFalse {
			t.Fatalf("window %d: RunQueueContention %s (%s)", w, cond.Status, cond.Message)
		}
	}
}

// A measured pod waiting behind its own quota or its own tasks, however
// long, is not contended: those are not others.
func TestOwnWaitIsNotContention(t *testing.T) {
	own := ContentionWindow{Attributed: measure.AttributedPods, Window: time.Second,
		Pods: []measure.PodAttribution{pod(off(measure.OffenderSelfThrottling, "", 600*time.Millisecond),
			off(measure.OffenderSamePod, "shop/gateway-0", 300*time.Millisecond), off(measure.OffenderIdle, "", 50*time.Millisecond),
			off(measure.OffenderUnattributed, "", 40*time.Millisecond), off(measure.OffenderPod, "batch/hog", 10*time.Millisecond))}}
	var c Contention
	for w := 1; w <= 10; w++ {
		if cond, f := c.Judge(own); cond.Status != metav1.ConditionFalse || f != nil {
			t.Fatalf("window %d: %s (%s), finding %v", w, cond.Status, cond.Message, f)
		}
	}
}

// A hog pinned next to the pod: NoisyNeighbor and the condition in the
// same window, the third (raiseAfterWindows' default), naming the pod,
// its largest neighbour and the remedy for a pod.
func TestHogRaisesBoth(t *testing.T) {
	var c Contention
	for w := 1; w <= 4; w++ {
		cond, f := c.Judge(hogWindow(160 * time.Millisecond))
		if (f != nil) != (w >= v1alpha1.ContentionDefaultRaiseAfter) || (cond.Status == metav1.ConditionTrue) != (f != nil) {
			t.Fatalf("window %d: condition %s, finding %v", w, cond.Status, f)
		}
		if f != nil {
			for _, want := range []string{"shop/gateway-0 waited 160ms a second", "150ms of it behind others", "95% behind Pod batch/hog",
				fmt.Sprintf("%d windows in a row", w), "isolate the measured pod (cpus.isolated)"} {
				if !strings.Contains(f.Message, want) {
					t.Errorf("window %d: finding %q lacks %q", w, f.Message, want)
				}
			}
		}
		if w == 3 && (cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "shop/gateway-0 waited 150ms a second behind others, most behind Pod batch/hog")) {
			t.Errorf("window 3: %s: %s", cond.Status, cond.Message)
		}
	}
}

// NoisyNeighbor and RunQueueContention are one judgement: the finding
// appears in the window the condition turns True, whatever
// raiseAfterWindows says, and never while the condition is False. A
// noisy neighbour in every other window is never found.
func TestNoisyNeighborCountsTheConditionsWindows(t *testing.T) {
	for _, raise := range []int32{2, 3, 5} {
		var c Contention
		for w := 1; w <= int(raise)+2; w++ {
			win := hogWindow(160 * time.Millisecond)
			win.Spec = &v1alpha1.ContentionSpec{RaiseAfterWindows: raise}
			cond, f := c.Judge(win)
			if (f != nil) != (w >= int(raise)) || (cond.Status == metav1.ConditionTrue) != (w >= int(raise)) {
				t.Errorf("raise after %d, window %d: condition %s, finding %v", raise, w, cond.Status, f)
			}
		}
	}
	var c Contention
	for w := 1; w <= 6; w++ {
		win := hogWindow(160 * time.Millisecond)
		if w%2 == 0 {
			win = hogWindow(time.Millisecond)
		}
		if _, f := c.Judge(win); f != nil {
			t.Fatalf("every other window, window %d: %s", w, f.Message)
		}
	}
}

// idleWindow is issue 45's cry wolf, one window: a measured pod alone on
// its CPU on an idle single-node cluster (no systemd slices) waits d a
// second, about 90% of it behind the host's own processes in the root
// cgroup.
func idleWindow(d time.Duration) ContentionWindow {
	return ContentionWindow{Attributed: measure.AttributedPods, Window: 30 * time.Second,
		Pods: []measure.PodAttribution{pod(off(measure.OffenderSystemService, "/", 30*d*90/100),
			off(measure.OffenderKernelThread, "kworker/1:1", 30*d*4/100), off(measure.OffenderIdle, "", 30*d*6/100))}}
}

// The judgement on the idle figures, 6-7 ms a second from /, and on a
// hog's: the idle node raises nothing in one window, two or twenty, with
// the defaults, the fewest windows, a threshold under the floor (once
// allowed: 1ms was the least waitPerSecond, and 5ms raised both on an
// idle node) or a tight budget of the pod's own; a hog that costs the pod
// hundreds of ms a second raises both, unless the pod's own budget
// tolerates twice that.
func TestJudgementFloorThresholdAndBudget(t *testing.T) {
	ms := func(n int) *metav1.Duration { return &metav1.Duration{Duration: time.Duration(n) * time.Millisecond} }
	budget := func(n int) map[string]time.Duration {
		return map[string]time.Duration{"shop/gateway-0": time.Duration(n) * time.Millisecond}
	}
	for _, tc := range []struct {
		name    string
		win     ContentionWindow
		spec    *v1alpha1.ContentionSpec
		budgets map[string]time.Duration
		windows int
		raised  int // the window both are raised in; 0 never
	}{
		{name: "idle 6ms/s, one window", win: idleWindow(6 * time.Millisecond), windows: 1},
		{name: "idle 7ms/s, two windows, raise after 2", win: idleWindow(7 * time.Millisecond), spec: &v1alpha1.ContentionSpec{RaiseAfterWindows: 2}, windows: 2},
		{name: "idle 7ms/s, twenty windows", win: idleWindow(7 * time.Millisecond), windows: 20},
		{name: "idle 7ms/s under a 5ms threshold: the floor holds", win: idleWindow(7 * time.Millisecond),
			spec: &v1alpha1.ContentionSpec{WaitPerSecond: ms(5), RaiseAfterWindows: 2}, windows: 20},
		{name: "idle 7ms/s, the pod's budget 10ms", win: idleWindow(7 * time.Millisecond), budgets: budget(10),
			spec: &v1alpha1.ContentionSpec{RaiseAfterWindows: 2}, windows: 20},
		{name: "a hog costing 300ms/s, defaults", win: hogWindow(320 * time.Millisecond), windows: 5, raised: 3},
		{name: "a hog costing 300ms/s, raise after 2", win: hogWindow(320 * time.Millisecond), spec: &v1alpha1.ContentionSpec{RaiseAfterWindows: 2}, windows: 5, raised: 2},
		{name: "a hog costing 300ms/s, the pod's budget 400ms (bar 200ms)", win: hogWindow(320 * time.Millisecond), budgets: budget(400), windows: 5, raised: 3},
		{name: "a hog costing 300ms/s, the pod's budget 1s (bar 500ms)", win: hogWindow(320 * time.Millisecond), budgets: budget(1000), windows: 5},
		{name: "a hog costing 300ms/s, another pod's budget 1s", win: hogWindow(320 * time.Millisecond),
			budgets: map[string]time.Duration{"shop/other": time.Second}, windows: 5, raised: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Contention
			for w := 1; w <= tc.windows; w++ {
				win := tc.win
				win.Spec, win.Budgets = tc.spec, tc.budgets
				cond, f := c.Judge(win)
				raised := tc.raised != 0 && w >= tc.raised
				if (f != nil) != raised || (cond.Status == metav1.ConditionTrue) != raised {
					msg := ""
					if f != nil {
						msg = f.Message
					}
					t.Fatalf("window %d: RunQueueContention %s (%s), NoisyNeighbor %q; want raised %v", w, cond.Status, cond.Message, msg, raised)
				}
			}
		})
	}
}

// The bar a pod's own budget sets is named where it sets it.
func TestBudgetBarIsNamed(t *testing.T) {
	var c Contention
	var f *v1alpha1.Finding
	var cond metav1.Condition
	for range 3 {
		w := hogWindow(320 * time.Millisecond)
		w.Budgets = map[string]time.Duration{"shop/gateway-0": 400 * time.Millisecond}
		cond, f = c.Judge(w)
	}
	if f == nil || !strings.Contains(f.Message, "(200ms or more for 3 windows in a row, 50% of its budget's 400ms)") ||
		!strings.Contains(cond.Message, "(threshold 200ms, 50% of its budget's 400ms)") {
		t.Errorf("finding %v, condition %q", f, cond.Message)
	}
}

// The root cgroup on a node without systemd's slices is the host's own
// processes, with a remedy cpus.reserved cannot be (it confines slices);
// on a node with slices it stays a system service.
func TestRootCgroupNaming(t *testing.T) {
	root := ContentionWindow{Attributed: measure.AttributedPods, Window: time.Second,
		Pods: []measure.PodAttribution{pod(off(measure.OffenderSystemService, "/", 80*time.Millisecond), off(measure.OffenderIdle, "", 5*time.Millisecond))}}
	for _, tc := range []struct {
		slices       bool
		want, reject string
	}{
		{false, "behind the host's own processes (cgroup /, outside every pod and systemd slice)", "reserve CPUs for system services"},
		{false, "as systemd services so cpus.reserved keeps them on the reserved CPUs, or pin them there yourself (taskset)", "reservedSystemCPUs"},
		{true, "behind SystemService / (", "the host's own processes"},
	} {
		root.HostSlices = tc.slices
		var c Contention
		var f *v1alpha1.Finding
		var cond metav1.Condition
		for range 3 {
			cond, f = c.Judge(root)
		}
		if f == nil {
			t.Fatalf("slices %v: no finding", tc.slices)
		}
		if !strings.Contains(f.Message, tc.want) || strings.Contains(f.Message, tc.reject) {
			t.Errorf("slices %v: %q, want %q and not %q", tc.slices, f.Message, tc.want, tc.reject)
		}
		if !tc.slices && (!strings.Contains(f.Message, hostRemedy) || !strings.Contains(cond.Message, "most behind the host's own processes")) {
			t.Errorf("no slices: finding %q or condition %q lacks the host's remedy or name", f.Message, cond.Message)
		}
	}
}

// A LatencyNode's contention spec is not trusted: a value out of bounds
// is replaced by its default, and the condition says so.
func TestContentionSpecOutOfBounds(t *testing.T) {
	w := hogWindow(160 * time.Millisecond)
	w.Spec = &v1alpha1.ContentionSpec{RaiseAfterWindows: 1}
	var c Contention
	cond, _ := c.Judge(w)
	if cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, "measurement.contention.raiseAfterWindows 1 is outside 2..60") {
		t.Errorf("%s: %s", cond.Status, cond.Message)
	}
}

// Each pod is judged against its own bar: a pod that waits longer but
// within half its generous budget is not the one named; the pod without a
// budget that waits past the threshold is.
func TestEachPodItsOwnBar(t *testing.T) {
	tolerant := pod(off(measure.OffenderPod, "batch/hog", 400*time.Millisecond))
	tolerant.Name = "report-0"
	strict := pod(off(measure.OffenderPod, "batch/hog", 40*time.Millisecond), off(measure.OffenderIdle, "", 2*time.Millisecond))
	w := ContentionWindow{Attributed: measure.AttributedPods, Window: time.Second, Pods: []measure.PodAttribution{tolerant, strict},
		Budgets: map[string]time.Duration{"shop/report-0": time.Second}}
	var c Contention
	var cond metav1.Condition
	var f *v1alpha1.Finding
	for range 3 {
		cond, f = c.Judge(w)
	}
	if cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "shop/gateway-0 waited 40ms a second behind others") ||
		!strings.Contains(cond.Message, "(threshold 30ms)") {
		t.Errorf("condition %s: %s", cond.Status, cond.Message)
	}
	if f == nil || !strings.HasPrefix(f.Message, "shop/gateway-0 ") {
		t.Errorf("finding %v, want it to name shop/gateway-0", f)
	}
}
