package loop

import (
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/measure"
	v1alpha1 "latencytier.io/latencytier/api/v1alpha1"
)

// DefaultHeartbeat is the longest the agent stays silent when nothing a
// reader acts on changed (--status-heartbeat), kubelet's
// nodeStatusReportFrequency for the node's LatencyNode.
const DefaultHeartbeat = 5 * time.Minute

// A node's own heartbeat is the heartbeat stretched by a share between
// these two fractions of it (nodeHeartbeat).
const (
	heartbeatStretchMin = 0.02
	heartbeatStretchMax = 0.10
)

// nodeHeartbeat is how long the agent of node leaves its status unwritten
// when nothing a reader acts on changed: heartbeat stretched by 2 to 10%,
// by a share fixed by a hash of the node's name. So a node writes fewer
// than 3600/heartbeat heartbeats an hour (under 12 at 5m; exactly 5m came
// up to a second early, reportedAt being stamped to the second, so 12.0x
// an hour, with no room left for the write of a change), and a fleet that
// applied together, whose heartbeats would otherwise fall in the same few
// seconds every heartbeat (3000 writes at once at 3000 nodes), drifts
// apart by up to 8% of the heartbeat each cycle. status.heartbeatInterval
// still says heartbeat: a reader calls a node stale after two of them,
// longer than any node's stretched one.
func nodeHeartbeat(heartbeat time.Duration, node string) time.Duration {
	h := fnv.New32a()
	_, _ = h.Write([]byte(node))
	share := float64(h.Sum32()) / math.MaxUint32
	stretch := heartbeatStretchMin + share*(heartbeatStretchMax-heartbeatStretchMin)
	return heartbeat + time.Duration(stretch*float64(heartbeat))
}

// reportDue says whether a pass writes next over written, the status as the
// API server holds it, and why (for the log): when something a reader acts
// on changed (material), and otherwise when the last write is a heartbeat
// old. It is the whole of the agent's write decision: a pass that is not
// due leaves the written status, whose measurement and evidence are then
// older than the pass's, as it is.
func reportDue(written, next v1alpha1.LatencyNodeStatus, spec v1alpha1.LatencyNodeSpec, now time.Time, heartbeat time.Duration) (bool, string) {
	if why := material(written, next, spec); why != "" {
		return true, why
	}
	if written.ReportedAt == nil {
		return true, "first report"
	}
	if age := now.Sub(written.ReportedAt.Time); age >= heartbeat || age <= -heartbeat {
		return true, "heartbeat"
	}
	return false, ""
}

// material names the first thing a reader acts on that differs between the
// written status and the next one ("" when none does):
//   - what the agent did and holds: settings (every field, count included),
//     settingsOmitted, heldThreads, kernel facts, profile and its
//     generation, observedGeneration, lastAppliedTime, heartbeatInterval,
//     boot (every field: the plan, its state, the boot and reboot seen);
//   - conditions by type, status, reason, message and observedGeneration,
//     not lastTransitionTime; WithinBudget's message quotes the figures of
//     each window, so it is compared by status and reason only (the figures
//     count through their buckets below);
//   - findings by type and severity (measure.ChangedMaterially's rule:
//     their messages quote figures);
//   - the rollout evidence: baseline whenever it differs, current as
//     currentMoved says;
//   - the measurement copies kubectl shows, by bucket (bucket125):
//     runQueueP99, throttledRatio, each latency class's p99 and who made
//     the measured pods wait, the throttled pods' membership and order and
//     each one's ratio bucket.
func material(w, n v1alpha1.LatencyNodeStatus, spec v1alpha1.LatencyNodeSpec) string {
	switch {
	case !equality.Semantic.DeepEqual(w.Settings, n.Settings) || w.SettingsOmitted != n.SettingsOmitted:
		return "settings"
	case conditionsKey(w.Conditions) != conditionsKey(n.Conditions):
		return "conditions"
	case findingsKey(w.Findings) != findingsKey(n.Findings):
		return "findings"
	case w.HeldThreads != n.HeldThreads:
		return "heldThreads"
	case !equality.Semantic.DeepEqual(w.Kernel, n.Kernel):
		return "kernel"
	case !equality.Semantic.DeepEqual(w.Boot, n.Boot):
		return "boot"
	case w.Profile != n.Profile || w.ProfileGeneration != n.ProfileGeneration:
		return "profile"
	case w.ObservedGeneration != n.ObservedGeneration:
		return "observedGeneration"
	case !timesEqual(w.LastAppliedTime, n.LastAppliedTime):
		return "lastAppliedTime"
	case !equality.Semantic.DeepEqual(w.HeartbeatInterval, n.HeartbeatInterval):
		return "heartbeatInterval"
	case !equality.Semantic.DeepEqual(w.Baseline, n.Baseline):
		return "baseline"
	case currentMoved(w.Current, n.Current, spec.VerifyAfter):
		return "current"
	case durationBucket(w.RunQueueP99) != durationBucket(n.RunQueueP99):
		return "runQueueP99"
	case ratioBucket(w.ThrottledRatio) != ratioBucket(n.ThrottledRatio):
		return "throttledRatio"
	case latencyKey(w.Latency) != latencyKey(n.Latency):
		return "latency"
	case throttlingKey(w.Throttling) != throttlingKey(n.Throttling):
		return "throttling"
	}
	return ""
}

