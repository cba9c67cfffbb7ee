package v1alpha1

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ContentionTaintEffect is what the manager does to a node whose
// RunQueueContention condition is True: nothing (None) or taint it
// PreferNoSchedule. An enum, not a bool: NoSchedule may come later; an
// evicting NoExecute never will.
// +kubebuilder:validation:Enum=None;PreferNoSchedule
type ContentionTaintEffect string

const (
	// ContentionTaintNone taints nothing (the default).
	ContentionTaintNone ContentionTaintEffect = "None"
	// ContentionTaintPreferNoSchedule taints a contended node
	// ContentionTaint with effect PreferNoSchedule: the scheduler steers
	// new pods elsewhere while it can; nothing running is evicted.
	ContentionTaintPreferNoSchedule ContentionTaintEffect = "PreferNoSchedule"
)

// ContentionTaint is the taint key of ContentionSpec.Taint. The manager
// writes it (without a value, effect PreferNoSchedule) and removes it,
// and no other writer does.
const ContentionTaint = "latencytier.io/runqueue-contention"

// ContentionSpec says when a node's RunQueueContention condition turns
// True and False again (issue 45). The figure it judges is, per measured
// pod and window, the run-queue wait that the agent's attribution charges
// to others (OffenderClass.IsNeighbour: another measured pod, another pod,
// a system service or the host's processes, a kernel thread, interrupt
// work), per second, summed over the pod's tasks; never the pod's own
// quota (SelfThrottling), its own tasks (SamePod), the CPU's idle exit
// (Idle) or what the tracer could not split. The node's figure is its
// worst measured pod's. Fields left out take the defaults below.
//
// taint and maxTaintedPercent are the manager's, not the agent's: they are
// left out of the tuning a node is given and of the profile's revision
// (planner.NodeTuning), so turning the taint on or off rolls nothing out.
// +kubebuilder:validation:XValidation:rule="!has(self.maxTaintedPercent) || (has(self.taint) && self.taint == 'PreferNoSchedule')",message="measurement.contention.maxTaintedPercent needs taint PreferNoSchedule: it caps the nodes that taint goes on"
type ContentionSpec struct {
	// waitPerSecond is the threshold: a measured pod waiting at least this
	// long a second behind others is contended. Between 15ms and 10s;
	// default 30ms, 4-5x what an idle node's own processes cost a pod alone
	// on its CPU (6-7ms a second). The least value, 15ms, is a floor under
	// every contention judgement: twice that idle background. A measured
	// pod that a measurement.budgets entry with waitPerSecond selects is
	// contended only at or above half of that budget as well, so a pod
	// whose budget tolerates a long wait is not called contended while
	// others cost it less than half of what it may wait.
	// +optional
	// +kubebuilder:default="30ms"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('15ms') && duration(self) <= duration('10s')",message="measurement.contention.waitPerSecond must be between 15ms and 10s"
	WaitPerSecond *metav1.Duration `json:"waitPerSecond,omitempty"`

	// raiseAfterWindows is how many measurement windows in a row must be
	// at or above waitPerSecond before the condition turns True, and
	// before the NoisyNeighbor finding names the pod's largest neighbour:
	// one window is never enough. Between 2 and 60; default 3.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=60
	RaiseAfterWindows int32 `json:"raiseAfterWindows,omitempty"`

	// clearAfterWindows is how many windows in a row must be below
	// waitPerSecond before a True condition turns False again, so it does
	// not flap with a load at the edge of the threshold. Between 1 and
	// 120; default 5.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=120
	ClearAfterWindows int32 `json:"clearAfterWindows,omitempty"`

	// taint is None (the default) or PreferNoSchedule: with
	// PreferNoSchedule the manager taints a node of the profile whose
	// RunQueueContention condition is True with
	// latencytier.io/runqueue-contention:PreferNoSchedule, so the
	// scheduler places new pods elsewhere while it can, and takes the
	// taint off when the condition turns False, the node leaves the
	// profile, the profile goes or taint is set back to None. It never
	// evicts.
	// +optional
	Taint ContentionTaintEffect `json:"taint,omitempty"`

	// maxTaintedPercent caps the share of the profile's nodes tainted for
	// contention at once, rounded down but at least one node: between 1
	// and 100; default 25. Past the cap the nodes already tainted keep the
	// taint and no other is tainted (status.contentionHeldBack says how many
	// were held back). Needs taint PreferNoSchedule. No schema default:
	// the manager applies 25 (ContentionDefaultMaxTaintedPercent).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxTaintedPercent int32 `json:"maxTaintedPercent,omitempty"`
}

