package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LatencyProfileSpec is a platform team's intent: which nodes form a latency
// tier and how their kernel is tuned. The controller never writes it.
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.measurement) || !has(self.measurement.source) || self.measurement.source != 'Disabled'",message="rollout needs measurement: with measurement.source Disabled no node can be verified"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || !has(self.rollout.verificationWindow) || duration(self.rollout.verificationWindow) >= (has(self.measurement) && has(self.measurement.interval) ? duration(self.measurement.interval) : duration('30s'))",message="rollout.verificationWindow must be at least one measurement interval (measurement.interval, default 30s)"
// +kubebuilder:validation:XValidation:rule="!has(self.bootParameters) || !has(self.bootParameters.policy) || self.bootParameters.policy != 'Reboot' || (has(self.rollout) && has(self.rollout.canary))",fieldPath=".rollout",message="bootParameters.policy Reboot needs rollout with a canary (rollout.canary): reboots into new kernel arguments go canary first, never to every selected node at once"
// +kubebuilder:validation:XValidation:rule="!has(self.bootParameters) || !has(self.bootParameters.policy) || self.bootParameters.policy != 'Reboot' || !has(self.rollout) || !has(self.rollout.canary) || !has(self.rollout.canary.nodes) || type(self.rollout.canary.nodes) == int || self.rollout.canary.nodes != '100%'",fieldPath=".rollout.canary.nodes",message="bootParameters.policy Reboot needs a canary smaller than the selection: rollout.canary.nodes 100% reboots every node at once"
// +kubebuilder:validation:XValidation:rule="!has(self.rollout) || (has(self.measurement) && has(self.measurement.namespaceSelector) && ((has(self.measurement.namespaceSelector.matchLabels) && size(self.measurement.namespaceSelector.matchLabels) > 0) || (has(self.measurement.namespaceSelector.matchExpressions) && size(self.measurement.namespaceSelector.matchExpressions) > 0)))",fieldPath=".measurement.namespaceSelector",message="rollout needs a non-empty measurement.namespaceSelector (matchLabels or matchExpressions): the rollout's verdicts rest on the measured pods, and with none or {} any tenant's pod could count as the tier's and push a rollback"
type LatencyProfileSpec struct {
	// nodeSelector selects the nodes this profile tunes. A node selected by
	// several profiles goes to the one with the highest priority. It must
	// not be empty: {} would select every node, control-plane nodes
	// included.
	// +required
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="nodeSelector must not be empty: {} selects every node, control-plane nodes included; select the tier's nodes by label (matchLabels or matchExpressions)"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || size(self.matchLabels) <= 16",message="at most 16 matchLabels"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || size(self.matchExpressions) <= 16",message="at most 16 matchExpressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="a matchExpressions operator must be In, NotIn, Exists or DoesNotExist"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, (e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0))",message="matchExpressions values: In and NotIn need at least one, Exists and DoesNotExist take none"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !has(e.values) || size(e.values) <= 64)",message="at most 64 matchExpressions values per expression"
	NodeSelector metav1.LabelSelector `json:"nodeSelector"`

	// priority decides between profiles that select the same node: the
	// highest wins; equal priorities on one node are a conflict, and that
	// node gets neither profile until the overlap goes. Between -1000 and 1000.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=-1000
	// +kubebuilder:validation:Maximum=1000
	Priority int32 `json:"priority,omitempty"`

	TuningSpec `json:",inline"`

	// --- safe rollout (docs/rollout.md) ---

	// rollout changes the nodes canary first, then in batches, gating each
	// on its own before/after latency and rolling back on a regression.
	// Without it every node takes a change at once.
	// +optional
	Rollout *RolloutSpec `json:"rollout,omitempty"`

	// reboot bounds the managed reboots of bootParameters.policy Reboot:
	// drain and boot timeouts. How many nodes may be cordoned or rebooting
	// at once across all profiles is the manager's --max-rebooting.
	// +optional
	Reboot *RebootSpec `json:"reboot,omitempty"`
}

// ProfileNodeState is a node's state as seen from its LatencyProfile.
// +kubebuilder:validation:Enum=Pending;Applied;Degraded;Drifted;Conflicted;Reverting;Reverted;Unreachable;Stale
type ProfileNodeState string

