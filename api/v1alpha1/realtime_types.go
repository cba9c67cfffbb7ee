package v1alpha1

// SchedPolicyAnnotation on a Pod asks for a real-time scheduling policy for
// every thread of its containers: "fifo:<priority>" or "rr:<priority>",
// priority 1-99 (e.g. "fifo:40"). The profile's realtime field grants it
// per namespace; the annotation alone changes nothing.
const SchedPolicyAnnotation = "latencytier.io/sched-policy"

// RealtimePolicy is a real-time scheduling class a profile may grant.
// +kubebuilder:validation:Enum=FIFO;RR
type RealtimePolicy string

const (
	// RealtimeFIFO is SCHED_FIFO: fixed priority, runs until it blocks,
	// yields or a higher priority task wakes.
	RealtimeFIFO RealtimePolicy = "FIFO"
	// RealtimeRR is SCHED_RR: SCHED_FIFO with a time slice among tasks of
	// equal priority (kernel.sched_rr_timeslice_ms).
	RealtimeRR RealtimePolicy = "RR"
)

// RealtimeSpec grants real-time scheduling (SCHED_FIFO, SCHED_RR) to pods
// that ask for it with the annotation latencytier.io/sched-policy
// ("fifo:40", "rr:10"). A pod asks; the cluster admin grants, per namespace
// (namespaceSelector), which policies (policies) and up to which priority
// (maxPriority, priorityCeiling). The profile must isolate CPUs
// (cpus.isolated), and a pod is granted only while every CPU each of its
// threads may run on (its cpuset and affinity) is isolated: a real-time
// thread on a shared CPU starves kubelet and the IRQ threads there. The
// agent sets the policy on every thread of the pod's containers, picks up
// new threads on its next pass, and restores SCHED_OTHER and each thread's
// nice value on revert. Whatever the pod owner controls (the annotation,
// thread count, its cgroups) can only get the pod Refused, never the node
// degraded.
// +kubebuilder:validation:XValidation:rule="!has(self.maxPriority) || self.maxPriority <= 49 || (has(self.priorityCeiling) && self.priorityCeiling == 'AboveIRQThreads')",message="realtime.maxPriority above 49 reaches the kernel's threaded IRQ handlers (priority 50): set realtime.priorityCeiling AboveIRQThreads to allow it"
// +kubebuilder:validation:XValidation:rule="has(self.namespaceSelector)",message="realtime.namespaceSelector is required: it names the namespaces whose pods may run real-time threads ({} admits every namespace)"
type RealtimeSpec struct {
	// namespaceSelector is the cluster admin's grant: only pods in
	// namespaces whose labels match it get a real-time policy when they ask.
	// A pod asking from any other namespace is reported Refused (setting
	// result and an event on the pod) and left as it is. Required; {}
	// admits every namespace.
	// +optional
	NamespaceSelector *NamespaceSelector `json:"namespaceSelector,omitempty"`

	// policies are the real-time policies pods may ask for: FIFO, RR or
	// both (the default).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:default={FIFO,RR}
	Policies []RealtimePolicy `json:"policies,omitempty"`

	// maxPriority is the highest real-time priority a pod may ask for; a
	// pod asking for more is refused, not clamped. Default 40, at most 49:
	// below the kernel's threaded IRQ handlers (priority 50) and its own
	// per-CPU threads (migration, watchdog at 99), which a spinning pod must
	// not starve. 50-99 only with priorityCeiling AboveIRQThreads.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	// +kubebuilder:default=40
	MaxPriority int32 `json:"maxPriority,omitempty"`

	// priorityCeiling is the cluster admin's explicit choice of how high
	// maxPriority may go: BelowIRQThreads (the default, maxPriority at most
	// 49) or AboveIRQThreads (up to 99: a granted pod may then preempt the
	// threaded IRQ handlers of the CPUs it runs on, which are isolated).
	// +optional
	// +kubebuilder:default=BelowIRQThreads
	PriorityCeiling RealtimeCeiling `json:"priorityCeiling,omitempty"`
}

// RealtimeCeiling bounds realtime.maxPriority.
// +kubebuilder:validation:Enum=BelowIRQThreads;AboveIRQThreads
type RealtimeCeiling string

const (
	// CeilingBelowIRQThreads keeps granted priorities below the kernel's
	// threaded IRQ handlers: maxPriority at most MaxPriorityBelowIRQThreads.
	CeilingBelowIRQThreads RealtimeCeiling = "BelowIRQThreads"
	// CeilingAboveIRQThreads lets maxPriority go up to 99.
	CeilingAboveIRQThreads RealtimeCeiling = "AboveIRQThreads"
)

// Real-time priority bounds (the CEL rules above spell the same numbers).
const (
	// DefaultMaxPriority is realtime.maxPriority's default.
	DefaultMaxPriority = 40
	// MaxPriorityBelowIRQThreads is the highest maxPriority without
	// priorityCeiling AboveIRQThreads: the kernel runs threaded IRQ
	// handlers at 50.
	MaxPriorityBelowIRQThreads = 49
)
