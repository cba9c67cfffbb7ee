package findings

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"latencytier.io/latencytier/agent/measure"
	"latencytier.io/latencytier/api/v1alpha1"
)

// Run-queue contention: the RunQueueContention condition and the
// NoisyNeighbor finding, one judgement of one figure per measured pod and
// window: its run-queue wait charged to others (OffenderClass.IsNeighbour)
// per second. A pod is contended in a window when that wait is at or
// above its bar (podBar): the floor under every judgement
// (v1alpha1.ContentionMinWaitPerSecond), the profile's threshold
// (measurement.contention.waitPerSecond, defaulted) and, where a budget
// selects the pod, ContentionBudgetSharePercent of its waitPerSecond.
// The node counts windows in a row with a contended pod; after
// raiseAfterWindows of them the condition is True, and NoisyNeighbor
// names the worst contended pod's largest neighbour in each window that
// keeps it True. A window that tells nothing (no attribution, no measured
// pod) starts the count again.

// FindingNoisyNeighbor names the largest neighbour of a measured pod that
// waits behind others.
const FindingNoisyNeighbor = "NoisyNeighbor"

// noisyShare: the neighbour named holds at least this share of the pod's
// wait.
const noisyShare = 0.30

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
	// Budgets is each measured pod's own wait budget by namespace/name
	// (WaitBudgets); a pod not in it has none.
	Budgets map[string]time.Duration
	// HostSlices says the node's cpu controller has systemd's slices.
	// Without them the root cgroup's tasks are the host's own processes
	// (kubelet, the container runtime, a control plane), which
	// cpus.reserved cannot confine.
	HostSlices bool
}

// Contention is one node's count of windows in a row with and without a
// contended pod. The zero value has counted nothing: the condition is
// Unknown until a window tells.
type Contention struct {
	status       metav1.ConditionStatus
	above, quiet int
}