const (
	NodeStatePending     ProfileNodeState = "Pending"
	NodeStateApplied     ProfileNodeState = "Applied"
	NodeStateDegraded    ProfileNodeState = "Degraded"
	NodeStateDrifted     ProfileNodeState = "Drifted"
	NodeStateConflicted  ProfileNodeState = "Conflicted"
	NodeStateReverting   ProfileNodeState = "Reverting"
	NodeStateReverted    ProfileNodeState = "Reverted"
	NodeStateUnreachable ProfileNodeState = "Unreachable"
	// NodeStateStale: the node's agent has not written its status for more
	// than two of its heartbeat intervals; what it last said may no longer
	// hold, so the node does not count as healthy.
	NodeStateStale ProfileNodeState = "Stale"
)

// ProfileNodeStatus is one node's line in a LatencyProfile's status.
type ProfileNodeStatus struct {
	// name is the node's name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// state is the node's state for this profile.
	// +required
	State ProfileNodeState `json:"state"`

	// runQueueP99 is the node's measured 99th percentile run-queue latency.
	// +optional
	RunQueueP99 *metav1.Duration `json:"runQueueP99,omitempty"`

	// throttledRatio is the highest throttled-period ratio of a pod on the node.
	// +optional
	// +kubebuilder:validation:MaxLength=12
	ThrottledRatio string `json:"throttledRatio,omitempty"`

	// message says why the node is in this state.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
}