// currentMoved says the evidence a verdict needs changed: a current
// appeared, went or is of another (action, revision); it is the first
// window that ends at or after verifyAfter (the written one ended before);
// or it moved as measure.ChangedMaterially counts a move (a p99 by more
// than 10%, samples appearing or going), or its throttled ratio changed
// bucket. A window that only repeats the written one's figures is not
// written until the heartbeat.
func currentMoved(w, n *v1alpha1.LatencyEvidence, verifyAfter *metav1.Time) bool {
	if w == nil || n == nil {
		return (w == nil) != (n == nil)
	}
	if w.Action != n.Action || w.Revision != n.Revision {
		return true
	}
	if verifyAfter != nil && w.MeasuredAt.Before(verifyAfter) && !n.MeasuredAt.Before(verifyAfter) {
		return true
	}
	if (w.RunQueue.Samples == 0) != (n.RunQueue.Samples == 0) || measure.P99Moved(w.RunQueue.P99, n.RunQueue.P99) {
		return true
	}
	if (w.Pods == nil) != (n.Pods == nil) || (w.Pods != nil && measure.P99Moved(w.Pods.P99, n.Pods.P99)) {
		return true
	}
	return ratioBucket(w.ThrottledRatio) != ratioBucket(n.ThrottledRatio)
}

// bucket125 is the bucket of a positive figure on the 1-2-5 series: [1,2),
// [2,5), [5,10) times a power of ten, numbered upwards (…, 10µs → 15, 20µs
// → 16, 50µs → 17, 100µs → 18, …). Zero, negative or unknown figures are
// bucket math.MinInt. A figure is written when it crosses into another
// bucket, so a p99 wandering between 21µs and 48µs is written once.
func bucket125(x float64) int {
	if !(x > 0) || math.IsInf(x, 0) {
		return math.MinInt
	}
	e := math.Floor(math.Log10(x))
	m := x / math.Pow(10, e)
	// Floating point may leave m a hair under 1 or at 10.
	if m < 1 {
		e, m = e-1, m*10
	} else if m >= 10 {
		e, m = e+1, m/10
	}
	i := 3 * int(e)
	switch {
	case m >= 5:
		i += 2
	case m >= 2:
		i++
	}
	return i
}

func durationBucket(d *metav1.Duration) int {
	if d == nil {
		return math.MinInt
	}
	return bucket125(float64(d.Duration))
}

// ratioBucket buckets a decimal ratio ("0.013"); "" and 0 share one bucket.
func ratioBucket(s string) int {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.MinInt
	}
	return bucket125(f)
}

func conditionsKey(cs []metav1.Condition) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.Type + "|" + string(c.Status) + "|" + c.Reason + "|" + strconv.FormatInt(c.ObservedGeneration, 10))
		if c.Type != v1alpha1.NodeWithinBudget {
			b.WriteString("|" + c.Message)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func findingsKey(fs []v1alpha1.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.Type + "/" + f.Severity + ";")
	}
	return b.String()
}

// latencyKey is what of a latency status is written at once: its source,
// each class's p99 bucket, and per measured pod who made it wait (by
// class and name) and the bucket of its wait.
func latencyKey(l *v1alpha1.LatencyStatus) string {
	if l == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(l.Source + ";")
	for _, c := range l.Classes {
		b.WriteString(c.Class + "=" + strconv.Itoa(durationBucket(c.P99)) + ";")
	}
	for _, p := range l.Pods {
		b.WriteString(p.Namespace + "/" + p.Name + "=" + strconv.Itoa(durationBucket(p.WaitPerSecond)) + ":")
		for _, o := range p.Offenders {
			b.WriteString(string(o.Class) + "/" + o.Name + ",")
		}
		b.WriteString(";")
	}
	return b.String()
}

// throttlingKey is the throttled pods in order with each one's ratio bucket.
func throttlingKey(ts []v1alpha1.PodThrottling) string {
	var b strings.Builder
	for _, t := range ts {
		b.WriteString(t.Namespace + "/" + t.Name + "=" + strconv.Itoa(ratioBucket(t.Ratio)) + ";")
	}
	return b.String()
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
