package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeAction tells the agent what to do with its node.
// +kubebuilder:validation:Enum=Apply;Revert;Baseline
type NodeAction string

const (
	// ActionApply applies tuning and keeps it applied.
	ActionApply NodeAction = "Apply"
	// ActionRevert restores every original the agent journaled.
	ActionRevert NodeAction = "Revert"
	// ActionBaseline (safe rollout) measures without writing anything to
	// the kernel: the agent neither applies nor reverts, and reports its
	// windows in status.current with action Baseline. The controller sends
	// it with an empty spec.tuning, so an agent that predates it (and
	// treats every action but Revert as Apply) applies nothing either.
	ActionBaseline NodeAction = "Baseline"
)

// LatencyNodeSpec is written by the controller only: the tuning resolved for
// one node, and which profile generation it came from.
// +kubebuilder:validation:XValidation:rule="self.action == 'Revert' || (has(self.profile) && size(self.profile) > 0)",message="profile is required when action is Apply or Baseline"
type LatencyNodeSpec struct {
	// action is Apply, Revert or Baseline (safe rollout: measure only).
	// +required
	Action NodeAction `json:"action"`

	// profile is the LatencyProfile this tuning comes from.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Profile string `json:"profile,omitempty"`

	// profileGeneration is the generation of that profile.
	// +optional
	ProfileGeneration int64 `json:"profileGeneration,omitempty"`

	// tuning is the resolved tuning for this node (ignored on Revert).
	// Written whole by the controller alone: managedFields name it, not each
	// field in it.
	// +optional
	// +structType=atomic
	Tuning TuningSpec `json:"tuning,omitempty"`

	// --- safe rollout (docs/rollout.md) ---

	// revision names the ControllerRevision (<profile>-<hash>, in the
	// manager's namespace) whose tuning spec.tuning is; empty with action
	// Baseline. The agent copies it into status.current.revision.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Revision string `json:"revision,omitempty"`

	// verifyAfter is when the rollout's verification window for this
	// node's revision ends. The agent reports the first full measurement
	// window that ends at or after it at once, whatever else changed, so
	// the controller can judge the node without waiting for a heartbeat.
	// Absent outside a rollout.
	// +optional
	VerifyAfter *metav1.Time `json:"verifyAfter,omitempty"`

	// reboot is the manager's record of this node's managed reboot
	// (bootParameters.policy Reboot): absent unless the node is being
	// drained, rebooted or verified after a boot.
	// +optional
	Reboot *NodeRebootSpec `json:"reboot,omitempty"`
}

// SettingState is the outcome of one setting on the node.
// +kubebuilder:validation:Enum=Applied;Unsupported;Invalid;Immovable;Failed;Reverted;Conflict;Refused;OwnedBy;Fallback
type SettingState string

const (
	// SettingApplied means the node holds the desired value.
	SettingApplied SettingState = "Applied"
	// SettingUnsupported means the running kernel lacks the knob.
	SettingUnsupported SettingState = "Unsupported"
	// SettingInvalid means the kernel refused the value (EINVAL).
	SettingInvalid SettingState = "Invalid"
	// SettingImmovable means a managed or per-CPU IRQ refused new affinity.
	SettingImmovable SettingState = "Immovable"
	// SettingFailed means the write failed for another reason.
	SettingFailed SettingState = "Failed"
	// SettingReverted means the original value was restored.
	SettingReverted SettingState = "Reverted"
	// SettingConflict means someone else changed the value after the agent
	// wrote it, so revert left their value in place.
	SettingConflict SettingState = "Conflict"
	// SettingRefused means the agent declined by policy, not by failure: a
	// pod asked for something (quota removal, the isolated CPUs) the
	// profile does not grant its namespace. It does not make the node
	// PartiallyApplied, so a tenant cannot mark the tier degraded.
	SettingRefused SettingState = "Refused"
	// SettingOwnedBy means another writer on the node owns the setting's
	// target (kubelet's CPU manager, a DRA CPU driver, an NRI plugin,
	// CRI-O's hooks, TuneD): the agent does not write it and does not
	// re-assert it; owner names that writer and message what to configure
	// there instead.
	SettingOwnedBy SettingState = "OwnedBy"
	// SettingFallback means the kernel ejected latencytier's sched_ext
	// scheduler (scheduler/class Tier: an error, a stall caught by the
	// kernel's watchdog, SysRq-S) and the node fell back to the fair
	// class; message carries the kernel's reason. The agent does not load
	// the scheduler again for this revision (a new revision or a revert
	// clears it), and a rollout counts the node as failed.
	SettingFallback SettingState = "Fallback"
)

