package findings

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/api/v1alpha1"
	"latencytier.io/latencytier/internal/figures"
)

// Run-queue contention (issue 45): the RunQueueContention condition and the
// NoisyNeighbor finding, both judged on one figure per measured pod and
// window: its run-queue wait charged to others (OffenderClass.IsNeighbour)
// per second. Both act only when that wait matters: at or above
// figures.WaitFloor and a share of the profile's budget for it
// (measurement.contention.waitPerSecond, defaulted), and for more than one
// window in a row. A window that tells nothing (no attribution, no
// measured pod) starts the count again.

// FindingNoisyNeighbor names the largest neighbour of a measured pod that
// waits behind others.
const FindingNoisyNeighbor = "NoisyNeighbor"

const (
	// noisyBudgetShare of waitPerSecond (the budget of a pod's wait behind
	// others, until pods have budgets of their own) is where NoisyNeighbor
	// starts: the whole of it, so the finding explains the condition, a
	// window sooner, and never warns of a wait the condition calls fine.
	noisyBudgetShare = 1.0
	// noisyWindows in a row: one window is a burst (a build, a backup's
	// start), not a neighbour.
	noisyWindows = 2
	// noisyShare: the neighbour named holds at least this share of the
	// pod's wait.
	noisyShare = 0.30
)

// ContentionWindow is one measurement window as the rule sees it.
type ContentionWindow struct {
	// Spec is the profile's measurement.contention (nil: the defaults).
	Spec *v1alpha1.ContentionSpec
	// Attributed is what the window's attribution covers
	// (measure.Result.Attributed).
	Attributed measure.AttributionCover
	// Window is the window's length.
	Window time.Duration
	// Pods is the measured pods' attributed wait (measure.Result.Attribution).
	Pods []measure.PodAttribution
	// HostSlices says the node's cpu controller has systemd's slices.
	// Without them the root cgroup's tasks are the host's own processes
	// (kubelet, the container runtime, a control plane), which
	// cpus.reserved cannot confine.
	HostSlices bool
}

// Contention is one node's count of windows in a row above and below the
// threshold, and of windows in a row with a noisy neighbour. The zero
// value has counted nothing: the condition is Unknown until a window
// tells.
type Contention struct {
	status       metav1.ConditionStatus
	above, quiet int
	noisy        int
}