// The bounds and defaults of ContentionSpec, as the CRD states them
// (TestCRDRulesMatchTheConstants holds the two together); the agent
// resolves a spec with Resolved.
const (
	// ContentionDefaultWaitPerSecond is 30 ms of wait behind others a
	// second, 3% of the pod's time. The figures it sits between (issue
	// 45, agent/internal/attrtest on the development machine): a measured
	// pod alone on its CPU on an idle single-node cluster waited 6-7 ms/s
	// behind the host's background (kubelet, containerd, the control
	// plane), in three runs of three; the same machine loaded by parallel
	// builds cost a 1 ms waker 2-20 ms/s. Beside a busy loop pinned to its
	// CPU that waker waited 10-17 ms/s when it ran nothing per wake-up
	// (wake-up preemption serves it within 15 µs: no harm done), 40-60
	// ms/s running 100 µs, 130-180 ms/s running 300-500 µs; the e2e's
	// measured server waited 4 s/s behind its hog pod. 30 ms/s is 4-5x the
	// idle background and 1.5x the loaded host's worst window, below a hog
	// that costs the pod real time.
	ContentionDefaultWaitPerSecond = 30 * time.Millisecond
	ContentionMaxWaitPerSecond     = 10 * time.Second
	// ContentionMinWaitPerSecond is the floor under every contention
	// judgement (the condition and NoisyNeighbor), whatever the threshold
	// or a pod's budget says: 2x the idle node's 6-7 ms/s of background,
	// at the top of the harmless busy neighbour (10-17 ms/s) and of the
	// loaded host's windows (2-20 ms/s).
	ContentionMinWaitPerSecond = 15 * time.Millisecond
	// ContentionBudgetSharePercent of a measured pod's own wait budget
	// (measurement.budgets waitPerSecond) is the least wait behind others
	// that contends it: others costing it half of what it may wait at
	// all is material; less, the pod's budget verdict speaks for it.
	ContentionBudgetSharePercent = 50
	// ContentionDefaultRaiseAfter windows: 90 s at the default 30 s
	// interval; a burst of one or two windows (a build, a backup's start)
	// does not steer pods away.
	ContentionDefaultRaiseAfter = 3
	ContentionMinRaiseAfter     = 2
	ContentionMaxRaiseAfter     = 60
	// ContentionDefaultClearAfter windows: longer than raising, so a load
	// at the edge of the threshold holds the condition True rather than
	// turning it every few windows.
	ContentionDefaultClearAfter = 5
	ContentionMinClearAfter     = 1
	ContentionMaxClearAfter     = 120
	// ContentionDefaultMaxTaintedPercent: a quarter of the profile's
	// nodes, the share a rolling update commonly takes out of service at
	// once (maxUnavailable 25%). PreferNoSchedule moves new pods onto the
	// other nodes; with most of the tier tainted the untainted rest would
	// take all of them and turn contended in their turn, and a cause that
	// reaches every node at once (a fleet-wide backup, a noisy agent)
	// would mark the whole tier instead of the few nodes worth avoiding.
	ContentionDefaultMaxTaintedPercent = 25
	ContentionMinMaxTaintedPercent     = 1
	ContentionMaxMaxTaintedPercent     = 100
)

// TaintsOnContention reports whether c opts in to the contention taint.
func (c *ContentionSpec) TaintsOnContention() bool {
	return c != nil && c.Taint == ContentionTaintPreferNoSchedule
}

// MaxTainted is how many of selected nodes may carry the contention taint
// at once: maxTaintedPercent of them (default
// ContentionDefaultMaxTaintedPercent; out of bounds, the default too)
// rounded down, but at least one when any node is selected, so a profile
// of fewer than four nodes can still steer pods off its one contended
// node (PreferNoSchedule: the scheduler still uses it when nothing else
// fits); 0 without the opt-in.
func (c *ContentionSpec) MaxTainted(selected int) int {
	if !c.TaintsOnContention() || selected <= 0 {
		return 0
	}
	pct := int(c.MaxTaintedPercent)
	if pct < ContentionMinMaxTaintedPercent || pct > ContentionMaxMaxTaintedPercent {
		pct = ContentionDefaultMaxTaintedPercent
	}
	return max(1, selected*pct/100)
}

// Resolved is c with the defaults in place of fields left out; a field
// outside its bounds (a LatencyNode spec is not trusted to have passed the
// CRD's validation) is replaced by its default, and problems names each.
func (c *ContentionSpec) Resolved() (out ContentionSpec, problems []string) {
	out = ContentionSpec{WaitPerSecond: &metav1.Duration{Duration: ContentionDefaultWaitPerSecond},
		RaiseAfterWindows: ContentionDefaultRaiseAfter, ClearAfterWindows: ContentionDefaultClearAfter}
	if c == nil {
		return out, nil
	}
	if w := c.WaitPerSecond; w != nil {
		if w.Duration >= ContentionMinWaitPerSecond && w.Duration <= ContentionMaxWaitPerSecond {
			out.WaitPerSecond.Duration = w.Duration
		} else {
			problems = append(problems, fmt.Sprintf("measurement.contention.waitPerSecond %s is outside %s..%s; using %s",
				w.Duration, ContentionMinWaitPerSecond, ContentionMaxWaitPerSecond, ContentionDefaultWaitPerSecond))
		}
	}
	pick := func(field string, v, lo, hi int32, dst *int32) {
		switch {
		case v == 0:
		case v >= lo && v <= hi:
			*dst = v
		default:
			problems = append(problems, fmt.Sprintf("measurement.contention.%s %d is outside %d..%d; using %d", field, v, lo, hi, *dst))
		}
	}
	pick("raiseAfterWindows", c.RaiseAfterWindows, ContentionMinRaiseAfter, ContentionMaxRaiseAfter, &out.RaiseAfterWindows)
	pick("clearAfterWindows", c.ClearAfterWindows, ContentionMinClearAfter, ContentionMaxClearAfter, &out.ClearAfterWindows)
	return out, problems
}
