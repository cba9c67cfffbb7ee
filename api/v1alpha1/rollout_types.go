package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Safe rollout (docs/rollout.md). The contract between controller and agent:
//
//   - The controller stores every distinct tuning of a profile as a
//     ControllerRevision named <profile>-<hash> in the manager's namespace,
//     owned by the profile, and tells each node which one to hold in
//     LatencyNode spec.revision (with the tuning copied into spec.tuning).
//   - With spec.rollout, a node new to the profile first gets action
//     Baseline: the agent measures but writes nothing to the kernel. The
//     controller then moves nodes to the new revision canary first, in
//     batches, and judges each node from the evidence its agent reports.
//   - The agent only reports numbers (status.baseline and status.current);
//     the controller computes each node's verdict so that the policy lives
//     in one place, and keeps it in the profile's status.rollout (counts
//     for every node, the nodes not Improved or Unchanged listed in
//     verdicts): it never writes a LatencyNode's status.

// RegressionPolicy says what a rollout does when a node regresses.
// +kubebuilder:validation:Enum=Rollback;Pause
type RegressionPolicy string

const (
	// RegressionRollback returns the regressed node and every node already
	// changed in this rollout to the previous revision (Revert when there is
	// none) and stops.
	RegressionRollback RegressionPolicy = "Rollback"
	// RegressionPause stops the rollout where it is.
	RegressionPause RegressionPolicy = "Pause"
)

// InconclusivePolicy says how a node is judged when its verdict is still
// Inconclusive (too few samples, no baseline) at inconclusiveTimeout.
// +kubebuilder:validation:Enum=Fail;Pass
type InconclusivePolicy string

const (
	// InconclusiveFail treats the node as regressed (onRegression applies).
	InconclusiveFail InconclusivePolicy = "Fail"
	// InconclusivePass lets the node pass and the rollout go on.
	InconclusivePass InconclusivePolicy = "Pass"
)

