package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"latencytier.io/latencytier/api/v1alpha1"
)

// evidence is a window with a run-queue p99 over samples and a throttled ratio.
func evidence(action v1alpha1.NodeAction, rev string, p99 time.Duration, samples int64, throttled string) *v1alpha1.LatencyEvidence {
	return &v1alpha1.LatencyEvidence{
		Action: action, Revision: rev, ThrottledRatio: throttled,
		MeasuredAt: metav1.NewTime(time.Date(2025, 1, 1, 11, 0, 0, 0, time.UTC)),
		RunQueue:   v1alpha1.LatencySummary{Samples: samples, P99: &metav1.Duration{Duration: p99}},
	}
}

// withClass is e with the scheduling class at its end and its change
// within it.
func withClass(e *v1alpha1.LatencyEvidence, class, change string) *v1alpha1.LatencyEvidence {
	e = e.DeepCopy()
	e.SchedulerClass, e.SchedulerClassChange = class, change
	return e
}

func TestJudge(t *testing.T) {
	std := Gate{maxRatio: 1.2, maxThrottled: 0.05, minSamples: 100, budgetThrottle: -1}
	budget := std
	budget.budgetP99 = time.Millisecond
	tier := std
	tier.class = v1alpha1.SchedulerClassTier.ReportedClass()
	base := evidence(v1alpha1.ActionBaseline, "", 412*time.Microsecond, 5000, "0.01")
	withPods := func(e *v1alpha1.LatencyEvidence, p99 time.Duration) *v1alpha1.LatencyEvidence {
		e = e.DeepCopy()
		e.Pods = &v1alpha1.LatencySummary{Samples: 500, P99: &metav1.Duration{Duration: p99}}
		return e
	}
	cases := []struct {
		name     string
		g        Gate
		b, c     *v1alpha1.LatencyEvidence
		reason   string
		contains string
	}{
		{"no baseline", std, nil, base, v1alpha1.VerdictInconclusive, "no baseline"},
		{"no current", std, base, nil, v1alpha1.VerdictInconclusive, "no full measurement window"},
		// A sched_ext scheduler loaded in the window, or between the two:
		// a regression of 4.6x is the other scheduler's, not the profile's.
		{"class changed in the window", std, base, withClass(evidence(v1alpha1.ActionApply, "r", 1900*time.Microsecond, 5000, "0.01"),
			"ext:scx_lavd", "fair → ext:scx_lavd (enable_seq 3→4)"), v1alpha1.VerdictInconclusive,
			"scheduler class changed during the window: fair → ext:scx_lavd (enable_seq 3→4)"},
		{"class changed in the baseline window", std, withClass(base, "fair", "ext:scx_lavd → fair"),
			withClass(evidence(v1alpha1.ActionApply, "r", 100*time.Microsecond, 5000, "0"), "fair", ""), v1alpha1.VerdictInconclusive,
			"scheduler class changed during the baseline window: ext:scx_lavd → fair"},
		{"class differs from the baseline", std, withClass(base, "fair", ""),
			withClass(evidence(v1alpha1.ActionApply, "r", 100*time.Microsecond, 5000, "0"), "ext:scx_lavd", ""), v1alpha1.VerdictInconclusive,
			"scheduler class differs from the baseline's: fair → ext:scx_lavd"},
		// The profile asks for the Tier class: a window under it against
		// the fair baseline is its own change, judged; another ext
		// scheduler, or ours with a change inside the window, is not.
		{"the class the profile asks for, improved", tier, withClass(base, "fair", ""),
			withClass(evidence(v1alpha1.ActionApply, "r", 100*time.Microsecond, 5000, "0"), "ext:latencytier", ""), v1alpha1.VerdictImproved, "412µs → 100µs"},
		{"the class the profile asks for, regressed", tier, withClass(base, "fair", ""),
			withClass(evidence(v1alpha1.ActionApply, "r", 1900*time.Microsecond, 5000, "0.01"), "ext:latencytier", ""), v1alpha1.VerdictRegressed, "412µs → 1.9ms"},
		{"another ext scheduler under a Tier profile", tier, withClass(base, "fair", ""),
			withClass(evidence(v1alpha1.ActionApply, "r", 100*time.Microsecond, 5000, "0"), "ext:scx_lavd", ""), v1alpha1.VerdictInconclusive,
			"scheduler class differs from the baseline's: fair → ext:scx_lavd"},
		{"the Tier class loaded within the window", tier, withClass(base, "fair", ""),
			withClass(evidence(v1alpha1.ActionApply, "r", 100*time.Microsecond, 5000, "0"), "ext:latencytier", "fair → ext:latencytier (enable_seq 0→1)"),
			v1alpha1.VerdictInconclusive, "scheduler class changed during the window"},
		{"same class at both", std, withClass(base, "fair", ""),
			withClass(evidence(v1alpha1.ActionApply, "r", 100*time.Microsecond, 5000, "0"), "fair", ""), v1alpha1.VerdictImproved, "412µs → 100µs"},
		{"an older agent reports no class", std, base,
			withClass(evidence(v1alpha1.ActionApply, "r", 100*time.Microsecond, 5000, "0"), "ext:scx_lavd", ""), v1alpha1.VerdictImproved, "412µs → 100µs"},
		{"too few current samples", std, base, evidence(v1alpha1.ActionApply, "r", time.Millisecond, 99, ""), v1alpha1.VerdictInconclusive, "current 99, need 100"},
		{"regressed 4.6x", std, base, evidence(v1alpha1.ActionApply, "r", 1900*time.Microsecond, 5000, "0.01"), v1alpha1.VerdictRegressed, "run-queue p99 412µs → 1.9ms, 4.61× > 1.2×"},
		{"at the limit passes", std, base, evidence(v1alpha1.ActionApply, "r", 494400*time.Nanosecond, 5000, "0.01"), v1alpha1.VerdictUnchanged, "1.2× ≤ 1.2×"},
		{"improved", std, base, evidence(v1alpha1.ActionApply, "r", 100*time.Microsecond, 5000, "0"), v1alpha1.VerdictImproved, "412µs → 100µs, 0.24×"},
		{"throttling grew", std, base, evidence(v1alpha1.ActionApply, "r", 400*time.Microsecond, 5000, "0.2"), v1alpha1.VerdictRegressed, "throttled ratio 0.01 → 0.2, +0.19 > +0.05"},
		{"outside budget", budget, evidence(v1alpha1.ActionBaseline, "", time.Millisecond, 5000, "0.01"), evidence(v1alpha1.ActionApply, "r", 1100*time.Microsecond, 5000, "0.01"), v1alpha1.VerdictRegressed, "over latencyBudget 1ms"},
		{"pods' run delay worse", std, withPods(base, time.Millisecond), withPods(evidence(v1alpha1.ActionApply, "r", 412*time.Microsecond, 5000, "0.01"), 3*time.Millisecond),
			v1alpha1.VerdictRegressed, "measured pods' run delay p99 1ms → 3ms, 3×"},
		// Quota removal gives the tier CPU time the rest of the node had:
		// node-wide p99 may rise while the pods the profile is for improve.
		{"pods improved, node-wide worse", std, withPods(base, 90*time.Millisecond), withPods(evidence(v1alpha1.ActionApply, "r", 2*time.Millisecond, 5000, "0"), 20*time.Millisecond),
			v1alpha1.VerdictImproved, "measured pods' run delay p99 90ms → 20ms, 0.22×"},
		{"too few pod samples: node-wide", std, withPods(base, 90*time.Millisecond), func() *v1alpha1.LatencyEvidence {
			e := withPods(evidence(v1alpha1.ActionApply, "r", 2*time.Millisecond, 5000, "0"), 20*time.Millisecond)
			e.Pods.Samples = 99
			return e
		}(), v1alpha1.VerdictRegressed, "run-queue p99 412µs → 2ms"},
		// A neighbour that started across the windows took most of the
		// pods' extra wait: not the profile's doing, so not rolled back.
		{"regressed by a neighbour that appeared", std, withNeighbours(base, nil),
			withNeighbours(evidence(v1alpha1.ActionApply, "r", 1900*time.Microsecond, 5000, "0.01"), neighbours(71, 8*time.Millisecond, "Pod batch/nightly-tar")),
			v1alpha1.VerdictInconclusive, "neighbour load changed: Pod batch/nightly-tar took 71% of the measured pods' wait, 8ms/s (baseline none)"},
		{"regressed by a neighbour that grew", std, withNeighbours(base, neighbours(60, 2*time.Millisecond, "Pod batch/x")),
			withNeighbours(evidence(v1alpha1.ActionApply, "r", 1900*time.Microsecond, 5000, "0.01"), neighbours(80, 5*time.Millisecond, "Pod batch/x")),
			v1alpha1.VerdictInconclusive, "5ms/s (baseline 2ms/s)"},
		// The same neighbour at the same load: the regression is ours.
		{"regressed, neighbour unchanged", std, withNeighbours(base, neighbours(70, 5*time.Millisecond, "Pod batch/x")),
			withNeighbours(evidence(v1alpha1.ActionApply, "r", 1900*time.Microsecond, 5000, "0.01"), neighbours(70, 6*time.Millisecond, "Pod batch/x")),
			v1alpha1.VerdictRegressed, "4.61× > 1.2×"},
		// Neighbours grew but took a minority of the wait.
		{"regressed, neighbours a minority", std, withNeighbours(base, nil),
			withNeighbours(evidence(v1alpha1.ActionApply, "r", 1900*time.Microsecond, 5000, "0.01"), neighbours(30, 9*time.Millisecond, "Pod batch/x")),
			v1alpha1.VerdictRegressed, "4.61× > 1.2×"},
		// A neighbour of under a millisecond a second does not excuse a regression.
		{"regressed, neighbour negligible", std, withNeighbours(base, nil),
			withNeighbours(evidence(v1alpha1.ActionApply, "r", 1900*time.Microsecond, 5000, "0.01"), neighbours(90, 1500*time.Microsecond, "KernelThread ksoftirqd/1")),
			v1alpha1.VerdictRegressed, "4.61× > 1.2×"},
		// Throttling growth is the pod's own quota, never a neighbour's.
		{"throttling grew with a neighbour", std, withNeighbours(base, nil),
			withNeighbours(evidence(v1alpha1.ActionApply, "r", 400*time.Microsecond, 5000, "0.2"), neighbours(90, 9*time.Millisecond, "Pod batch/x")),
			v1alpha1.VerdictRegressed, "throttled ratio"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := judge(tc.g, tc.b, tc.c)
			if v.Reason != tc.reason || !strings.Contains(v.Message, tc.contains) {
				t.Fatalf("judge = %s %q, want %s containing %q", v.Reason, v.Message, tc.reason, tc.contains)
			}
		})
	}
}

