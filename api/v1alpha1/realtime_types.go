package v1alpha1

// SchedPolicyAnnotation on a Pod asks for a real-time scheduling policy for
// every thread of its containers: "fifo:<priority>" or "rr:<priority>",
// priority 1-99 (e.g. "fifo:50"). The profile's realtime field grants it
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
// ("fifo:50", "rr:10"). A pod asks; the cluster admin grants, per namespace
// (namespaceSelector), which policies (policies) and up to which priority
// (maxPriority). The agent sets the policy on every thread of the pod's
// containers, picks up new threads on its next pass, and restores
// SCHED_OTHER and each thread's nice value on revert.
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

	// maxPriority is the highest real-time priority (1-99) a pod may ask
	// for; a pod asking for more is refused, not clamped. Default 50: below
	// the kernel's own per-CPU threads (migration, watchdog at 99) and the
	// threaded IRQ handlers (50) a spinning pod must not starve.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=99
	// +kubebuilder:default=50
	MaxPriority int32 `json:"maxPriority,omitempty"`
}
