package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Latency budgets per workload (issue 45 item 2): measurement.budgets gives
// measured pods a budget of their own, the agent judges each measured pod
// against the first budget whose podSelector matches it, and reports a
// verdict per pod (status.podBudgets), a metric
// (latencytier_pod_within_budget) and a count per profile
// (status.podsOutsideBudget).

// PodBudget is a budget for the measured pods its podSelector matches.
// The figures it bounds are the ones the agent measures per pod:
// waitPerSecond (the pod's run-queue wait, from the eBPF attribution),
// runQueueP99 (the 99th percentile of the pod's own run-queue waits, from
// the eBPF tracer's histogram of that pod) and throttledRatio (its CFS
// throttling).
// +kubebuilder:validation:XValidation:rule="has(self.waitPerSecond) || has(self.runQueueP99) || has(self.throttledRatio)",message="a measurement.budgets entry needs waitPerSecond, runQueueP99 or throttledRatio (one or more)"
type PodBudget struct {
	// name names the budget in status, in kubectl latency explain and in
	// the latencytier_pod_within_budget metric's budget label: a DNS label,
	// unique in the list.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// podSelector chooses, among the node's measured pods (measurement's
	// podSelector in the namespaces its namespaceSelector grants, and
	// the pods granted quota removal or the isolated CPUs), the pods this
	// budget applies to; {} matches every measured pod. A pod takes the
	// first budget in the list whose podSelector matches it: put the
	// narrow budgets first and a {} catch-all last. A pod that is not
	// measured gets no verdict, whatever its labels.
	// +required
	PodSelector BudgetPodSelector `json:"podSelector"`

	// waitPerSecond is the most run-queue wait a second the pod may
	// have, summed over its tasks, whatever made it wait (kubectl latency
	// explain splits it: wake-up to run, queueing behind others or its
	// own tasks, throttled). Between 1ms and 10s. It needs the eBPF
	// measurement with attribution; under schedstat the verdict is
	// Unknown. It also raises the pod's bar for contention: the pod counts
	// as contended (RunQueueContention, NoisyNeighbor) only once others
	// cost it half of this as well as measurement.contention.waitPerSecond.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1ms') && duration(self) <= duration('10s')",message="measurement.budgets waitPerSecond must be between 1ms and 10s"
	WaitPerSecond *metav1.Duration `json:"waitPerSecond,omitempty"`

	// runQueueP99 is the highest 99th percentile of the pod's run-queue
	// latency (each wait of one of its tasks from wake-up, or preemption,
	// to running) in a window. Between 10us and 10s. It needs the eBPF
	// measurement, and a window in which the pod's tasks waited at least
	// 20 times (fewer do not make a 99th percentile); otherwise the
	// verdict is Unknown. The agent keeps a histogram of its own for at
	// most 255 measured pods on a node; past them a pod's p99 is not
	// measured (Unknown).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10us') && duration(self) <= duration('10s')",message="measurement.budgets runQueueP99 must be between 10us and 10s"
	RunQueueP99 *metav1.Duration `json:"runQueueP99,omitempty"`

	// throttledRatio is the highest share of CFS periods in which the pod
	// may be throttled, a decimal between 0 and 1 ("0.01"). A pod without
	// a CFS quota is never throttled.
	// +optional
	// +kubebuilder:validation:MaxLength=12
	// +kubebuilder:validation:Pattern=`^(0(\.[0-9]{1,6})?|1(\.0{1,6})?)$`
	ThrottledRatio *string `json:"throttledRatio,omitempty"`
}

// BudgetPodSelector is a label selector (metav1.LabelSelector's fields and
// meaning) bounded in its schema rather than by CEL rules: a list of 16
// budgets, each with metav1.LabelSelector's unbounded lists checked by
// CEL, is over the API server's cost limit for a CRD.
type BudgetPodSelector struct {
	// matchLabels: the pod has every one of these labels with this value.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
	// matchExpressions: the pod satisfies every one of them.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	MatchExpressions []BudgetSelectorRequirement `json:"matchExpressions,omitempty"`
}