func withNeighbours(e *v1alpha1.LatencyEvidence, n *v1alpha1.NeighbourWait) *v1alpha1.LatencyEvidence {
	e = e.DeepCopy()
	e.Neighbours = n
	return e
}

func neighbours(share int32, perSecond time.Duration, top string) *v1alpha1.NeighbourWait {
	return &v1alpha1.NeighbourWait{SharePercent: share, PerSecond: &metav1.Duration{Duration: perSecond}, Top: top}
}

func TestGateOfReadsPolicyAndBudget(t *testing.T) {
	p := &v1alpha1.LatencyProfile{Spec: v1alpha1.LatencyProfileSpec{
		TuningSpec: v1alpha1.TuningSpec{LatencyBudget: &v1alpha1.LatencyBudget{
			RunQueueP99: &metav1.Duration{Duration: 2 * time.Millisecond}, ThrottledRatio: ptr.To("0.01")}},
		Rollout: &v1alpha1.RolloutSpec{MaxP99Regression: "1.5", MaxThrottledRatioIncrease: "0.1", MinSamples: 700},
	}}
	g := GateOf(p)
	want := Gate{maxRatio: 1.5, maxThrottled: 0.1, minSamples: 700, budgetP99: 2 * time.Millisecond, budgetThrottle: 0.01}
	if g != want {
		t.Fatalf("gateOf = %+v, want %+v", g, want)
	}
	if g := GateOf(&v1alpha1.LatencyProfile{}); g.maxRatio != 1.2 || g.minSamples != 100 || g.budgetThrottle >= 0 {
		t.Fatalf("defaults = %+v", g)
	}
}

