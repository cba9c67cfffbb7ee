package loop

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"latencytier.io/latencytier/agent/measure"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/figures"
)

// DefaultHeartbeat is the longest the agent stays silent when nothing a
// reader acts on changed (--status-heartbeat), kubelet's
// nodeStatusReportFrequency for the node's LatencyNode.
const DefaultHeartbeat = 5 * time.Minute

// A node's own heartbeat is the heartbeat stretched by a share between
// these two fractions of it (nodeHeartbeat).
const (
	heartbeatStretchMin = 0.02
	heartbeatStretchMax = 0.50
)

// nodeHeartbeat is how long the agent of node leaves its status unwritten
// when nothing a reader acts on changed: heartbeat stretched by 2 to 50%,
// by a share fixed by a hash of the node's name. So a node writes fewer
// than 3600/heartbeat heartbeats an hour (under 12 at 5m; exactly 5m came
// up to a second early, reportedAt being stamped to the second, so 12.0x
// an hour, with no room left for the write of a change; 9.5 an hour on
// average over a fleet), and a fleet that applied together, whose
// heartbeats would otherwise fall in the same few seconds every heartbeat
// (3000 writes at once at 3000 nodes), spreads them over half a heartbeat
// in the first cycle and over the whole of it by the second. Up to 10%
// (before issue 43) the first cycle's heartbeats of a fleet-wide change
// fell within 24 s at a 5m heartbeat, and bench-scale's 3000-node change
// met 1100 of them. status.heartbeatInterval still says heartbeat: a
// reader calls a node stale after two of them, half a heartbeat longer
// than any node's stretched one.
func nodeHeartbeat(heartbeat time.Duration, node string) time.Duration {
	h := fnv.New32a()
	_, _ = h.Write([]byte(node))
	share := float64(h.Sum32()) / math.MaxUint32
	stretch := heartbeatStretchMin + share*(heartbeatStretchMax-heartbeatStretchMin)
	return heartbeat + time.Duration(stretch*float64(heartbeat))
}

// reportDue says whether a pass writes next over written, the status as the
// API server holds it, and why (for the log): when something a reader acts
// on changed (changes), and otherwise when the last write is a heartbeat
// old. It is the whole of the agent's write decision: a pass that is not
// due leaves the written status, whose measurement and evidence are then
// older than the pass's, as it is.
//
// A figure that moved by figures.Factor but less than figures.Sudden from
// what was written is written only when prev, the status of the window
// before next's (nil when none, or it was written), moved the same figure
// by Factor too and the two windows agree within Factor: one window's
// wander (the holdout's ×2.2, issue 43) is not written, nor a swing from
// one side of what was written to the other; a move that holds is, one
// window later. Everything else changes names, a figure appearing or
// going, the evidence a rollout verifies and a move by Sudden is written
// from the window it is in.
func reportDue(written v1alpha1.LatencyNodeStatus, prev *v1alpha1.LatencyNodeStatus, next v1alpha1.LatencyNodeStatus, spec v1alpha1.LatencyNodeSpec, now time.Time, heartbeat time.Duration) (bool, string) {
	if c := changes(figures.Never, written, next, spec); len(c) > 0 {
		return true, c[0]
	}
	// Only the figures' values differ from here on.
	if c := figureChanges(figures.Sudden, written, next, spec); len(c) > 0 {
		return true, c[0]
	}
	if moved := figureChanges(figures.Factor, written, next, spec); len(moved) > 0 && prev != nil {
		// Confirmed: the window before moved the same figure, and the two
		// windows agree (one ×2 above what was written and the next ×2
		// below it, or two different new top offenders, do not).
		before := figureChanges(figures.Factor, written, *prev, spec)
		apart := figureChanges(figures.Factor, *prev, next, spec)
		for _, why := range moved {
			if slices.Contains(before, why) && !slices.Contains(apart, why) {
				return true, why + " (confirmed)"
			}
		}
	}
	if written.ReportedAt == nil {
		return true, "first report"
	}
	if age := now.Sub(written.ReportedAt.Time); age >= heartbeat || age <= -heartbeat {
		return true, "heartbeat"
	}
	return false, ""
}