// BudgetSelectorRequirement is metav1.LabelSelectorRequirement, bounded.
// +kubebuilder:validation:XValidation:rule="(self.operator in ['In', 'NotIn']) == (has(self.values) && size(self.values) > 0)",message="matchExpressions values: In and NotIn need at least one, Exists and DoesNotExist take none"
type BudgetSelectorRequirement struct {
	// key is the label key.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// operator is In, NotIn, Exists or DoesNotExist.
	// +required
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator metav1.LabelSelectorOperator `json:"operator"`
	// values for In and NotIn; none for Exists and DoesNotExist.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	Values []string `json:"values,omitempty"`
}

// LabelSelector is s as a metav1.LabelSelector.
func (s BudgetPodSelector) LabelSelector() *metav1.LabelSelector {
	out := &metav1.LabelSelector{MatchLabels: s.MatchLabels}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values})
	}
	return out
}

// The bounds of measurement.budgets and of status.podBudgets.
const (
	// MaxPodBudgets is how many budgets a profile may set.
	MaxPodBudgets = 16
	// MaxPodBudgetResults is how many pods status.podBudgets lists;
	// podBudgets.omitted counts the rest (the counts cover every pod).
	MaxPodBudgetResults = 32
	// PodBudgetOutsideAfter is how many windows in a row a pod must be
	// over its budget before its verdict turns Outside: one window is a
	// burst, not a verdict.
	PodBudgetOutsideAfter = 2
	// PodBudgetWithinAfter is how many windows in a row an Outside pod
	// must be inside its budget before it is Within again: longer than
	// turning Outside, so a pod at the edge of its budget does not flap.
	PodBudgetWithinAfter = 3
	// PodBudgetMinRunQueueP99 and PodBudgetMaxRunQueueP99 bound a
	// budget's runQueueP99 (the CRD's rule and the agent's check).
	PodBudgetMinRunQueueP99 = 10 * time.Microsecond
	PodBudgetMaxRunQueueP99 = 10 * time.Second
	// PodBudgetMinSamples is the fewest waits of a pod in a window that
	// its runQueueP99 is judged on: the rollout verdict's floor.
	PodBudgetMinSamples = MinSamplesFloor
)

// PodBudgetVerdict is a measured pod's standing against its budget.
// +kubebuilder:validation:Enum=Within;Outside;Unknown
type PodBudgetVerdict string

const (
	// PodWithinBudget: every budgeted figure is inside the budget.
	PodWithinBudget PodBudgetVerdict = "Within"
	// PodOutsideBudget: a budgeted figure was over it for
	// PodBudgetOutsideAfter windows in a row.
	PodOutsideBudget PodBudgetVerdict = "Outside"
	// PodBudgetUnknown: a budgeted figure was not measured in the last
	// window (no attribution, no per-pod histogram, too few waits for a
	// p99, or the pod's first window).
	PodBudgetUnknown PodBudgetVerdict = "Unknown"
)

// Reasons of a PodBudgetResult.
const (
	// ReasonPodWithinBudget: the pod is inside every figure of its budget.
	ReasonPodWithinBudget = "WithinBudget"
	// ReasonWaitOverBudget: its run-queue wait a second is over the budget.
	ReasonWaitOverBudget = "WaitOverBudget"
	// ReasonThrottledOverBudget: its throttled ratio is over the budget.
	ReasonThrottledOverBudget = "ThrottledOverBudget"
	// ReasonWaitAndThrottledOverBudget: both are.
	ReasonWaitAndThrottledOverBudget = "WaitAndThrottledOverBudget"
	// ReasonRunQueueP99OverBudget: its run-queue p99 is over the budget.
	// With other figures over it too, the reason names each, in the order
	// wait, run-queue p99, throttled: WaitAndRunQueueP99OverBudget,
	// RunQueueP99AndThrottledOverBudget,
	// WaitAndRunQueueP99AndThrottledOverBudget.
	ReasonRunQueueP99OverBudget                    = "RunQueueP99OverBudget"
	ReasonWaitAndRunQueueP99OverBudget             = "WaitAndRunQueueP99OverBudget"
	ReasonRunQueueP99AndThrottledOverBudget        = "RunQueueP99AndThrottledOverBudget"
	ReasonWaitAndRunQueueP99AndThrottledOverBudget = "WaitAndRunQueueP99AndThrottledOverBudget"
	// ReasonNoPodHistogram: the budget bounds runQueueP99 and the pod has
	// no run-queue histogram of its own in the window (the schedstat
	// fallback, or past the tracer's per-pod histograms).
	ReasonNoPodHistogram = "NoPodHistogram"
	// ReasonTooFewSamples: the budget bounds runQueueP99 and the pod's
	// tasks waited fewer than PodBudgetMinSamples times in the window.
	ReasonTooFewSamples = "TooFewSamples"
	// ReasonFirstWindow: the pod was first seen in the last window, which
	// did not measure all of it.
	ReasonFirstWindow = "FirstWindow"
	// ReasonInvalidBudget: the budget's figures are out of bounds (the
	// agent does not trust its spec to have passed the CRD's validation).
	ReasonInvalidBudget = "InvalidBudget"
	// ReasonNoAttribution (conditions.go) and ReasonNotMeasured are the
	// reasons of Unknown otherwise.
)

