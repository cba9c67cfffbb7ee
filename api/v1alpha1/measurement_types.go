package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What an agent measured and found on its node, reported in its
// LatencyNode status (latency, throttling, findings).

// LatencyBucket is one histogram bucket: count samples at or below le.
type LatencyBucket struct {
	// le is the bucket's upper bound.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	Le metav1.Duration `json:"le"`
	// count is the number of samples in the bucket.
	// +required
	Count int64 `json:"count"`
}

// ClassLatency is the run-queue latency of one CPU class.
type ClassLatency struct {
	// class is Node (every CPU), Isolated or Reserved.
	// +required
	// +kubebuilder:validation:Enum=Node;Isolated;Reserved
	Class string `json:"class"`
	// samples is the number of wakeups measured.
	// +optional
	Samples int64 `json:"samples,omitempty"`
	// p50 is the median run-queue latency.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	P50 *metav1.Duration `json:"p50,omitempty"`
	// p99 is the 99th percentile.
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
	// buckets is a compact histogram (non-empty buckets only, at most 64).
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Buckets []LatencyBucket `json:"buckets,omitempty"`
}

// LatencyStatus is the measured run-queue latency of the node.
type LatencyStatus struct {
	// source is EBPF or Schedstat: which produced these numbers.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Source string `json:"source,omitempty"`
	// window is how long the measurement ran.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	Window *metav1.Duration `json:"window,omitempty"`
	// measuredAt is when the window ended.
	// +optional
	MeasuredAt *metav1.Time `json:"measuredAt,omitempty"`
	// classes holds the numbers per CPU class.
	// +optional
	// +listType=map
	// +listMapKey=class
	// +kubebuilder:validation:MaxItems=3
	Classes []ClassLatency `json:"classes,omitempty"`
	// psiCPUSomeAvg10 is /proc/pressure/cpu "some avg10" (percent).
	// +optional
	// +kubebuilder:validation:MaxLength=16
	PSICPUSomeAvg10 string `json:"psiCPUSomeAvg10,omitempty"`
	// pods says, per measured pod, what it waited for in the run queue
	// (eBPF only): at most 16 pods, the longest waits first.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	Pods []PodWait `json:"pods,omitempty"`
}

// PodThrottling is one pod's CFS throttling over the last interval.
type PodThrottling struct {
	// namespace of the pod.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name of the pod.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// optedIn says the pod's quota is removed (it asked, its namespace is
	// granted, policy Remove): any throttling means the removal failed.
	// +optional
	OptedIn bool `json:"optedIn,omitempty"`
	// burst says the pod is granted a CFS burst over its quota (policy
	// Burst): it keeps its limit and may still be throttled.
	// +optional
	Burst bool `json:"burst,omitempty"`
	// periods is nr_periods over the interval.
	// +optional
	Periods int64 `json:"periods,omitempty"`
	// throttled is nr_throttled over the interval.
	// +optional
	Throttled int64 `json:"throttled,omitempty"`
	// ratio is throttled/periods as a decimal.
	// +optional
	// +kubebuilder:validation:MaxLength=12
	Ratio string `json:"ratio,omitempty"`
	// throttledTime is the time the pod spent throttled over the interval.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	ThrottledTime *metav1.Duration `json:"throttledTime,omitempty"`
	// bursts is nr_bursts over the interval: periods in which the pod ran
	// beyond its quota on its burst (Linux 5.14+).
	// +optional
	Bursts int64 `json:"bursts,omitempty"`
	// burstTime is the time the pod ran beyond its quota on its burst over
	// the interval (cpu.stat burst_usec, v1 burst_time).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+$`
	BurstTime *metav1.Duration `json:"burstTime,omitempty"`
}

// Finding is a diagnostic: a condition of the host known to add scheduling
// latency (autogroup on, IRQs on isolated CPUs, real-time tasks throttled,
// ...) that the agent found, with what to do about it.
type Finding struct {
	// type names the check (AutogroupEnabled, IRQsOnIsolatedCPUs, ...).
	// +required
	// +kubebuilder:validation:MaxLength=64
	Type string `json:"type"`
	// severity is Info, Warning or Critical.
	// +required
	// +kubebuilder:validation:Enum=Info;Warning;Critical
	Severity string `json:"severity"`
	// message says what was found and what fixes it, with evidence.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message"`
}