// changes names each thing a reader acts on that differs between the
// written status w and the next one n ("current: " and
// "latency: " say which of their figures), the figures compared by rule f
// (reportDue: figures.Never, Sudden or Factor):
//   - what the agent did and holds: settings (every field, count included),
//     settingsOmitted, heldThreads, kernel facts, profile and its
//     generation, observedGeneration, lastAppliedTime, heartbeatInterval,
//     boot (every field: the plan, its state, the boot and reboot seen);
//   - conditions by type, status, reason, message and observedGeneration,
//     not lastTransitionTime; WithinBudget's and RunQueueContention's
//     messages quote the figures of each window, so they are compared by
//     status and reason only: the p99 crossing the budget, or the
//     contention's windows in a row, is their status turning;
//   - findings by type and severity (measure.ChangedMaterially's rule:
//     their messages quote figures);
//   - the rollout evidence: baseline whenever it differs, current as
//     currentChange says;
//   - the measurement copies kubectl shows, by f (a factor from what was
//     last written; a figure appearing or going under any f): runQueueP99, throttledRatio,
//     each latency class's p99 and each measured pod's wait, and who made
//     each measured pod wait most when another clearly overtook the
//     written one (offenderOvertaken); by identity which pods are
//     throttled (as sets: a new order alone is not written);
//   - the measured pods' verdicts against measurement.budgets: the counts,
//     and each listed pod's budget and verdict; not their reasons or
//     figures, which move every window (the verdict itself turns only
//     over windows in a row: agent/findings' PodBudgets).
//
// A real node's figures wander from window to window under ordinary load
// (issue 43: a p99 crossing a 1-2-5 bucket boundary every window wrote
// every window); a figure is compared with what was last written, not
// against a fixed bucket, so wander is not written and a doubling that
// holds is (reportDue).
func changes(f figures.Rule, w, n v1alpha1.LatencyNodeStatus, spec v1alpha1.LatencyNodeSpec) []string {
	return append(stateChanges(w, n), figureChanges(f, w, n, spec)...)
}

// stateChanges names what differs between w and n apart from the
// measurement copies and the evidence: what the agent did and holds, its
// conditions, findings and the pods' budget verdicts.
func stateChanges(w, n v1alpha1.LatencyNodeStatus) []string {
	var c []string
	add := func(changed bool, why string) {
		if changed {
			c = append(c, why)
		}
	}
	add(!equality.Semantic.DeepEqual(w.Settings, n.Settings) || w.SettingsOmitted != n.SettingsOmitted, "settings")
	if what := conditionsChange(w.Conditions, n.Conditions); what != "" {
		c = append(c, "conditions: "+what)
	}
	add(findingsKey(w.Findings) != findingsKey(n.Findings), "findings")
	add(w.HeldThreads != n.HeldThreads, "heldThreads")
	add(!equality.Semantic.DeepEqual(w.Kernel, n.Kernel), "kernel")
	add(!equality.Semantic.DeepEqual(w.Boot, n.Boot), "boot")
	add(w.Profile != n.Profile || w.ProfileGeneration != n.ProfileGeneration, "profile")
	add(w.ObservedGeneration != n.ObservedGeneration, "observedGeneration")
	add(!timesEqual(w.LastAppliedTime, n.LastAppliedTime), "lastAppliedTime")
	add(!equality.Semantic.DeepEqual(w.HeartbeatInterval, n.HeartbeatInterval), "heartbeatInterval")
	add(!equality.Semantic.DeepEqual(w.Baseline, n.Baseline), "baseline")
	add(podBudgetsKey(w.PodBudgets) != podBudgetsKey(n.PodBudgets), "podBudgets")
	return c
}

// figureChanges names how the evidence (status.current) and the
// measurement copies moved between w and n, each figure compared by rule
// f.
func figureChanges(f figures.Rule, w, n v1alpha1.LatencyNodeStatus, spec v1alpha1.LatencyNodeSpec) []string {
	var c []string
	add := func(changed bool, why string) {
		if changed {
			c = append(c, why)
		}
	}
	if what := currentChange(f, w.Current, n.Current, spec.VerifyAfter); what != "" {
		c = append(c, "current: "+what)
	}
	add(f.DurationMoved(w.RunQueueP99, n.RunQueueP99), "runQueueP99")
	add(ratioMoved(f, w.ThrottledRatio, n.ThrottledRatio), "throttledRatio")
	if what := latencyChange(f, w.Latency, n.Latency); what != "" {
		c = append(c, "latency: "+what)
	}
	add(throttlingMoved(f, w.Throttling, n.Throttling), "throttling")
	return c
}

