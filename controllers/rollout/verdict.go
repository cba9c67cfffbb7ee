package rollout

import (
	"fmt"
	"strings"
	"time"

	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/ratio"
)

// The verdict is computed here, by the controller, and not by the agent: the
// agent reports numbers (status.baseline, status.current), the policy
// (ratios, minimum samples, budget) lives in one place, and a policy change
// takes effect without a new agent.

// improvedRatio: a p99 at or below this share of the baseline is Improved.
const improvedRatio = 0.9

// Defaults of spec.rollout's gate, used for the evidence-only verdicts of a
// profile without spec.rollout (the CRD defaults the same values).
const (
	defaultMaxP99Regression   = 1.2
	defaultMaxThrottledGrowth = 0.05
	defaultMinSamples         = 100
)

// verdictSampleFloor is the fewest samples a window may hold for a
// verdict, whatever spec.rollout.minSamples says: a rollback takes every
// changed node back (rebooting the rebooted ones) on one node's verdict,
// which must not rest on a handful of wakeups (issue 40). Fewer is
// Inconclusive, with the counts in the message. The CRD's own minimum,
// so profiles stored before it (minimum 1) are held to it too.
const verdictSampleFloor = v1alpha1.MinSamplesFloor

// minVerdictSamples is the samples the baseline and the current window
// each need under ro (nil: no spec.rollout): its minSamples, or the
// default, never below verdictSampleFloor. The one place that reads
// minSamples, so a field that changes it is wired here.
func minVerdictSamples(ro *v1alpha1.RolloutSpec) int64 {
	n := int64(defaultMinSamples)
	if ro != nil && ro.MinSamples > 0 {
		n = ro.MinSamples
	}
	return max(n, verdictSampleFloor)
}

// Gate is what a node must meet to pass.
type Gate struct {
	maxRatio       float64       // current p99 / baseline p99
	maxThrottled   float64       // current - baseline throttled ratio
	minSamples     int64         // in the baseline and in the current window
	budgetP99      time.Duration // 0: no budget
	budgetThrottle float64       // <0: no budget
	// class is the scheduling class the profile asks for, as a node
	// reports it ("" when it asks none): a window under it, against a
	// baseline under another, measures the profile's own change.
	class string
}

// GateOf is the gate of a profile: its rollout policy (or the defaults) and
// its latencyBudget.
func GateOf(p *v1alpha1.LatencyProfile) Gate {
	g := Gate{maxRatio: defaultMaxP99Regression, maxThrottled: defaultMaxThrottledGrowth,
		minSamples: minVerdictSamples(p.Spec.Rollout), budgetThrottle: -1}
	if ro := p.Spec.Rollout; ro != nil {
		if f, ok := ratio.Parse(ro.MaxP99Regression); ok && f >= 1 {
			g.maxRatio = f
		}
		if f, ok := ratio.Parse(ro.MaxThrottledRatioIncrease); ok && f >= 0 {
			g.maxThrottled = f
		}
	}
	if sc := p.Spec.Scheduler; sc != nil && sc.Class != nil {
		g.class = sc.Class.ReportedClass()
	}
	if b := p.Spec.LatencyBudget; b != nil {
		if b.RunQueueP99 != nil {
			g.budgetP99 = b.RunQueueP99.Duration
		}
		if b.ThrottledRatio != nil {
			g.budgetThrottle = parseRatio(*b.ThrottledRatio)
		}
	}
	return g
}

// Verdict is the judgement of one node's current window against its baseline.
type Verdict struct {
	Reason  string // v1alpha1.VerdictImproved, ...
	Message string // with the figures
}

// Passed reports whether the verdict lets the node pass.
func (v Verdict) Passed() bool {
	return v.Reason == v1alpha1.VerdictImproved || v.Reason == v1alpha1.VerdictUnchanged
}

// sameFinding: b says what a says, maybe with other figures: the same
// reason and, when inconclusive, for the same cause (the message up to its
// first colon: "too few samples", "no baseline measured", ...).
func sameFinding(a, b Verdict) bool {
	if a.Reason != b.Reason {
		return false
	}
	cause := func(msg string) string { c, _, _ := strings.Cut(msg, ":"); return c }
	return a.Reason != v1alpha1.VerdictInconclusive || cause(a.Message) == cause(b.Message)
}

