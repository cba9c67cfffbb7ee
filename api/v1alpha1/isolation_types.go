package v1alpha1

// CPUPartition is how the agent isolates a granted pod's exclusive CPUs at
// run time: as a cgroup v2 cpuset partition of the pod's container (Linux
// 6.7+, cpuset.cpus.exclusive), or not at all.
// +kubebuilder:validation:Enum=None;Isolated;Root
type CPUPartition string

const (
	// CPUPartitionNone makes no partition: the isolated CPUs are only
	// kept free of system services and movable IRQs; the scheduler still
	// load-balances across them and unbound kernel work may land there.
	CPUPartitionNone CPUPartition = "None"
	// CPUPartitionIsolated makes each container's exclusive CPUs an
	// isolated partition: out of every scheduler domain (no load
	// balancing, as isolcpus=domain does at boot) and, from 6.8, out of
	// the unbound workqueues. Nothing moves a thread between the
	// container's CPUs, so a container with more threads than CPUs, or
	// threads that are not each pinned to a CPU, piles them on the CPU
	// they started on: use it for one busy thread per CPU (DPDK-style
	// pollers) or pinned threads.
	CPUPartitionIsolated CPUPartition = "Isolated"
	// CPUPartitionRoot makes each container's exclusive CPUs a partition
	// of their own that is load-balanced only among themselves: other
	// cgroups lose the CPUs, the container's threads still spread over
	// them. Use it for multi-threaded pods that do not pin threads.
	CPUPartitionRoot CPUPartition = "Root"
)

// IsolationMechanism is the state of one way the agent isolates CPUs on a
// node.
// +kubebuilder:validation:Enum=Live;Waiting;Off;Unsupported;Failed
type IsolationMechanism string

const (
	// IsolationLive: the mechanism holds on this node now.
	IsolationLive IsolationMechanism = "Live"
	// IsolationWaiting: asked for and supported, but there is nothing to
	// apply it to yet (partitions: no granted pod holds exclusive CPUs
	// within the isolated CPUs).
	IsolationWaiting IsolationMechanism = "Waiting"
	// IsolationOff: the profile does not ask for it.
	IsolationOff IsolationMechanism = "Off"
	// IsolationUnsupported: the node lacks the kernel interface (the
	// message says which).
	IsolationUnsupported IsolationMechanism = "Unsupported"
	// IsolationFailed: asked for, but a setting of it is not applied.
	IsolationFailed IsolationMechanism = "Failed"
)

// BootIsolationGoal is a kind of CPU isolation only the kernel command line
// gives, on every kernel so far.
// +kubebuilder:validation:Enum=Tick;RCUCallbacks;ManagedIRQs
type BootIsolationGoal string

const (
	// BootGoalTick: the scheduler tick on a CPU running one task
	// (nohz_full=).
	BootGoalTick BootIsolationGoal = "Tick"
	// BootGoalRCUCallbacks: RCU callbacks offloaded to housekeeping CPUs
	// (rcu_nocbs=).
	BootGoalRCUCallbacks BootIsolationGoal = "RCUCallbacks"
	// BootGoalManagedIRQs: managed (per-queue) device interrupts kept off
	// the CPUs (isolcpus=managed_irq).
	BootGoalManagedIRQs BootIsolationGoal = "ManagedIRQs"
)

// IsolationStatus is a node's account of its isolated CPUs: what is
// isolated live, without a reboot, and which goals still need boot
// parameters.
type IsolationStatus struct {
	// partitions is the cpuset partition of granted pods' CPUs
	// (cpus.partition).
	// +optional
	Partitions IsolationMechanism `json:"partitions,omitempty"`
	// confinement is system.slice, user.slice and init.scope kept on the
	// reserved CPUs.
	// +optional
	Confinement IsolationMechanism `json:"confinement,omitempty"`
	// irqSteering is movable IRQs steered to the reserved CPUs.
	// +optional
	IRQSteering IsolationMechanism `json:"irqSteering,omitempty"`
	// needsBoot lists the goals the kernel command line does not give yet
	// (a missing nohz_full, rcu_nocbs or isolcpus=managed_irq for the
	// isolated CPUs).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=3
	NeedsBoot []BootIsolationGoal `json:"needsBoot,omitempty"`
	// message explains an Unsupported or Failed mechanism.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
}