// TestVerdictNeedsTheSampleFloor: a rollback rests on one node's verdict,
// so no minSamples lets one from a few samples through (issue 40): fewer
// than verdictSampleFloor in either window is Inconclusive, never
// Regressed or Improved.
func TestVerdictNeedsTheSampleFloor(t *testing.T) {
	p := &v1alpha1.LatencyProfile{Spec: v1alpha1.LatencyProfileSpec{Rollout: &v1alpha1.RolloutSpec{MinSamples: 1}}}
	g := GateOf(p)
	if g.minSamples != verdictSampleFloor {
		t.Fatalf("minSamples 1 gives %d, want the floor %d", g.minSamples, verdictSampleFloor)
	}
	base := evidence(v1alpha1.ActionBaseline, "", 400*time.Microsecond, 1, "")
	for _, tc := range []struct {
		name string
		b, c *v1alpha1.LatencyEvidence
		want string
	}{
		{"one sample each, 10x worse", base, evidence(v1alpha1.ActionApply, "r", 4*time.Millisecond, 1, ""), v1alpha1.VerdictInconclusive},
		{"one sample each, 10x better", base, evidence(v1alpha1.ActionApply, "r", 40*time.Microsecond, 1, ""), v1alpha1.VerdictInconclusive},
		{"floor-1 after", evidence(v1alpha1.ActionBaseline, "", 400*time.Microsecond, 5000, ""), evidence(v1alpha1.ActionApply, "r", 4*time.Millisecond, verdictSampleFloor-1, ""), v1alpha1.VerdictInconclusive},
		{"floor-1 pods' samples, few node-wide", func() *v1alpha1.LatencyEvidence {
			e := base.DeepCopy()
			e.Pods = &v1alpha1.LatencySummary{Samples: verdictSampleFloor - 1, P99: &metav1.Duration{Duration: time.Millisecond}}
			return e
		}(), func() *v1alpha1.LatencyEvidence {
			e := evidence(v1alpha1.ActionApply, "r", 4*time.Millisecond, 1, "")
			e.Pods = &v1alpha1.LatencySummary{Samples: verdictSampleFloor - 1, P99: &metav1.Duration{Duration: 9 * time.Millisecond}}
			return e
		}(), v1alpha1.VerdictInconclusive},
		{"floor each judges", evidence(v1alpha1.ActionBaseline, "", 400*time.Microsecond, verdictSampleFloor, ""), evidence(v1alpha1.ActionApply, "r", 4*time.Millisecond, verdictSampleFloor, ""), v1alpha1.VerdictRegressed},
	} {
		v := judge(g, tc.b, tc.c)
		if v.Reason != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, v.Reason, v.Message, tc.want)
		}
		if v.Reason == v1alpha1.VerdictInconclusive && !strings.Contains(v.Message, "too few samples") {
			t.Errorf("%s: message %q does not say why", tc.name, v.Message)
		}
	}
}