// verifyWindows is how many measurement windows after spec.verifyAfter the
// evidence is written as closely as a verdict needs (a p99 moving 10%):
// a rollout judges the node on them, and an Inconclusive node is judged
// again on the next. After them the rollout has had its windows, and the
// evidence follows figures.Moved like every other figure.
const verifyWindows = 10

// currentChange names what of the evidence a verdict needs changed ("" when
// nothing did): a current appeared, went or is of another (action,
// revision); it is the first window that ends at or after verifyAfter (the
// written one ended before); samples appeared or went; or its figures
// moved: during verification (verifying) as measure.P99Moved counts a move
// (10%), else by durationMoved; and its throttled ratio by ratioMoved. A
// window that only repeats the written one's figures is not written until
// the heartbeat. The name goes to the log of the write (issue 43: which
// figure of a quiet node's evidence moved).
func currentChange(f figures.Rule, w, n *v1alpha1.LatencyEvidence, verifyAfter *metav1.Time) string {
	if w == nil || n == nil {
		if (w == nil) != (n == nil) {
			return "presence"
		}
		return ""
	}
	if w.Action != n.Action || w.Revision != n.Revision {
		return "revision"
	}
	if verifyAfter != nil && w.MeasuredAt.Before(verifyAfter) && !n.MeasuredAt.Before(verifyAfter) {
		return "first window past verifyAfter"
	}
	if (w.RunQueue.Samples == 0) != (n.RunQueue.Samples == 0) {
		return "runQueue samples"
	}
	moved, pods := f.DurationMoved, judgeablePods
	if verifying(n, verifyAfter) {
		moved, pods = measure.P99Moved, func(s *v1alpha1.LatencySummary) bool { return s != nil }
	}
	switch {
	case pods(w.Pods) != pods(n.Pods):
		return "pods samples"
	case moved(w.RunQueue.P99, n.RunQueue.P99):
		return "runQueue p99"
	case pods(w.Pods) && moved(w.Pods.P99, n.Pods.P99):
		return "pods p99"
	case ratioMoved(f, w.ThrottledRatio, n.ThrottledRatio):
		return "throttledRatio"
	}
	return ""
}

// judgeablePods says the measured pods' summary holds enough samples for a
// verdict to rest on it (v1alpha1.MinSamplesFloor). Outside verification a
// summary of a few wakeups, there in one window and not the next (the
// e2e: a mostly idle pod under a burner), is not a change a reader acts on.
func judgeablePods(s *v1alpha1.LatencySummary) bool {
	return s != nil && s.Samples >= v1alpha1.MinSamplesFloor
}

// verifying says window n ends in the verifyWindows windows from
// verifyAfter on.
func verifying(n *v1alpha1.LatencyEvidence, verifyAfter *metav1.Time) bool {
	if verifyAfter == nil || n.MeasuredAt.Before(verifyAfter) {
		return false
	}
	window := 30 * time.Second
	if n.Window != nil && n.Window.Duration > 0 {
		window = n.Window.Duration
	}
	return n.MeasuredAt.Before(&metav1.Time{Time: verifyAfter.Add(verifyWindows * window)})
}

// ratioMoved is figures.RatioMoved with no ratio ("") as 0: passes
// without a measurement leave it empty where a window's says "0.0000", and
// the agent's status showed either (e2e: 2 writes in 60s with measurement
// off when "" became a move).
func ratioMoved(f figures.Rule, w, n string) bool {
	zero := func(s string) string {
		if s == "" {
			return "0"
		}
		return s
	}
	return f.RatioMoved(zero(w), zero(n))
}

// conditionsChange names the first condition type that appeared, went or
// differs between w and n as changes compares them ("" when none does);
// their order alone is not a change.
func conditionsChange(w, n []metav1.Condition) string {
	keys := make(map[string]string, len(w))
	for _, c := range w {
		keys[c.Type] = conditionKey(c)
	}
	seen := make(map[string]bool, len(n))
	for _, c := range n {
		seen[c.Type] = true
		if k, ok := keys[c.Type]; !ok || k != conditionKey(c) {
			return c.Type
		}
	}
	for _, c := range w {
		if !seen[c.Type] {
			return c.Type
		}
	}
	return ""
}