// SettingResult is one setting's outcome.
type SettingResult struct {
	// setting names the knob: scheduler/<field> (scheduler/autogroup),
	// sysctl/<name> (sysctl/net.core.busy_poll), irq/<n>,
	// cpuset/system.slice, cpuquota/...; docs/knobs.md lists them.
	// +required
	// +kubebuilder:validation:MaxLength=256
	Setting string `json:"setting"`
	// desired is the value the spec asks for.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Desired string `json:"desired,omitempty"`
	// actual is the value read back from the node.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Actual string `json:"actual,omitempty"`
	// state is the outcome.
	// +required
	State SettingState `json:"state"`
	// message explains Unsupported, Invalid, Immovable, Failed, Conflict,
	// Refused, OwnedBy and Fallback.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
	// owner names the other writer that owns this setting's target
	// (state OwnedBy), e.g. "dra-driver-cpu (pid 4242)".
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Owner string `json:"owner,omitempty"`
	// count is how many settings this line stands for: IRQ lines are
	// summarised, one entry per target mask and state, setting naming
	// the IRQs in range form (irq/24-31,40/smp_affinity_list). Absent
	// (or 1) for a single setting.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Count int32 `json:"count,omitempty"`
}

// KernelFacts describe the node's kernel as the agent found it.
type KernelFacts struct {
	// version is the kernel release (uname -r).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Version string `json:"version,omitempty"`
	// schedulerClass is the fair class's algorithm, CFS or EEVDF (6.6+);
	// activeClass says whether normal tasks run in it.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	SchedulerClass string `json:"schedulerClass,omitempty"`
	// cgroupMode is v1, hybrid or v2.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	CgroupMode string `json:"cgroupMode,omitempty"`
	// cgroupDriver is kubelet's cgroup driver (systemd or cgroupfs) as seen
	// from the pod cgroup tree.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	CgroupDriver string `json:"cgroupDriver,omitempty"`
	// onlineCPUs is the online CPU list.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	OnlineCPUs string `json:"onlineCPUs,omitempty"`
	// smtSiblings lists the hardware threads that share a core ("0,4"). A
	// host with more than 256 such groups is summarised by sibling offsets:
	// "0-383+384" says threads c and c+384 share a core for every c in 0-383.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=64
	SMTSiblings []string `json:"smtSiblings,omitempty"`
	// cmdlineIsolation holds the isolcpus, nohz_full and rcu_nocbs values
	// of the kernel command line ("isolcpus=2-3").
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=256
	CmdlineIsolation []string `json:"cmdlineIsolation,omitempty"`
	// debugfsMounted says the agent mounted debugfs to reach scheduler knobs.
	// +optional
	DebugfsMounted bool `json:"debugfsMounted,omitempty"`
	// activeClass is the scheduling class the node's normal tasks run in:
	// fair (CFS or EEVDF, which schedulerClass names and every scheduler
	// setting tunes), ext (a sched_ext BPF scheduler is attached; schedExt
	// names it), or unknown (the kernel's sched_ext state was unreadable).
	// +optional
	// +kubebuilder:validation:Enum=fair;ext;unknown
	ActiveClass string `json:"activeClass,omitempty"`
	// schedExt is what /sys/kernel/sched_ext said.
	// +optional
	SchedExt *SchedExtFacts `json:"schedExt,omitempty"`
}