// CanarySpec chooses the nodes that take a new revision first: either a
// number (count or percentage of the profile's nodes, rounded up, at least
// one; nodes are taken in name order) or a label selector.
// +kubebuilder:validation:XValidation:rule="has(self.nodes) != has(self.selector)",message="rollout.canary needs exactly one of nodes and selector"
type CanarySpec struct {
	// nodes is how many nodes go first: a count (1-10000) or a percentage
	// ("10%"), rounded up.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? (self >= 1 && self <= 10000) : self.matches('^([1-9][0-9]?|100)%$')",message="rollout.canary.nodes must be a count between 1 and 10000 or a percentage between 1% and 100%"
	Nodes *intstr.IntOrString `json:"nodes,omitempty"`

	// selector picks the canary nodes by label among the profile's nodes.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || size(self.matchLabels) <= 16",message="at most 16 matchLabels"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || size(self.matchExpressions) <= 16",message="at most 16 matchExpressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="a matchExpressions operator must be In, NotIn, Exists or DoesNotExist"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, (e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0))",message="matchExpressions values: In and NotIn need at least one, Exists and DoesNotExist take none"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !has(e.values) || size(e.values) <= 64)",message="at most 64 matchExpressions values per expression"
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// RolloutSpec is how a new revision of a profile reaches its nodes: canary
// nodes first, then batches of at most maxInFlight nodes, each node gated on
// its own before/after run-queue latency.
// +kubebuilder:validation:XValidation:rule="!has(self.verificationWindow) || !has(self.inconclusiveTimeout) || duration(self.inconclusiveTimeout) >= duration(self.verificationWindow)",message="rollout.inconclusiveTimeout must be at least rollout.verificationWindow"
type RolloutSpec struct {
	// canary chooses the nodes that go first; without it the first batch
	// of maxInFlight nodes is the canary.
	// +optional
	Canary *CanarySpec `json:"canary,omitempty"`

	// maxInFlight is how many nodes may be changed but not yet verified at
	// once: a count (1-10000) or a percentage ("25%") of the profile's
	// nodes, rounded up, at least one. Default 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? (self >= 1 && self <= 10000) : self.matches('^([1-9][0-9]?|100)%$')",message="rollout.maxInFlight must be a count between 1 and 10000 or a percentage between 1% and 100%"
	MaxInFlight *intstr.IntOrString `json:"maxInFlight,omitempty"`

	// verificationWindow is how long a changed node is measured before it
	// is judged; at least one measurement interval, at most 24h. Default 1m.
	// +optional
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('5s') && duration(self) <= duration('24h')",message="rollout.verificationWindow must be between 5s and 24h"
	VerificationWindow *metav1.Duration `json:"verificationWindow,omitempty"`

	// maxP99Regression is the largest acceptable ratio of a node's p99
	// after the change to its own baseline, a decimal between 1 and 100
	// ("1.2": at most 20% worse). Default "1.2". The p99 is the measured
	// pods' own run delay where the node runs pods granted a tuning or
	// matched by measurement.podSelector in a namespace
	// measurement.namespaceSelector selects (with minSamples in both windows),
	// else the node-wide run queue's: a tuning may rightly lengthen other
	// tasks' waits to shorten the tier's.
	// +optional
	// +kubebuilder:default="1.2"
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:Pattern=`^[0-9]{1,3}(\.[0-9]{1,3})?$`
	// +kubebuilder:validation:XValidation:rule="double(self) >= 1.0 && double(self) <= 100.0",message="rollout.maxP99Regression must be a ratio between 1 and 100"
	MaxP99Regression string `json:"maxP99Regression,omitempty"`

	// maxThrottledRatioIncrease is how much the highest throttled-period
	// ratio of a pod may grow over its baseline, a decimal between 0 and 1.
	// Default "0.05".
	// +optional
	// +kubebuilder:default="0.05"
	// +kubebuilder:validation:MaxLength=12
	// +kubebuilder:validation:Pattern=`^(0(\.[0-9]{1,6})?|1(\.0{1,6})?)$`
	MaxThrottledRatioIncrease string `json:"maxThrottledRatioIncrease,omitempty"`

	// minSamples is how many run-queue samples the baseline and the current
	// window each need for a verdict; fewer is Inconclusive. Default 100,
	// at least 20 (MinSamplesFloor): with fewer the p99 is the window's
	// single worst wakeup, and one outlier would decide a rollback.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=20
	// +kubebuilder:validation:Maximum=1000000000
	MinSamples int64 `json:"minSamples,omitempty"`

	// inconclusiveTimeout bounds how long a changed node may stay
	// Inconclusive (or wait for its baseline) before onInconclusive decides;
	// at least verificationWindow, at most 24h. Default 10m.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('5s') && duration(self) <= duration('24h')",message="rollout.inconclusiveTimeout must be between 5s and 24h"
	InconclusiveTimeout *metav1.Duration `json:"inconclusiveTimeout,omitempty"`

	// onInconclusive is Fail (default: the node counts as regressed) or
	// Pass, applied when inconclusiveTimeout runs out.
	// +optional
	// +kubebuilder:default=Fail
	OnInconclusive InconclusivePolicy `json:"onInconclusive,omitempty"`

	// onRegression is Rollback (default) or Pause.
	// +optional
	// +kubebuilder:default=Rollback
	OnRegression RegressionPolicy `json:"onRegression,omitempty"`

	// paused stops the rollout where it is; setting it back to false
	// resumes it (as does any other spec change after a rollback).
	// +optional
	Paused bool `json:"paused,omitempty"`

	// rebootBack is what a rollback does with nodes that were rebooted into
	// the rolled-back revision's kernel arguments (bootParameters.policy
	// Reboot): Pause (the default) stops for a person, who resumes with
	// paused or a spec change; Automatic reboots them back, one reboot slot
	// at a time.
	// +optional
	// +kubebuilder:default=Pause
	RebootBack RebootBackPolicy `json:"rebootBack,omitempty"`
}

// RebootBackPolicy says whether a rollback reboots nodes back by itself.
// +kubebuilder:validation:Enum=Pause;Automatic
type RebootBackPolicy string

const (
	// RebootBackPause waits for a person before any reboot back.
	RebootBackPause RebootBackPolicy = "Pause"
	// RebootBackAutomatic reboots rolled-back nodes back without waiting.
	RebootBackAutomatic RebootBackPolicy = "Automatic"
)

// MinSamplesFloor is the least rollout.minSamples the CRD accepts.
const MinSamplesFloor = 20

// RolloutPhase is where a profile's rollout stands.
// +kubebuilder:validation:Enum=Baselining;Canary;Progressing;Complete;Paused;RolledBack
type RolloutPhase string

const (
	// RolloutBaselining: the next nodes are measuring their baseline.
	RolloutBaselining RolloutPhase = "Baselining"
	// RolloutCanary: the canary nodes hold the new revision and are verified.
	RolloutCanary RolloutPhase = "Canary"
	// RolloutProgressing: batches of maxInFlight nodes are being changed.
	RolloutProgressing RolloutPhase = "Progressing"
	// RolloutComplete: every node holds the revision and passed.
	RolloutComplete RolloutPhase = "Complete"
	// RolloutPaused: stopped by spec.rollout.paused or by a regression with
	// onRegression Pause.
	RolloutPaused RolloutPhase = "Paused"
	// RolloutRolledBack: a node regressed and the changed nodes went back.
	RolloutRolledBack RolloutPhase = "RolledBack"
)

// RolloutStatus is a profile's rollout as the controller runs it.
type RolloutStatus struct {
	// revision is the ControllerRevision being rolled out (<profile>-<hash>).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Revision string `json:"revision,omitempty"`
	// previousRevision is where a rollback returns to; empty means the
	// nodes revert fully (the first revision).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PreviousRevision string `json:"previousRevision,omitempty"`
	// observedGeneration is the profile generation the phase was decided
	// at; a halted rollout (RolledBack, or Paused on a regression) resumes
	// only when the generation moves on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// phase is Baselining, Canary, Progressing, Complete, Paused or RolledBack.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`
	// updated counts nodes that hold revision and passed verification.
	// +optional
	Updated int32 `json:"updated"`
	// verifying counts nodes that hold revision and are not yet judged.
	// +optional
	Verifying int32 `json:"verifying"`
	// waiting counts nodes not reached yet (they keep their previous tuning).
	// +optional
	Waiting int32 `json:"waiting"`
	// failed counts nodes that regressed, failed to apply or timed out.
	// +optional
	Failed int32 `json:"failed"`
	// rolledBack counts nodes sent back to previousRevision.
	// +optional
	RolledBack int32 `json:"rolledBack"`
	// improved, unchanged, regressed and inconclusive count the nodes'
	// latest verdicts.
	// +optional
	Improved int32 `json:"improved"`
	// +optional
	Unchanged int32 `json:"unchanged"`
	// +optional
	Regressed int32 `json:"regressed"`
	// +optional
	Inconclusive int32 `json:"inconclusive"`
	// message says why, with figures ("node w-7 regressed: run-queue p99
	// 412µs → 1.9ms, 4.6× > 1.2×; rolled back").
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// verdicts lists the nodes whose latest verdict is Regressed or
	// Inconclusive, with the reason and figures, worst first, at most 32
	// (verdictsOmitted counts the rest). The counts above cover every
	// node. The controller recomputes them each pass from the nodes'
	// evidence; this list is also its memory of why a node was rolled back.
	// +optional
	// +listType=map
	// +listMapKey=node
	// +kubebuilder:validation:MaxItems=32
	Verdicts []NodeVerdictStatus `json:"verdicts,omitempty"`
	// verdictsOmitted counts the judged nodes left out of verdicts.
	// +optional
	// +kubebuilder:validation:Minimum=0
	VerdictsOmitted int32 `json:"verdictsOmitted,omitempty"`
}

// NodeVerdictStatus is one node's verdict in a profile's rollout status.
type NodeVerdictStatus struct {
	// node is the node's name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`
	// verdict is Improved, Unchanged, Regressed or Inconclusive.
	// +required
	// +kubebuilder:validation:Enum=Improved;Unchanged;Regressed;Inconclusive
	Verdict string `json:"verdict"`
	// revision is the revision the verdict judged.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Revision string `json:"revision,omitempty"`
	// message carries the figures ("run-queue p99 412µs → 1.9ms, 4.6× > 1.2×").
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
	// lastTransitionTime is when the node got this verdict.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
}

// LatencySummary is a run-queue latency distribution over one window.
type LatencySummary struct {
	// samples is the number of wakeups (or schedstat deltas) measured.
	// +optional
	Samples int64 `json:"samples,omitempty"`
	// p50 is the median.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	P50 *metav1.Duration `json:"p50,omitempty"`
	// p99 is the 99th percentile: the figure the verdict is computed from.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	P99 *metav1.Duration `json:"p99,omitempty"`
	// p999 is the 99.9th percentile.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	P999 *metav1.Duration `json:"p999,omitempty"`
	// max is the largest latency seen.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	Max *metav1.Duration `json:"max,omitempty"`
}

// LatencyEvidence is one full measurement window of a node under one
// (spec.action, spec.revision). Written by the agent, under every action
// (Apply, Baseline and Revert alike), unless measurement is Disabled:
//
//   - current is the latest complete measurement interval during the whole
//     of which the node held the LatencyNode's spec.action and spec.revision
//     (an interval that began before the agent finished acting on them does
//     not count; for Baseline, "acting" is writing nothing). The agent
//     rewrites it at the end of every such interval, with revision and
//     action copied from the spec it measured under.
//   - baseline: when the agent is about to act on a spec whose (action,
//     revision) differs from current's, it first copies current into
//     baseline (only if current is non-nil, else baseline stays as it is),
//     then clears current, then acts. So baseline is the last full interval
//     before the change: under action Baseline (nothing written) for a
//     first apply, under the previous revision for a spec change.
//   - runQueue is the node-wide histogram (the Node class of
//     status.latency); pods the run delay of the opted-in or
//     measurement.podSelector pods' own tasks; throttledRatio the highest
//     of those pods' throttled-period ratios over the same window.
//
// The controller judges a node holding revision R once current.revision is
// R, current.action is Apply and current.measuredAt is at least
// verificationWindow after it moved the node (RevisionSetAtAnnotation); a
// node waits to be moved until current matches the spec it holds (its
// baseline-to-be), at most inconclusiveTimeout. The agent writes numbers
// only; the verdict is in the profile's status.rollout.verdicts.
type LatencyEvidence struct {
	// revision is the spec.revision the node held for the whole window
	// ("" under action Baseline or a spec without a revision).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Revision string `json:"revision,omitempty"`
	// action is the spec.action in force: Apply, Baseline or Revert.
	// +required
	Action NodeAction `json:"action"`
	// window is how long the measurement ran.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	Window *metav1.Duration `json:"window,omitempty"`
	// measuredAt is when the window ended.
	// +required
	MeasuredAt metav1.Time `json:"measuredAt"`
	// runQueue is the node-wide run-queue latency (every CPU).
	// +optional
	RunQueue LatencySummary `json:"runQueue,omitempty"`
	// pods is the run delay of the opted-in or measured pods' own tasks
	// (schedstat run_delay deltas); absent when the node runs none.
	// +optional
	Pods *LatencySummary `json:"pods,omitempty"`
	// throttledRatio is the highest throttled-period ratio of an opted-in
	// or measured pod over the window, a decimal ("0.012"); absent when no
	// such pod has a CFS limit.
	// +optional
	// +kubebuilder:validation:MaxLength=12
	ThrottledRatio string `json:"throttledRatio,omitempty"`
	// neighbours is the measured pods' wait charged to neighbours over
	// the window (eBPF attribution); absent without it.
	// +optional
	Neighbours *NeighbourWait `json:"neighbours,omitempty"`
	// schedulerClass is the scheduling class normal tasks ran in at the
	// window's end: fair, or ext:<ops name> for a sched_ext scheduler.
	// +optional
	// +kubebuilder:validation:MaxLength=160
	SchedulerClass string `json:"schedulerClass,omitempty"`
	// schedulerClassChange says how the scheduling class changed during
	// the window ("fair → ext:scx_lavd (enable_seq 3→4)"); such a window
	// is Inconclusive.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	SchedulerClassChange string `json:"schedulerClassChange,omitempty"`
}

// RevisionSetAtAnnotation on a LatencyNode is when the controller last
// changed its spec.revision or spec.action (RFC 3339); verification and
// inconclusiveTimeout count from it. Written by the controller only.
const RevisionSetAtAnnotation = "latencytier.io/revision-set-at"

// Verdicts: a node's verdict in the profile's status.rollout (the counts,
// and verdicts[].verdict). The message carries the figures ("run-queue
// p99 412µs → 1.9ms, 4.6× > 1.2×").
const (
	// VerdictImproved: p99 fell to at most ImprovedRatio of the baseline.
	VerdictImproved = "Improved"
	// VerdictUnchanged: within maxP99Regression and not clearly better.
	VerdictUnchanged = "Unchanged"
	// VerdictRegressed: p99 ratio above maxP99Regression, throttling grew
	// past maxThrottledRatioIncrease, or outside latencyBudget.
	VerdictRegressed = "Regressed"
	// VerdictInconclusive: no baseline, no current window yet, or too few
	// samples.
	VerdictInconclusive = "Inconclusive"
)

// Verdicts are the verdict words, in the order status.summary and the
// LatencyProfile printer columns (-o wide) show their counts; kubectl
// latency prints the same words.
var Verdicts = []string{VerdictImproved, VerdictUnchanged, VerdictRegressed, VerdictInconclusive}

// PassingVerdicts let a rollout go on. status.rollout counts every verdict
// but lists only the nodes whose verdict is not one of these.
var PassingVerdicts = []string{VerdictImproved, VerdictUnchanged}