// PodBudgetResult is one measured pod's verdict against its budget, with
// the figures of the window the status was last written with.
type PodBudgetResult struct {
	// namespace of the pod.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name of the pod.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// budget is the name of the measurement.budgets entry that applies.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Budget string `json:"budget"`
	// verdict is Within, Outside or Unknown.
	// +required
	Verdict PodBudgetVerdict `json:"verdict"`
	// reason says why, in CamelCase: WithinBudget, WaitOverBudget,
	// RunQueueP99OverBudget, ThrottledOverBudget, or the figures over it
	// joined by And, such as WaitAndThrottledOverBudget (for Outside, and
	// for Within while the pod is over it for fewer windows than turn it
	// Outside), FirstWindow, NoAttribution, NoPodHistogram, TooFewSamples,
	// InvalidBudget.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`
	// since is when the verdict last changed.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// waitPerSecond is the pod's run-queue wait a second, the sum of the
	// parts below and of what the tracer could not split.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	WaitPerSecond *metav1.Duration `json:"waitPerSecond,omitempty"`
	// wakeUpPerSecond is the part spent from wake-up to running on a CPU
	// that was idle (wake-up and idle-exit latency: class Idle).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	WakeUpPerSecond *metav1.Duration `json:"wakeUpPerSecond,omitempty"`
	// queuedBehindOthersPerSecond is the part spent queueing behind
	// others: other pods, system services, kernel threads, interrupt
	// threads (OffenderClass.IsNeighbour).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	QueuedBehindOthersPerSecond *metav1.Duration `json:"queuedBehindOthersPerSecond,omitempty"`
	// queuedBehindOwnPerSecond is the part spent queueing behind the
	// pod's own tasks (class SamePod).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	QueuedBehindOwnPerSecond *metav1.Duration `json:"queuedBehindOwnPerSecond,omitempty"`
	// throttledPerSecond is the part that began while the pod's own CFS
	// quota was spent (class SelfThrottling).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	ThrottledPerSecond *metav1.Duration `json:"throttledPerSecond,omitempty"`
	// runQueueP99 is the 99th percentile of the pod's own run-queue
	// waits in the window (absent without a histogram of the pod).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	RunQueueP99 *metav1.Duration `json:"runQueueP99,omitempty"`
	// runQueueSamples is how many waits runQueueP99 is over.
	// +optional
	// +kubebuilder:validation:Minimum=0
	RunQueueSamples int64 `json:"runQueueSamples,omitempty"`
	// throttledRatio is the share of the pod's CFS periods it was
	// throttled in ("" without a quota).
	// +optional
	// +kubebuilder:validation:MaxLength=12
	ThrottledRatio string `json:"throttledRatio,omitempty"`
}

// PodBudgetsStatus is every measured pod's verdict against
// measurement.budgets on the node.
type PodBudgetsStatus struct {
	// within, outside and unknown count the pods with each verdict, all
	// of them (pods lists at most 32).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Within int32 `json:"within,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	Outside int32 `json:"outside,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	Unknown int32 `json:"unknown,omitempty"`
	// pods are the verdicts, Outside first, then Unknown, then Within,
	// each by namespace and name; at most 32.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Pods []PodBudgetResult `json:"pods,omitempty"`
	// omitted counts the pods left out of pods.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Omitted int32 `json:"omitted,omitempty"`
}
