package v1alpha1

// SummaryUnknown is what a summary field holds until its figure is known:
// kubectl get prints it instead of an empty cell.
const SummaryUnknown = "-"

// NodeSummary is what `kubectl get latencynodes` prints: one short string per
// column, each "-" until the agent knows it. A printer column over a field
// that is absent prints an empty cell and cannot default; these fields
// default to "-" in the schema (so a LatencyNode no agent has reported on yet
// reads "-" everywhere), and the agent rewrites them from the rest of the
// status with every report.
type NodeSummary struct {
	// applied is the Applied condition's status.
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=16
	Applied string `json:"applied,omitempty"`
	// p99 is the node's run-queue p99 (runQueueP99).
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=32
	P99 string `json:"p99,omitempty"`
	// drift is the Drifted condition's status.
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=16
	Drift string `json:"drift,omitempty"`
	// baselineP99 and currentP99 are the run-queue p99 of the evidence
	// windows before and after the node's current revision.
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=32
	BaselineP99 string `json:"baselineP99,omitempty"`
	// podBaselineP99 and podP99 are the measured pods' wait p99 of the same
	// windows.
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=32
	PodBaselineP99 string `json:"podBaselineP99,omitempty"`
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=32
	PodP99 string `json:"podP99,omitempty"`
	// throttled is the opted-in pods' throttled-period ratio
	// (throttledRatio).
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=16
	Throttled string `json:"throttled,omitempty"`
	// budget is the WithinBudget condition's status.
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=16
	Budget string `json:"budget,omitempty"`
	// reboot is the RebootRequired condition's status.
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=16
	Reboot string `json:"reboot,omitempty"`
	// partitions is isolation.partitions.
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=32
	Partitions string `json:"partitions,omitempty"`
	// boot is boot.state.
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=32
	Boot string `json:"boot,omitempty"`
	// needsBoot is isolation.needsBoot, comma separated.
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=128
	NeedsBoot string `json:"needsBoot,omitempty"`
	// kernel is kernel.version.
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=128
	Kernel string `json:"kernel,omitempty"`
	// class is the scheduling class normal tasks run in: fair, or
	// ext:<ops name> for a sched_ext scheduler (kernel.activeClass and
	// kernel.schedExt.ops).
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=160
	Class string `json:"class,omitempty"`
}

// ProfileSummary is what `kubectl get latencyprofiles` prints beside the
// counts: one short string per column, each "-" until the manager knows
// it (no node measured yet, no rollout), for the reason NodeSummary gives.
// The manager rewrites it from the rest of the status with every status
// write.
type ProfileSummary struct {
	// worstP99 is worstRunQueueP99.
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=32
	WorstP99 string `json:"worstP99,omitempty"`
	// throttled is maxThrottledRatio.
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=16
	Throttled string `json:"throttled,omitempty"`
	// ready and reason are the Ready condition's status and reason.
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=16
	Ready string `json:"ready,omitempty"`
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`
	// rollout and revision are rollout.phase and rollout.revision.
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=32
	Rollout string `json:"rollout,omitempty"`
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=253
	Revision string `json:"revision,omitempty"`
	// improved, unchanged, regressed and inconclusive are the rollout's
	// verdict counts.
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=11
	Improved string `json:"improved,omitempty"`
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=11
	Unchanged string `json:"unchanged,omitempty"`
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=11
	Regressed string `json:"regressed,omitempty"`
	// +optional
	// +kubebuilder:default="-"
	// +kubebuilder:validation:MaxLength=11
	Inconclusive string `json:"inconclusive,omitempty"`
}