// conditionKey is what changes compares of a condition: its status,
// reason and observedGeneration, and its message except where it quotes
// each window's figures (WithinBudget, RunQueueContention); never its
// lastTransitionTime.
func conditionKey(c metav1.Condition) string {
	k := string(c.Status) + "|" + c.Reason + "|" + strconv.FormatInt(c.ObservedGeneration, 10)
	if c.Type != v1alpha1.NodeWithinBudget && c.Type != v1alpha1.NodeRunQueueContention {
		k += "|" + c.Message
	}
	return k
}

// findingsKey is the findings' types and severities, in no order: a held
// finding (holdFindings) comes after the pass's own.
func findingsKey(fs []v1alpha1.Finding) string {
	keys := make([]string, len(fs))
	for i, f := range fs {
		keys[i] = f.Type + "/" + f.Severity
	}
	slices.Sort(keys)
	return strings.Join(keys, ";")
}

// latencyChange names how a latency status moved as changes counts it
// ("" when it did not; a name from a short fixed set, which bench-scale
// counts writes by, so no pod's name): another source, another set of classes or
// measured pods, a class's p99 or a pod's wait moved (durationMoved), or
// another offender overtook the one written as making a pod wait most.
func latencyChange(f figures.Rule, w, n *v1alpha1.LatencyStatus) string {
	if w == nil || n == nil {
		if (w == nil) != (n == nil) {
			return "presence"
		}
		return ""
	}
	if w.Source != n.Source || len(w.Classes) != len(n.Classes) {
		return "source or classes"
	}
	classes := make(map[string]*metav1.Duration, len(w.Classes))
	for _, c := range w.Classes {
		classes[c.Class] = c.P99
	}
	for _, c := range n.Classes {
		p99, ok := classes[c.Class]
		if !ok || f.DurationMoved(p99, c.P99) {
			return "class " + c.Class
		}
	}
	pods := make(map[string]v1alpha1.PodWait, len(w.Pods))
	for _, p := range w.Pods {
		pods[p.Namespace+"/"+p.Name] = p
	}
	// A measured pod in one window only (it ran in the other, or waited
	// too little to be listed) counts as waiting nothing in the other.
	for _, p := range n.Pods {
		key := p.Namespace + "/" + p.Name
		was := pods[key]
		delete(pods, key)
		if what := podWaitChange(f, was, p); what != "" {
			return "pod " + what
		}
	}
	for _, was := range pods {
		if what := podWaitChange(f, was, v1alpha1.PodWait{}); what != "" {
			return "pod " + what
		}
	}
	return ""
}

// podWaitFloor is the least wait per second of a measured pod that a
// reader acts on (figures.WaitFloor): below it a pod's wait counts as the
// floor, and who caused it is not compared.
const podWaitFloor = figures.WaitFloor

// podWaitChange names how a measured pod's wait moved: by figures.Factor
// (floored at podWaitFloor), "wait"; or, where either window's wait
// reaches the floor, another offender overtook the written top one
// (offenderOvertaken), "offender".
func podWaitChange(f figures.Rule, w, n v1alpha1.PodWait) string {
	x, y := waitFigure(w.WaitPerSecond), waitFigure(n.WaitPerSecond)
	if f.Moved(x, y, podWaitFloor) {
		return "wait"
	}
	// Who made the pod wait most is a name, not a size: by no rule above
	// Factor is one window's new top written alone (the holdout's quiet
	// victim named another top for one window, issue 43); a hog arriving
	// moves the wait too.
	if f <= figures.Factor && (x >= podWaitFloor || y >= podWaitFloor) && offenderOvertaken(f, w, n) {
		return "offender"
	}
	return ""
}

// offenderShareFloor is the least share of a pod's wait (in percent, as
// sharePercent is rounded to 5) an offender counts with when two are
// compared: one no longer named counts as this.
const offenderShareFloor = 5