// judge compares current with baseline under g. The p99 ratio is the
// measured pods' own run delay's when both windows have enough pod samples,
// else the node-wide run queue's (see judgedP99). Windows under different
// scheduling classes (a sched_ext scheduler loaded, reloaded or gone within
// a window or between the two) measure different schedulers, not the
// profile's change: Inconclusive, with the change, until windows under
// one class compare. The exception is the class the profile itself asks
// for (scheduler.class): a current window under it against a fair
// baseline is the change under test, judged like any other.
func judge(g Gate, baseline, current *v1alpha1.LatencyEvidence) Verdict {
	inconclusive := func(format string, a ...any) Verdict {
		return Verdict{v1alpha1.VerdictInconclusive, fmt.Sprintf(format, a...)}
	}
	switch {
	case baseline == nil:
		return inconclusive("no baseline measured")
	case current == nil:
		return inconclusive("no full measurement window under the new tuning yet")
	case current.SchedulerClassChange != "":
		return inconclusive("scheduler class changed during the window: %s", current.SchedulerClassChange)
	case baseline.SchedulerClassChange != "":
		return inconclusive("scheduler class changed during the baseline window: %s", baseline.SchedulerClassChange)
	case baseline.SchedulerClass != "" && current.SchedulerClass != "" && baseline.SchedulerClass != current.SchedulerClass &&
		current.SchedulerClass != g.class:
		return inconclusive("scheduler class differs from the baseline's: %s → %s", baseline.SchedulerClass, current.SchedulerClass)
	}
	what, before, after, ok := judgedP99(g.minSamples, baseline, current)
	if !ok {
		return inconclusive("too few samples: baseline %d, current %d, need %d",
			baseline.RunQueue.Samples, current.RunQueue.Samples, g.minSamples)
	}
	ratio := float64(after) / float64(before)
	figures := fmt.Sprintf("%s p99 %s → %s, %s×", what, before, after, formatRatio(ratio))
	tb, tc := parseRatio(baseline.ThrottledRatio), parseRatio(current.ThrottledRatio)
	switch {
	case ratio > g.maxRatio:
		if n := neighbourChanged(baseline.Neighbours, current.Neighbours); n != "" {
			return inconclusive("neighbour load changed: %s; %s > %s×", n, figures, formatRatio(g.maxRatio))
		}
		return Verdict{v1alpha1.VerdictRegressed, fmt.Sprintf("%s > %s×", figures, formatRatio(g.maxRatio))}
	case tc-tb > g.maxThrottled:
		return Verdict{v1alpha1.VerdictRegressed, fmt.Sprintf("throttled ratio %s → %s, +%s > +%s",
			formatRatio(tb), formatRatio(tc), formatRatio(tc-tb), formatRatio(g.maxThrottled))}
	case g.budgetP99 > 0 && current.RunQueue.P99 != nil && current.RunQueue.P99.Duration > g.budgetP99:
		return Verdict{v1alpha1.VerdictRegressed, fmt.Sprintf("%s; run-queue p99 %s over latencyBudget %s",
			figures, current.RunQueue.P99.Duration, g.budgetP99)}
	case g.budgetThrottle >= 0 && current.ThrottledRatio != "" && tc > g.budgetThrottle:
		return Verdict{v1alpha1.VerdictRegressed, fmt.Sprintf("%s; throttled ratio %s over latencyBudget %s",
			figures, formatRatio(tc), formatRatio(g.budgetThrottle))}
	case ratio <= improvedRatio:
		return Verdict{v1alpha1.VerdictImproved, figures}
	default:
		return Verdict{v1alpha1.VerdictUnchanged, fmt.Sprintf("%s ≤ %s×", figures, formatRatio(g.maxRatio))}
	}
}

// Thresholds of neighbourChanged.
const (
	// neighbourMajority: neighbours took at least this share of the
	// measured pods' wait in the current window.
	neighbourMajority = 50
	// neighbourGrowth: and their wait per second grew at least this much
	// over the baseline's.
	neighbourGrowth = 2.0
	// neighbourFloor: a baseline below this counts as this, so a neighbour
	// that appears from nothing must still matter (1 ms of wait a second).
	neighbourFloor = time.Millisecond
)

// neighbourChanged describes the neighbour whose load explains a
// regression, "" when none does: in the current window neighbours took
// most of the measured pods' run-queue wait, and that wait per second grew
// at least neighbourGrowth× over the baseline's. Then the extra delay is
// a neighbour that started or grew across the windows, not the profile's
// change, and a regression would roll a good change back: the node is
// judged Inconclusive (and judged again on the next window) instead.
func neighbourChanged(b, c *v1alpha1.NeighbourWait) string {
	if c == nil || c.PerSecond == nil || c.SharePercent < neighbourMajority {
		return ""
	}
	before := neighbourFloor
	if b != nil && b.PerSecond != nil && b.PerSecond.Duration > before {
		before = b.PerSecond.Duration
	}
	if float64(c.PerSecond.Duration) < neighbourGrowth*float64(before) {
		return ""
	}
	was := "none"
	if b != nil && b.PerSecond != nil {
		was = b.PerSecond.Duration.String() + "/s"
	}
	top := c.Top
	if top == "" {
		top = "neighbours"
	}
	return fmt.Sprintf("%s took %d%% of the measured pods' wait, %s/s (baseline %s)", top, c.SharePercent, c.PerSecond.Duration, was)
}

// judgedP99 picks the figure the verdict rests on. Where the node runs
// measured pods (granted a tuning, or matched by measurement.podSelector in
// a namespace measurement.namespaceSelector grants: the agent counts no
// other) with enough samples in both windows, it is their own run delay: they are
// what the profile tunes for, and a tuning may rightly lengthen other
// tasks' waits (quota removal gives the tier CPU time the rest of the node
// had), which the node-wide histogram would count against it. Otherwise it
// is the node-wide run queue. ok is false when the chosen figure lacks
// samples or a p99.
func judgedP99(minSamples int64, b, c *v1alpha1.LatencyEvidence) (what string, before, after time.Duration, ok bool) {
	if b.Pods != nil && c.Pods != nil {
		if pb, pa, pok := p99Pair(minSamples, b.Pods, c.Pods); pok {
			return "measured pods' run delay", pb, pa, true
		}
	}
	before, after, ok = p99Pair(minSamples, &b.RunQueue, &c.RunQueue)
	return "run-queue", before, after, ok
}

func p99Pair(minSamples int64, b, c *v1alpha1.LatencySummary) (before, after time.Duration, ok bool) {
	if b.Samples < minSamples || c.Samples < minSamples || b.P99 == nil || c.P99 == nil || b.P99.Duration <= 0 || c.P99.Duration < 0 {
		return 0, 0, false
	}
	return b.P99.Duration, c.P99.Duration, true
}

// parseRatio reads a ratio of the spec or of an agent's evidence; one
// that does not parse, or is NaN, counts as 0 (ratio.Parse).
func parseRatio(s string) float64 {
	f, _ := ratio.Parse(s)
	return f
}

// formatRatio prints a ratio with at most two decimals: 4.6, 0.22, 1.
func formatRatio(f float64) string { return ratio.Short(f) }
