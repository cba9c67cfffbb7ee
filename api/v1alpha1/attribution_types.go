package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// OffenderClass is what a measured pod's task waited for while it was
// runnable: what ran on its CPU instead, or why nothing did.
// +kubebuilder:validation:Enum=SamePod;MeasuredPod;Pod;SystemService;KernelThread;Interrupt;Idle;SelfThrottling;Unattributed;Other
type OffenderClass string

// Offender classes. Only these are ever a label of a metric; offender
// names never are.
const (
	// OffenderSamePod: another task of the same pod held the CPU.
	OffenderSamePod OffenderClass = "SamePod"
	// OffenderMeasuredPod: a task of another measured pod.
	OffenderMeasuredPod OffenderClass = "MeasuredPod"
	// OffenderPod: a task of another pod (named namespace/name, or its
	// cgroup path when the pod is not in the node's pod list).
	OffenderPod OffenderClass = "Pod"
	// OffenderSystemService: a task outside every pod (named by its path
	// in the cpu controller, e.g. system.slice/cron.service).
	OffenderSystemService OffenderClass = "SystemService"
	// OffenderKernelThread: a kernel thread (named by its comm).
	OffenderKernelThread OffenderClass = "KernelThread"
	// OffenderInterrupt: interrupt work in a thread of its own (ksoftirqd,
	// threaded IRQ handlers; named by comm). IRQs served in another task's
	// context count to that task without CONFIG_IRQ_TIME_ACCOUNTING.
	OffenderInterrupt OffenderClass = "Interrupt"
	// OffenderIdle: the CPU was idle; the wait is wake-up and idle-exit
	// latency (power.maxIdleExitLatency limits it).
	OffenderIdle OffenderClass = "Idle"
	// OffenderSelfThrottling: wait that began while the pod's own CFS quota
	// was exhausted (not a neighbour: cpuQuota removes it).
	OffenderSelfThrottling OffenderClass = "SelfThrottling"
	// OffenderUnattributed: wait the tracer could not split (longer than
	// its per-CPU history, or queued first on another CPU).
	OffenderUnattributed OffenderClass = "Unattributed"
	// OffenderOther: offenders beyond the first five and what the bounded
	// maps could not tell apart.
	OffenderOther OffenderClass = "Other"
)

// IsNeighbour reports whether the class is someone else's load on the
// pod's CPU, as opposed to the pod itself, the CPU's idle exit or what is
// unknown.
func (c OffenderClass) IsNeighbour() bool {
	switch c {
	case OffenderMeasuredPod, OffenderPod, OffenderSystemService, OffenderKernelThread, OffenderInterrupt:
		return true
	}
	return false
}

// Offender is one share of a measured pod's run-queue wait.
type Offender struct {
	// class of what the pod waited for.
	// +required
	Class OffenderClass `json:"class"`
	// name of the offender: namespace/name of a pod, a cgroup path of a
	// system service, a kernel thread's comm; empty for Idle,
	// SelfThrottling, Unattributed and Other. Escaped: tenants name cgroups and threads.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// sharePercent of the pod's wait over the window, rounded to 5.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	SharePercent int32 `json:"sharePercent"`
}

// PodWait says who made a measured pod wait in the run queue over the
// last window.
type PodWait struct {
	// namespace of the pod.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name of the pod.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// waitPerSecond is the pod's run-queue wait per second of the window
	// (summed over its tasks), rounded to two significant digits.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	WaitPerSecond *metav1.Duration `json:"waitPerSecond,omitempty"`
	// offenders are the largest shares of that wait, largest first.
	// +optional
	// +kubebuilder:validation:MaxItems=5
	Offenders []Offender `json:"offenders,omitempty"`
}

// NeighbourWait sums, over a window, the measured pods' run-queue wait
// charged to neighbours (OffenderClass.IsNeighbour): the rollout judge
// tells a neighbour's load from the profile's effect with it.
type NeighbourWait struct {
	// perSecond is the neighbours' share of the measured pods' wait, per
	// second of the window.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	PerSecond *metav1.Duration `json:"perSecond,omitempty"`
	// sharePercent of the measured pods' wait that neighbours took.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	SharePercent int32 `json:"sharePercent,omitempty"`
	// top is the largest neighbour ("Pod batch/nightly-tar").
	// +optional
	// +kubebuilder:validation:MaxLength=300
	Top string `json:"top,omitempty"`
}