// Judge counts window w and returns the RunQueueContention condition
// (without transition time) and the NoisyNeighbor finding, nil when none.
//
// The condition turns True once some measured pod was contended in each
// of raiseAfterWindows windows in a row; a True condition turns False only
// after clearAfterWindows windows in a row without one. A window that
// cannot tell makes it Unknown and both counts start again. NoisyNeighbor
// is found in a window in which the condition is True and some pod is
// contended: it names, of the contended pods, the one whose largest
// neighbour holds the most of its wait, if that is at least noisyShare.
func (c *Contention) Judge(w ContentionWindow) (metav1.Condition, *v1alpha1.Finding) {
	spec, problems := w.Spec.Resolved()
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
	pods := judgePods(w, spec.WaitPerSecond.Duration)
	worst := worstPod(pods)
	if worst != nil && worst.contended() {
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
	threshold := max(spec.WaitPerSecond.Duration, v1alpha1.ContentionMinWaitPerSecond)
	figure := "no measured pod waited behind others"
	if worst != nil {
		threshold = worst.bar
		figure = fmt.Sprintf("%s/%s waited %s a second behind others", worst.Namespace, worst.Name, roundWait(worst.others))
		if o := largestNeighbour(*worst.PodAttribution); o != nil {
			figure += ", most behind " + offenderLabel(*o, w.HostSlices)
		}
	}
	bar := threshold.String() + worst.barSource()
	if c.status == metav1.ConditionTrue {
		cond.Reason = v1alpha1.ReasonWaitBehindOthers
		if c.quiet > 0 {
			cond.Message = fmt.Sprintf("%s (threshold %s): below it %d of the %d windows in a row that clear the condition",
				figure, bar, c.quiet, clear)
		} else {
			cond.Message = fmt.Sprintf("%s (threshold %s), %d windows in a row", figure, bar, c.above)
		}
	} else {
		cond.Reason = v1alpha1.ReasonBelowThreshold
		cond.Message = fmt.Sprintf("%s (threshold %s, for %d windows in a row): %d so far", figure, bar, raise, c.above)
	}

	var finding *v1alpha1.Finding
	if c.status == metav1.ConditionTrue && c.above > 0 {
		if victim, best := noisyNeighbor(pods); victim != nil {
			finding = noisyFinding(victim, best, w, c.above)
		}
	}
	return withProblems(cond, problems), finding
}

// judgedPod is a measured pod's window with its wait behind others per
// second and its bar.
type judgedPod struct {
	*measure.PodAttribution
	others, bar time.Duration
	// budget is the pod's own wait budget when it sets the bar.
	budget time.Duration
}

func (p *judgedPod) contended() bool { return p.others >= p.bar }

// barSource says where a bar above the profile's threshold comes from:
// the pod's own budget; "" for the threshold or the floor.
func (p *judgedPod) barSource() string {
	if p == nil || p.budget == 0 {
		return ""
	}
	return fmt.Sprintf(", %d%% of its budget's %s", v1alpha1.ContentionBudgetSharePercent, p.budget)
}

// podBar is the least wait behind others a second that contends a pod:
// the floor, the profile's threshold and a share of the pod's own wait
// budget (0: none), whichever is highest; and that budget when its share
// is the bar.
func podBar(threshold, budget time.Duration) (bar, fromBudget time.Duration) {
	bar = max(threshold, v1alpha1.ContentionMinWaitPerSecond)
	if share := budget * v1alpha1.ContentionBudgetSharePercent / 100; share > bar {
		return share, budget
	}
	return bar, 0
}

// judgePods is w's measured pods with their wait behind others and bars.
func judgePods(w ContentionWindow, threshold time.Duration) []judgedPod {
	out := make([]judgedPod, 0, len(w.Pods))
	for i := range w.Pods {
		a := &w.Pods[i]
		p := judgedPod{PodAttribution: a, others: othersPerSecond(*a, w.Window)}
		p.bar, p.budget = podBar(threshold, w.Budgets[a.Namespace+"/"+a.Name])
		out = append(out, p)
	}
	return out
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

// worstPod is the measured pod whose wait behind others is the largest
// share of its bar (nil: none waited behind others).
func worstPod(pods []judgedPod) *judgedPod {
	var worst *judgedPod
	var most float64
	for i := range pods {
		if r := float64(pods[i].others) / float64(pods[i].bar); pods[i].others > 0 && r > most {
			worst, most = &pods[i], r
		}
	}
	return worst
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

// hostRemedy fits the host's own processes in the root cgroup of a node
// without systemd's slices: cpus.reserved confines the slices, so these
// need moving into one, pinning, or CPUs they cannot reach. Kubelet's
// reservedSystemCPUs is not one of them: it keeps pods' exclusive CPUs
// off those CPUs but moves no process onto them.
const hostRemedy = "they run in the root cgroup, outside the systemd slices that cpus.reserved confines: " +
	"run them (kubelet, the container runtime, a control plane) as systemd services so cpus.reserved keeps them on the reserved CPUs, " +
	"or pin them there yourself (taskset), " +
	"or give the measured pod isolated CPUs (cpus.isolated and the pod's opt-in: a cpuset partition on cgroup v2 6.7+, " +
	"isolcpus through bootParameters elsewhere)"

func remedy(o measure.Offender, hostSlices bool) string {
	if o.Class == measure.OffenderSystemService && o.Name == rootCgroup && !hostSlices {
		return hostRemedy
	}
	return remedies[o.Class]
}

// noisyNeighbor is, of the contended pods, the one whose largest
// neighbour holds the most of its wait, and that neighbour, if it holds at
// least noisyShare; nil, nil when none does.
func noisyNeighbor(pods []judgedPod) (*judgedPod, *measure.Offender) {
	var best *measure.Offender
	var victim *judgedPod
	var bestShare float64
	for i := range pods {
		p := &pods[i]
		if !p.contended() {
			continue
		}
		for j := range p.Offenders {
			o := &p.Offenders[j]
			if !o.Class.IsNeighbour() {
				continue
			}
			if s := p.Share(*o); s >= noisyShare && s > bestShare {
				best, victim, bestShare = o, p, s
			}
		}
	}
	return victim, best
}

// noisyFinding is the NoisyNeighbor finding naming best, victim's largest
// neighbour, in the n-th window in a row with a contended pod.
func noisyFinding(victim *judgedPod, best *measure.Offender, w ContentionWindow, n int) *v1alpha1.Finding {
	var parts []string
	for _, o := range victim.Offenders {
		parts = append(parts, fmt.Sprintf("%d%% %s", sharePercent(o.Wait, victim.Wait), offenderLabel(o, w.HostSlices)))
	}
	perSecond := roundWait(time.Duration(float64(victim.Wait) / w.Window.Seconds()))
	return &v1alpha1.Finding{Type: FindingNoisyNeighbor, Severity: SeverityWarning, Message: fmt.Sprintf(
		"%s/%s waited %s a second in the run queue, %s of it behind others (%s or more for %d windows in a row%s), %d%% behind %s (%s); %s",
		victim.Namespace, victim.Name, perSecond, roundWait(victim.others), victim.bar, n, victim.barSource(),
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