// SchedExtFacts are the kernel's sched_ext state (/sys/kernel/sched_ext).
type SchedExtFacts struct {
	// supported says the kernel has sched_ext (CONFIG_SCHED_CLASS_EXT).
	// +optional
	Supported bool `json:"supported,omitempty"`
	// state is the kernel's enable state: enabling, enabled, disabling or
	// disabled.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	State string `json:"state,omitempty"`
	// ops is the attached BPF scheduler's name as the kernel shows it
	// (root/ops), escaped.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Ops string `json:"ops,omitempty"`
	// partial says the attached scheduler takes only SCHED_EXT tasks: the
	// other normal tasks stay in the fair class.
	// +optional
	Partial bool `json:"partial,omitempty"`
	// enableSeq counts the BPF schedulers the kernel enabled since boot
	// (enable_seq); absent where the kernel does not show it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	EnableSeq *int64 `json:"enableSeq,omitempty"`
	// note says what the agent could not read, or that the kernel has no
	// sched_ext.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Note string `json:"note,omitempty"`
}

// LatencyNodeStatus is written by the node's agent only. The agent writes it
// when something a reader acts on changed (a setting's state, a condition, a
// finding, the evidence a verdict needs, a figure moving ×1.8 from the value
// last written) and otherwise once per heartbeatInterval; Prometheus, not
// this status, keeps the fine-grained series.
type LatencyNodeStatus struct {
	// summary is what kubectl get prints, "-" where a figure is not known
	// yet; written by the agent with every report.
	// +optional
	// +kubebuilder:default={}
	Summary NodeSummary `json:"summary,omitempty"`
	// reportedAt is when the agent last wrote this status. A node whose
	// report is older than two heartbeatIntervals is shown Stale.
	// +optional
	ReportedAt *metav1.Time `json:"reportedAt,omitempty"`
	// heartbeatInterval is the agent's longest silence between two writes
	// when nothing changed (its --status-heartbeat).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	HeartbeatInterval *metav1.Duration `json:"heartbeatInterval,omitempty"`
	// observedGeneration is the spec generation the agent last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// profile and profileGeneration are what the node currently holds.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Profile string `json:"profile,omitempty"`
	// +optional
	ProfileGeneration int64 `json:"profileGeneration,omitempty"`
	// conditions are Applied, Drifted, RebootRequired, WithinBudget,
	// RunQueueContention, Reverted and RuntimeHookConnected.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// settings are the per-setting results, at most 256: Failed, Invalid and
	// Conflict first, then Immovable and Unsupported, then the rest, each
	// group ordered by setting.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Settings []SettingResult `json:"settings,omitempty"`
	// settingsOmitted counts the settings left out of settings to keep it
	// within 256 items (the Applied condition counts them all).
	// +optional
	// +kubebuilder:validation:Minimum=0
	SettingsOmitted int32 `json:"settingsOmitted,omitempty"`
	// heldThreads counts the threads whose scheduling policy the agent
	// changed and has not restored yet (from its journal, whatever the
	// bounded settings list shows or leaves out). A thread whose restore
	// fails stays counted until it is restored or the thread exits. While
	// a node holds one the manager keeps that node on the hostPID agent
	// (latencytier-agent-hostpid), which restoring them needs.
	// +optional
	// +kubebuilder:validation:Minimum=0
	HeldThreads int32 `json:"heldThreads,omitempty"`
	// isolation is what isolates the profile's isolated CPUs on this node
	// live and which goals still need boot parameters.
	// +optional
	Isolation *IsolationStatus `json:"isolation,omitempty"`

	// boot is the node's boot parameters: the plan from its own CPUs, what
	// is staged and booted, and the boots seen (docs/boot-parameters.md).
	// +optional
	Boot *BootStatus `json:"boot,omitempty"`
	// kernel holds the facts the agent found.
	// Written whole by the agent alone: managedFields name it, not each
	// field in it.
	// +optional
	// +structType=atomic
	Kernel *KernelFacts `json:"kernel,omitempty"`
	// latency is the measured run-queue latency.
	// Written whole by the agent alone: managedFields name it, not each
	// field in it.
	// +optional
	// +structType=atomic
	Latency *LatencyStatus `json:"latency,omitempty"`
	// runQueueP99 is the node-wide p99 (a copy for kubectl get).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	RunQueueP99 *metav1.Duration `json:"runQueueP99,omitempty"`
	// throttledRatio is the highest pod throttled ratio (a copy for kubectl get).
	// +optional
	// +kubebuilder:validation:MaxLength=12
	ThrottledRatio string `json:"throttledRatio,omitempty"`
	// throttling lists pods with a CFS limit, most throttled first, at most 32.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Throttling []PodThrottling `json:"throttling,omitempty"`
	// findings lists diagnostics, at most 32.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Findings []Finding `json:"findings,omitempty"`
	// podBudgets is each measured pod's verdict against
	// measurement.budgets (absent without budgets or measurement).
	// Written whole by the agent alone: managedFields name it, not each
	// field in it.
	// +optional
	// +structType=atomic
	PodBudgets *PodBudgetsStatus `json:"podBudgets,omitempty"`
	// lastTransitionTime of the applied state.
	// +optional
	LastAppliedTime *metav1.Time `json:"lastAppliedTime,omitempty"`

	// --- safe rollout evidence (docs/rollout.md); see LatencyEvidence ---

	// baseline is the last full measurement window before the node's
	// current (action, revision): written by the agent.
	// Written whole by the agent alone: managedFields name it, not each
	// field in it.
	// +optional
	// +structType=atomic
	Baseline *LatencyEvidence `json:"baseline,omitempty"`
	// current is the latest full window under the spec's (action,
	// revision): written by the agent.
	// Written whole by the agent alone: managedFields name it, not each
	// field in it.
	// +optional
	// +structType=atomic
	Current *LatencyEvidence `json:"current,omitempty"`
}