// Judge counts window w and returns the RunQueueContention condition
// (without transition time) and the NoisyNeighbor finding, nil when none.
//
// The condition turns True once the worst measured pod's wait behind
// others stays at or above waitPerSecond for raiseAfterWindows windows in
// a row; a True condition turns False only after clearAfterWindows windows
// in a row below it. A window that cannot tell makes it Unknown and both
// counts start again. NoisyNeighbor needs noisyWindows windows in a row in
// which some pod waited noisyBudgetShare of waitPerSecond behind others,
// at least noisyShare of it behind one neighbour; it names the current
// window's.
func (c *Contention) Judge(w ContentionWindow) (metav1.Condition, *v1alpha1.Finding) {
	spec, problems := w.Spec.Resolved(time.Duration(figures.WaitFloor))
	cond := metav1.Condition{Type: v1alpha1.NodeRunQueueContention}
	if w.Attributed != measure.AttributedPods || w.Window <= 0 {
		*c = Contention{status: metav1.ConditionUnknown}
		cond.Status = metav1.ConditionUnknown
		cond.Reason, cond.Message = v1alpha1.ReasonNoAttribution,
			"no attribution of the measured pods' run-queue wait (it needs the eBPF measurement with attribution)"
		if w.Attributed == measure.AttributedNoPods {
			cond.Reason, cond.Message = v1alpha1.ReasonNoMeasuredPods, "no measured pod ran on the node through the window"
		}
		return withProblems(cond, problems), nil
	}
	threshold := max(spec.WaitPerSecond.Duration, time.Duration(figures.WaitFloor))
	worst, worstWait := worstPod(w.Pods, w.Window)
	if worstWait >= threshold {
		c.above, c.quiet = c.above+1, 0
	} else {
		c.above, c.quiet = 0, c.quiet+1
	}
	raise, clear := int(spec.RaiseAfterWindows), int(spec.ClearAfterWindows)
	switch {
	case c.status == metav1.ConditionTrue && c.quiet < clear:
	case c.above >= raise:
		c.status = metav1.ConditionTrue
	default:
		c.status = metav1.ConditionFalse
	}
	cond.Status = c.status
	figure := "no measured pod waited behind others"
	if worst != nil {
		figure = fmt.Sprintf("%s/%s waited %s a second behind others", worst.Namespace, worst.Name, roundWait(worstWait))
		if o := largestNeighbour(*worst); o != nil {
			figure += ", most behind " + offenderLabel(*o, w.HostSlices)
		}
	}
	if c.status == metav1.ConditionTrue {
		cond.Reason = v1alpha1.ReasonWaitBehindOthers
		if c.quiet > 0 {
			cond.Message = fmt.Sprintf("%s (threshold %s): below it %d of the %d windows in a row that clear the condition",
				figure, threshold, c.quiet, clear)
		} else {
			cond.Message = fmt.Sprintf("%s (threshold %s), %d windows in a row", figure, threshold, c.above)
		}
	} else {
		cond.Reason = v1alpha1.ReasonBelowThreshold
		cond.Message = fmt.Sprintf("%s (threshold %s, for %d windows in a row): %d so far", figure, threshold, raise, c.above)
	}

	var finding *v1alpha1.Finding
	level := max(time.Duration(noisyBudgetShare*float64(threshold)), time.Duration(figures.WaitFloor))
	if victim, best := noisyNeighbor(w.Pods, w.Window, level); victim != nil {
		if c.noisy++; c.noisy >= noisyWindows {
			finding = noisyFinding(victim, best, w, level, c.noisy)
		}
	} else {
		c.noisy = 0
	}
	return withProblems(cond, problems), finding
}

func withProblems(c metav1.Condition, problems []string) metav1.Condition {
	if len(problems) > 0 {
		c.Message += "; " + strings.Join(problems, "; ")
	}
	return c
}

// othersPerSecond is a's wait charged to others per second of window.
func othersPerSecond(a measure.PodAttribution, window time.Duration) time.Duration {
	var d time.Duration
	for class, w := range a.ByClass {
		if class.IsNeighbour() {
			d += w
		}
	}
	return time.Duration(float64(d) / window.Seconds())
}

// worstPod is the measured pod that waited longest behind others, and
// that wait per second (nil, 0: none did).
func worstPod(pods []measure.PodAttribution, window time.Duration) (*measure.PodAttribution, time.Duration) {
	var worst *measure.PodAttribution
	var most time.Duration
	for i := range pods {
		if d := othersPerSecond(pods[i], window); d > most {
			worst, most = &pods[i], d
		}
	}
	return worst, most
}

// largestNeighbour is a's largest offender that is someone else.
func largestNeighbour(a measure.PodAttribution) *measure.Offender {
	for i := range a.Offenders { // largest first
		if a.Offenders[i].Class.IsNeighbour() {
			return &a.Offenders[i]
		}
	}
	return nil
}

