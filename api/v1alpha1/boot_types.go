package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TuningPendingTaint is the NoSchedule taint the manager keeps on a selected
// node from the moment it is selected, joins or comes back from a boot until
// its agent reports the profile Applied for the current boot. The
// tier's pods do not tolerate it, so they land only on tuned nodes; the agent
// and what the user marks node-critical tolerate it.
const TuningPendingTaint = "latencytier.io/tuning-pending"

// RebootCordonAnnotation marks a Node the manager cordoned for a managed
// reboot; its value is the revision (status/spec reboot.revision) the
// reboot is for. The manager sets it in the same patch as
// spec.unschedulable and removes only cordons that carry it; the agent
// reboots only while its Node is cordoned and carries it for the
// revision its LatencyNode asks for.
const RebootCordonAnnotation = "latencytier.io/reboot-cordon"

// BootPolicy is what the agent does about the boot parameters a node lacks.
// +kubebuilder:validation:Enum=ReportOnly;Reboot
type BootPolicy string

const (
	// BootReportOnly computes and reports each node's plan (the arguments
	// it lacks and why), stages nothing and reboots nothing: the platform
	// team edits the bootloader itself.
	BootReportOnly BootPolicy = "ReportOnly"
	// BootReboot stages the arguments through the node's bootloader and
	// reboots the node, one rollout step at a time, cordoned and drained
	// first (spec.reboot bounds it).
	BootReboot BootPolicy = "Reboot"
)

// BootParametersSpec asks for the kernel arguments only the command line
// gives. The arguments are not written here: the agent derives them from
// cpus.isolated and cpus.reserved and the node's own online CPUs (so mixed
// hardware under one profile does not fight), nohz_full, rcu_nocbs,
// isolcpus=managed_irq and irqaffinity, plus the typed extras below. There is
// no free-form argument string.
type BootParametersSpec struct {
	// policy is ReportOnly (the default: report the plan) or Reboot (stage
	// the arguments and reboot nodes as needed, drained, one rollout step
	// at a time).
	// +optional
	// +kubebuilder:default=ReportOnly
	Policy BootPolicy `json:"policy,omitempty"`

	// skewTick offsets the CPUs' scheduler ticks from one another
	// (skew_tick=1), so they do not contend for the jiffies lock at once.
	// +optional
	SkewTick Toggle `json:"skewTick,omitempty"`

	// maxCState limits the deepest idle state the kernel's idle drivers
	// may enter (processor.max_cstate and intel_idle.max_cstate): lower
	// wake-up latency for more power. Unlike power.isolated (which a
	// running kernel takes), it also binds firmware-driven idle.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9
	MaxCState *int32 `json:"maxCState,omitempty"`
}