// offenderOvertaken says someone other than the offender written as making
// the pod wait most now does, and leads it by figures.Factor: its share of
// n's wait against the written top's share of n's wait (offenderShareFloor
// when n no longer names it). Offenders that share a pod's wait nearly
// equally trade the top from window to window (the holdout's victim: Idle
// 40%, its own pod 35%, the system 20%, issue 43), and a reader acts on who
// clearly causes the wait: a hog arriving takes the top by far more. The
// written top is the hysteresis: a top that overtook it by less is not
// written, and is compared against the written one again next window.
// Offenders named in one window and none in the other is a change.
func offenderOvertaken(f figures.Rule, w, n v1alpha1.PodWait) bool {
	if len(w.Offenders) == 0 || len(n.Offenders) == 0 {
		return len(w.Offenders) != len(n.Offenders)
	}
	was, top := w.Offenders[0], n.Offenders[0]
	if was.Class == top.Class && was.Name == top.Name {
		return false
	}
	wasShare := 0.0
	for _, o := range n.Offenders {
		if o.Class == was.Class && o.Name == was.Name {
			wasShare = float64(o.SharePercent)
			break
		}
	}
	topShare := float64(top.SharePercent)
	return topShare > wasShare && f.Moved(wasShare, topShare, offenderShareFloor)
}

// waitFigure is a wait per second; none is none (0).
func waitFigure(d *metav1.Duration) float64 {
	if d == nil {
		return 0
	}
	return float64(d.Duration)
}

// throttlingMoved says the set of throttled pods changed or one's ratio
// moved (ratioMoved); their order alone is not material.
func throttlingMoved(f figures.Rule, w, n []v1alpha1.PodThrottling) bool {
	if len(w) != len(n) {
		return true
	}
	ratios := make(map[string]string, len(w))
	for _, t := range w {
		ratios[t.Namespace+"/"+t.Name] = t.Ratio
	}
	for _, t := range n {
		r, ok := ratios[t.Namespace+"/"+t.Name]
		if !ok || ratioMoved(f, r, t.Ratio) {
			return true
		}
	}
	return false
}

func timesEqual(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}

// reported is next as it is written at now: when the agent wrote it and
// how long it may stay silent.
func reported(next v1alpha1.LatencyNodeStatus, now time.Time, heartbeat time.Duration) v1alpha1.LatencyNodeStatus {
	at := metav1.NewTime(now.UTC().Truncate(time.Second))
	next.ReportedAt, next.HeartbeatInterval = &at, &metav1.Duration{Duration: heartbeat}
	return next
}

// podBudgetsKey is what a reader acts on in status.podBudgets: the
// counts, and which pod is under which budget with which verdict, in no
// order.
func podBudgetsKey(b *v1alpha1.PodBudgetsStatus) string {
	if b == nil {
		return ""
	}
	keys := make([]string, len(b.Pods))
	for i, p := range b.Pods {
		keys[i] = p.Namespace + "/" + p.Name + "|" + p.Budget + "|" + string(p.Verdict)
	}
	slices.Sort(keys)
	return fmt.Sprintf("%d/%d/%d/%d;", b.Within, b.Outside, b.Unknown, b.Omitted) + strings.Join(keys, ";")
}

// windowStatus is a status a pass computed, with the measurement window it
// showed (nil without measurement).
type windowStatus struct {
	uid    types.UID
	window *measure.Result
	status v1alpha1.LatencyNodeStatus
}

// windowBefore records the figures of st, the status this pass computed
// for the LatencyNode uid, and returns those of the window before the one
// it shows, as the last pass that showed it computed it: reportDue confirms a
// figure's move against it. Nil when there is none: no window, no earlier
// one, or another LatencyNode. Passes between two windows (a pod change,
// the resync) show the same window and do not confirm it.
func (r *Reconciler) windowBefore(uid types.UID, st v1alpha1.LatencyNodeStatus) *v1alpha1.LatencyNodeStatus {
	if r.shown != nil && (r.shown.uid != uid || r.shown.window != r.published) {
		r.before = r.shown
	}
	r.shown = &windowStatus{uid: uid, window: r.published, status: figuresOf(st)}
	if b := r.before; b == nil || b.uid != uid || b.window == nil || b.window == r.published {
		return nil
	}
	return &r.before.status
}

// figuresOf is a copy of st's figures, all that figureChanges reads: the
// evidence and the measurement copies, not the settings and conditions a
// pass also carries (up to 256 settings, copied on every pass for nothing).
func figuresOf(st v1alpha1.LatencyNodeStatus) v1alpha1.LatencyNodeStatus {
	return v1alpha1.LatencyNodeStatus{
		Current:        st.Current.DeepCopy(),
		RunQueueP99:    st.RunQueueP99.DeepCopy(),
		ThrottledRatio: st.ThrottledRatio,
		Latency:        st.Latency.DeepCopy(),
		Throttling:     slices.Clone(st.Throttling),
	}
}