// roundWait is a wait per second to two significant digits.
func roundWait(d time.Duration) time.Duration {
	switch {
	case d >= 100*time.Millisecond:
		return d.Round(10 * time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(10 * time.Microsecond)
}

// rootCgroup is the cpu controller's root as attribution names it.
const rootCgroup = "/"

// hostProcesses is how the root cgroup's tasks are named on a node without
// systemd's slices.
const hostProcesses = "the host's own processes (cgroup /, outside every pod and systemd slice)"

// offenderLabel is "Pod batch/nightly-tar", "KernelThread ksoftirqd/1", or
// the host's own processes for the root cgroup of a node without slices.
func offenderLabel(o measure.Offender, hostSlices bool) string {
	switch {
	case o.Class == measure.OffenderSystemService && o.Name == rootCgroup && !hostSlices:
		return hostProcesses
	case o.Name == "":
		return string(o.Class)
	}
	return string(o.Class) + " " + o.Name
}

// remedies fit each neighbour class.
var remedies = map[measure.OffenderClass]string{
	measure.OffenderMeasuredPod:   "isolate the pods from each other (cpus.isolated and an opt-in per pod)",
	measure.OffenderPod:           "isolate the measured pod (cpus.isolated) or keep the other pod off the tier",
	measure.OffenderSystemService: "reserve CPUs for system services (cpus.reserved) so they leave the tier's CPUs",
	measure.OffenderKernelThread:  "keep kernel threads and IRQs on the reserved CPUs (irq.affinity: Reserved, cpus.isolated)",
	measure.OffenderInterrupt:     "steer IRQs to the reserved CPUs (irq.affinity: Reserved)",
}

// hostRemedy fits the host's own processes: cpus.reserved confines
// systemd's slices, and this node has none to confine.
const hostRemedy = "cpus.reserved confines systemd's slices and cannot move processes outside them: " +
	"give the measured pod isolated CPUs (cpus.isolated and the pod's opt-in: a cpuset partition on cgroup v2 6.7+, " +
	"isolcpus through bootParameters elsewhere), or run those processes as systemd services"

func remedy(o measure.Offender, hostSlices bool) string {
	if o.Class == measure.OffenderSystemService && o.Name == rootCgroup && !hostSlices {
		return hostRemedy
	}
	return remedies[o.Class]
}

// noisyNeighbor is, of the measured pods that waited at least level a
// second behind others in the window, the one whose largest neighbour
// holds the most of its wait, and that neighbour, if it holds at least
// noisyShare; nil, nil when none does.
func noisyNeighbor(pods []measure.PodAttribution, window, level time.Duration) (*measure.PodAttribution, *measure.Offender) {
	var best *measure.Offender
	var victim *measure.PodAttribution
	var bestShare float64
	for i := range pods {
		a := &pods[i]
		if othersPerSecond(*a, window) < level {
			continue
		}
		for j := range a.Offenders {
			o := &a.Offenders[j]
			if !o.Class.IsNeighbour() {
				continue
			}
			if s := a.Share(*o); s >= noisyShare && s > bestShare {
				best, victim, bestShare = o, a, s
			}
		}
	}
	return victim, best
}

// noisyFinding is the NoisyNeighbor finding naming best, victim's largest
// neighbour, in the n-th window in a row with one.
func noisyFinding(victim *measure.PodAttribution, best *measure.Offender, w ContentionWindow, level time.Duration, n int) *v1alpha1.Finding {
	var parts []string
	for _, o := range victim.Offenders {
		parts = append(parts, fmt.Sprintf("%d%% %s", sharePercent(o.Wait, victim.Wait), offenderLabel(o, w.HostSlices)))
	}
	perSecond := roundWait(time.Duration(float64(victim.Wait) / w.Window.Seconds()))
	return &v1alpha1.Finding{Type: FindingNoisyNeighbor, Severity: SeverityWarning, Message: fmt.Sprintf(
		"%s/%s waited %s a second in the run queue, %s of it behind others (%s or more for %d windows in a row), %d%% behind %s (%s); %s",
		victim.Namespace, victim.Name, perSecond, roundWait(othersPerSecond(*victim, w.Window)), level, n,
		sharePercent(best.Wait, victim.Wait), offenderLabel(*best, w.HostSlices), strings.Join(parts, ", "), remedy(*best, w.HostSlices))}
}

// sharePercent is part of whole in percent, rounded to 5 as status rounds
// offenders' shares.
func sharePercent(part, whole time.Duration) int {
	if whole <= 0 {
		return 0
	}
	return int(float64(part)/float64(whole)*20+0.5) * 5
}