// LatencyProfileStatus is aggregated by the controller from the profile's
// LatencyNodes.
type LatencyProfileStatus struct {
	// observedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Ready, Progressing and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// The counts below default to 0 in the schema: a status merge patch
	// leaves out a count that stayed 0, so without the default the stored
	// object would lack it and kubectl get print an empty column (printer
	// columns cannot default; a schema default fills the field whenever the
	// object is read).

	// matched counts the nodes the selector matches (including conflicted).
	// +optional
	// +kubebuilder:default=0
	Matched int32 `json:"matched"`
	// applied counts nodes that report the current generation Applied.
	// +optional
	// +kubebuilder:default=0
	Applied int32 `json:"applied"`
	// degraded counts nodes that failed, drifted or are unreachable.
	// +optional
	// +kubebuilder:default=0
	Degraded int32 `json:"degraded"`
	// conflicted counts nodes claimed with equal priority by another profile.
	// +optional
	// +kubebuilder:default=0
	Conflicted int32 `json:"conflicted"`
	// outsideBudget counts nodes whose measurements break latencyBudget.
	// +optional
	// +kubebuilder:default=0
	OutsideBudget int32 `json:"outsideBudget"`
	// rebootRequired counts nodes whose kernel command line lacks isolation flags.
	// +optional
	// +kubebuilder:default=0
	RebootRequired int32 `json:"rebootRequired"`
	// stale counts nodes whose agent has been silent for more than two
	// heartbeat intervals (also counted in degraded).
	// +optional
	// +kubebuilder:default=0
	Stale int32 `json:"stale"`
	// contended counts nodes whose RunQueueContention condition is True:
	// their measured pods wait behind others (measurement.contention).
	// +optional
	// +kubebuilder:default=0
	Contended int32 `json:"contended"`
	// contentionTainted counts the profile's nodes that carry the
	// latencytier.io/runqueue-contention taint
	// (measurement.contention.taint).
	// +optional
	// +kubebuilder:default=0
	ContentionTainted int32 `json:"contentionTainted"`
	// contentionHeldBack counts contended nodes left without the
	// contention taint because measurement.contention.maxTaintedPercent
	// allows no more at once.
	// +optional
	// +kubebuilder:default=0
	ContentionHeldBack int32 `json:"contentionHeldBack"`
	// podsOutsideBudget counts the measured pods on the profile's nodes
	// whose verdict against measurement.budgets is Outside (each node's
	// status.podBudgets.outside; kubectl latency explain names them).
	// +optional
	// +kubebuilder:default=0
	PodsOutsideBudget int32 `json:"podsOutsideBudget"`

	// worstRunQueueP99 is the highest p99 run-queue latency across nodes.
	// +optional
	WorstRunQueueP99 *metav1.Duration `json:"worstRunQueueP99,omitempty"`

	// maxThrottledRatio is the highest throttled-period ratio across nodes.
	// +optional
	// +kubebuilder:validation:MaxLength=12
	MaxThrottledRatio string `json:"maxThrottledRatio,omitempty"`

	// nodes lists nodes worst first, at most 32; nodesOmitted counts the rest.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Nodes []ProfileNodeStatus `json:"nodes,omitempty"`

	// nodesOmitted counts the nodes left out of nodes.
	// +optional
	NodesOmitted int32 `json:"nodesOmitted,omitempty"`

	// waitingFor names the nodes a deletion is still waiting to revert.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	WaitingFor []string `json:"waitingFor,omitempty"`

	// summary is what kubectl get prints beside the counts, "-" where a
	// figure is not known yet; written by the manager with every status
	// write.
	// +optional
	// +kubebuilder:default={}
	Summary ProfileSummary `json:"summary,omitempty"`

	// --- safe rollout (docs/rollout.md) ---

	// rollout is where the current revision's rollout stands, and the
	// nodes' verdicts (also kept without spec.rollout, as evidence).
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`

	// reboots is where the managed reboots for the current revision stand
	// (bootParameters.policy Reboot).
	// +optional
	Reboots *RebootRolloutStatus `json:"reboots,omitempty"`
}

// LatencyProfile turns the nodes it selects into a latency tier: the agent
// on each applies the tuning, keeps it from drifting, and reports run-queue
// latency and throttling back here.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=lp,categories=latencytier
// +kubebuilder:subresource:status
// Printer columns read spec, the counts (which default to 0) and
// status.summary (which defaults to "-") only: a column over a field that
// may be absent prints an empty cell (TestPrinterColumnsNeverBlank).
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matched`
// +kubebuilder:printcolumn:name="Applied",type=integer,JSONPath=`.status.applied`
// +kubebuilder:printcolumn:name="Degraded",type=integer,JSONPath=`.status.degraded`
// +kubebuilder:printcolumn:name="Stale",type=integer,JSONPath=`.status.stale`
// +kubebuilder:printcolumn:name="Worst-P99",type=string,JSONPath=`.status.summary.worstP99`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.summary.ready`
// +kubebuilder:printcolumn:name="Rollout",type=string,JSONPath=`.status.summary.rollout`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Throttled",type=string,JSONPath=`.status.summary.throttled`,priority=1
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`,priority=1
// +kubebuilder:printcolumn:name="Conflicted",type=integer,JSONPath=`.status.conflicted`,priority=1
// +kubebuilder:printcolumn:name="Outside-Budget",type=integer,JSONPath=`.status.outsideBudget`,priority=1
// +kubebuilder:printcolumn:name="Contended",type=integer,JSONPath=`.status.contended`,priority=1
// +kubebuilder:printcolumn:name="Contention-Tainted",type=integer,JSONPath=`.status.contentionTainted`,priority=1
// +kubebuilder:printcolumn:name="Pods-Outside",type=integer,JSONPath=`.status.podsOutsideBudget`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.summary.reason`,priority=1
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.summary.revision`,priority=1
// +kubebuilder:printcolumn:name="Improved",type=string,JSONPath=`.status.summary.improved`,priority=1
// +kubebuilder:printcolumn:name="Unchanged",type=string,JSONPath=`.status.summary.unchanged`,priority=1
// +kubebuilder:printcolumn:name="Regressed",type=string,JSONPath=`.status.summary.regressed`,priority=1
// +kubebuilder:printcolumn:name="Inconclusive",type=string,JSONPath=`.status.summary.inconclusive`,priority=1
type LatencyProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired tuning and the nodes it applies to.
	// +required
	Spec LatencyProfileSpec `json:"spec"`

	// status is written by the controller only. It defaults to {} so that
	// its counts read 0 and its summary "-" before the first status write.
	// +optional
	// +kubebuilder:default={}
	Status LatencyProfileStatus `json:"status,omitempty"`
}

// LatencyProfileList is a list of LatencyProfiles.
// +kubebuilder:object:root=true
type LatencyProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LatencyProfile `json:"items"`
}