// RebootSpec bounds the reboots a Reboot boot policy makes. It belongs to the
// fleet (the manager), not to a node's tuning: changing it starts no rollout.
type RebootSpec struct {
	// drainTimeout is how long a cordoned node's drain may take (evictions
	// honour PodDisruptionBudgets: a refused eviction is retried). When it
	// runs out the node is uncordoned, left unrebooted and the reboots
	// pause. Default 10m.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('30s') && duration(self) <= duration('24h')",message="reboot.drainTimeout must be between 30s and 24h"
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`

	// bootTimeout is how long a node may take, from the reboot request,
	// to come back Ready with a new boot and its tuning Applied. When it
	// runs out the reboots pause (the node stays cordoned for a person to
	// look at). Default 15m.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m') && duration(self) <= duration('24h')",message="reboot.bootTimeout must be between 1m and 24h"
	BootTimeout *metav1.Duration `json:"bootTimeout,omitempty"`

	// drain lets the drain evict pods it otherwise refuses to, as kubectl
	// drain's flags do. Without it a pod no controller owns, or one with
	// an emptyDir volume, blocks the drain (named in an event and in
	// status.reboots.message) until drainTimeout pauses the reboots.
	// +optional
	Drain *DrainSpec `json:"drain,omitempty"`
}

// DrainSpec loosens a managed reboot's drain. Every pod but DaemonSet and
// mirror pods is evicted through the Eviction API, so PodDisruptionBudgets
// are always asked; these only say which evictions the profile accepts.
type DrainSpec struct {
	// force evicts pods that no controller owns (kubectl drain --force):
	// nothing recreates them elsewhere.
	// +optional
	Force bool `json:"force,omitempty"`

	// deleteEmptyDirData evicts pods with emptyDir volumes (kubectl drain
	// --delete-emptydir-data): their emptyDir data is lost.
	// +optional
	DeleteEmptyDirData bool `json:"deleteEmptyDirData,omitempty"`
}

// RebootPhase is where one node's managed reboot stands.
// +kubebuilder:validation:Enum=Draining;Rebooting;Verifying
type RebootPhase string

const (
	// RebootDraining: the node is cordoned and its pods are being evicted.
	RebootDraining RebootPhase = "Draining"
	// RebootRequested: drained; the agent is asked to reboot the node
	// once, for this revision.
	RebootRequested RebootPhase = "Rebooting"
	// RebootVerifying: the node is back with a new boot; the manager
	// waits for Applied and the latency verdict before it uncordons.
	RebootVerifying RebootPhase = "Verifying"
)

// NodeRebootSpec is the manager's record of one node's managed reboot,
// written in the LatencyNode's spec (the manager's) so a restarted manager
// resumes where it was.
type NodeRebootSpec struct {
	// revision is the rollout revision whose boot parameters the reboot is
	// for. The agent reboots at most once per revision.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Revision string `json:"revision"`

	// phase is Draining, Rebooting (the agent reboots the node when it
	// reads it) or Verifying.
	// +required
	Phase RebootPhase `json:"phase"`

	// since is when the phase began; the drain and boot timeouts count
	// from it.
	// +required
	Since metav1.Time `json:"since"`

	// bootID is the node's boot id when the reboot was requested: a
	// different one in the agent's report means the node rebooted.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	BootID string `json:"bootID,omitempty"`
}

// BootState is where a node's boot parameters stand.
// +kubebuilder:validation:Enum=NotNeeded;Planned;Staged;Booted;Unstaged;Unsupported;Conflict;Failed
type BootState string

const (
	// BootNotNeeded: the profile asks for no boot parameter.
	BootNotNeeded BootState = "NotNeeded"
	// BootPlanned: the running kernel lacks arguments and nothing is
	// staged (policy ReportOnly, or Reboot before this node's turn).
	BootPlanned BootState = "Planned"
	// BootStaged: the bootloader holds the arguments; the running kernel
	// does not yet (a reboot is due).
	BootStaged BootState = "Staged"
	// BootBooted: the running kernel holds every argument.
	BootBooted BootState = "Booted"
	// BootUnstaged: the node's spec (a rolled-back revision, a revision
	// that stages nothing, Revert) no longer stages arguments the agent
	// staged earlier; the agent took them out of the bootloader but the
	// running kernel still holds them (arguments lists them, present):
	// a reboot takes them out. After a rollback the manager makes that
	// reboot, once.
	BootUnstaged BootState = "Unstaged"
	// BootUnsupported: the node's boot backend cannot be staged by the
	// agent (image-based systems, UKIs); the message says why.
	BootUnsupported BootState = "Unsupported"
	// BootConflict: an argument is already set differently by someone
	// else; the agent refuses to overwrite it (the message names it).
	BootConflict BootState = "Conflict"
	// BootFailed: staging failed, or a requested reboot did not happen.
	BootFailed BootState = "Failed"
)

// BootArgument is one kernel argument of a node's plan.
type BootArgument struct {
	// argument is key=value (or a bare key) as the kernel takes it.
	// +required
	// +kubebuilder:validation:MaxLength=256
	Argument string `json:"argument"`
	// why says what the argument isolates or changes.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Why string `json:"why,omitempty"`
	// present is true when the running kernel's command line holds it.
	// +optional
	Present bool `json:"present,omitempty"`
}

// BootStatus is a node's account of its boot parameters: the plan computed
// from its own CPUs, what the bootloader and the running kernel hold, and
// the boots the agent has seen.
type BootStatus struct {
	// state is NotNeeded, Planned, Staged, Booted, Unstaged, Unsupported,
	// Conflict or Failed.
	// +required
	State BootState `json:"state"`

	// backend is how the node's bootloader takes arguments (GRUB, BLS,
	// SystemdBoot) or the image-based system that gives them otherwise
	// (Ostree, Talos, Flatcar, Bottlerocket, UKI).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Backend string `json:"backend,omitempty"`

	// arguments is the plan: every argument this node needs, and whether
	// the running kernel holds it.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Arguments []BootArgument `json:"arguments,omitempty"`

	// message explains Unsupported, Conflict and Failed.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`

	// bootID is the running boot's id (/proc/sys/kernel/random/boot_id).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	BootID string `json:"bootID,omitempty"`

	// bootedAt is when the running kernel booted.
	// +optional
	BootedAt *metav1.Time `json:"bootedAt,omitempty"`

	// rebootedFor is the revision of the last managed reboot the agent
	// made (spec.reboot.revision); the agent never reboots twice for one.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	RebootedFor string `json:"rebootedFor,omitempty"`

	// appliedAfterBoot is the time from this boot to the profile first
	// Applied in it (after an unplanned reboot too).
	// +optional
	AppliedAfterBoot *metav1.Duration `json:"appliedAfterBoot,omitempty"`

	// kernelIsolated and kernelNohzFull are what the running kernel made
	// of the arguments (/sys/devices/system/cpu/isolated and nohz_full).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	KernelIsolated string `json:"kernelIsolated,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=256
	KernelNohzFull string `json:"kernelNohzFull,omitempty"`
}

// RebootRolloutStatus counts a profile's managed reboots for its current
// revision.
type RebootRolloutStatus struct {
	// revision is the revision these reboots are for. A pause holds for
	// it: a new revision (any change of the profile's tuning) resumes.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Revision string `json:"revision,omitempty"`
	// draining, rebooting and verifying count the nodes in each phase.
	Draining  int32 `json:"draining"`
	Rebooting int32 `json:"rebooting"`
	Verifying int32 `json:"verifying"`
	// rebooted counts the nodes rebooted for the current revision and
	// verified.
	Rebooted int32 `json:"rebooted"`
	// pending counts the nodes whose boot parameters still need a reboot.
	Pending int32 `json:"pending"`
	// paused is true when a drain or boot timeout paused the reboots.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// message says why the reboots are paused, or which node they wait
	// for.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}