// LatencyNode is one node's resolved tuning (spec, by the controller) and what
// the node's agent reports (status). Its name is the node's name.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=ln,categories=latencytier
// +kubebuilder:subresource:status
// Printer columns read spec and status.summary only: a column over a field
// that may be absent prints an empty cell (printer columns cannot default),
// while summary's fields default to "-" (TestPrinterColumnsNeverBlank).
// +kubebuilder:printcolumn:name="Profile",type=string,JSONPath=`.spec.profile`
// +kubebuilder:printcolumn:name="Applied",type=string,JSONPath=`.status.summary.applied`
// +kubebuilder:printcolumn:name="P99",type=string,JSONPath=`.status.summary.p99`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Drift",type=string,JSONPath=`.status.summary.drift`,priority=1
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.action`,priority=1
// +kubebuilder:printcolumn:name="Baseline-P99",type=string,JSONPath=`.status.summary.baselineP99`,priority=1
// +kubebuilder:printcolumn:name="Pod-Baseline-P99",type=string,JSONPath=`.status.summary.podBaselineP99`,priority=1
// +kubebuilder:printcolumn:name="Pod-P99",type=string,JSONPath=`.status.summary.podP99`,priority=1
// +kubebuilder:printcolumn:name="Throttled",type=string,JSONPath=`.status.summary.throttled`,priority=1
// +kubebuilder:printcolumn:name="Budget",type=string,JSONPath=`.status.summary.budget`,priority=1
// +kubebuilder:printcolumn:name="Reboot",type=string,JSONPath=`.status.summary.reboot`,priority=1
// +kubebuilder:printcolumn:name="Partitions",type=string,JSONPath=`.status.summary.partitions`,priority=1
// +kubebuilder:printcolumn:name="Boot",type=string,JSONPath=`.status.summary.boot`,priority=1
// +kubebuilder:printcolumn:name="Needs-Boot",type=string,JSONPath=`.status.summary.needsBoot`,priority=1
// +kubebuilder:printcolumn:name="Kernel",type=string,JSONPath=`.status.summary.kernel`,priority=1
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.status.summary.class`,priority=1
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.spec.revision`,priority=1
type LatencyNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is written by the controller only.
	// +required
	Spec LatencyNodeSpec `json:"spec"`

	// status is written by this node's agent only. It defaults to {} so
	// that its summary reads "-" before the agent's first report.
	// +optional
	// +kubebuilder:default={}
	Status LatencyNodeStatus `json:"status,omitempty"`
}

// LatencyNodeList is a list of LatencyNodes.
// +kubebuilder:object:root=true
type LatencyNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LatencyNode `json:"items"`
}
