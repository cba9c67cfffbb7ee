package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PowerSpec limits idle states and picks a frequency governor per CPU class:
// either all (every online CPU) or reserved and isolated separately. A CPU
// waking from a deep idle state adds its exit latency (tens to hundreds of
// microseconds on server C-states) to every wakeup, before the scheduler
// runs anything.
// +kubebuilder:validation:XValidation:rule="!has(self.all) || (!has(self.reserved) && !has(self.isolated))",message="power.all excludes power.reserved and power.isolated: set either every CPU at once or each class"
type PowerSpec struct {
	// all applies to every online CPU. Use it when no CPUs are isolated;
	// excludes reserved and isolated.
	// +optional
	All *CPUPower `json:"all,omitempty"`

	// reserved applies to the CPUs of cpus.reserved (housekeeping), which it
	// needs.
	// +optional
	Reserved *CPUPower `json:"reserved,omitempty"`

	// isolated applies to the CPUs of cpus.isolated (latency-critical pods),
	// which it needs.
	// +optional
	Isolated *CPUPower `json:"isolated,omitempty"`
}

// CPUGovernor is a cpufreq scaling governor. userspace is left out on
// purpose: it hands the frequency to a daemon, it is not a latency setting.
// +kubebuilder:validation:Enum=performance;powersave;schedutil;ondemand;conservative
type CPUGovernor string

const (
	// GovernorPerformance runs at the highest frequency the policy allows.
	GovernorPerformance CPUGovernor = "performance"
	// GovernorPowersave runs at the lowest frequency (intel_pstate: its own
	// dynamic scaling).
	GovernorPowersave CPUGovernor = "powersave"
	// GovernorSchedutil follows the scheduler's utilisation signal.
	GovernorSchedutil CPUGovernor = "schedutil"
	// GovernorOndemand samples load and jumps to the top frequency.
	GovernorOndemand CPUGovernor = "ondemand"
	// GovernorConservative samples load and steps gradually.
	GovernorConservative CPUGovernor = "conservative"
)

// CPUPower is the idle and frequency setting of one class of CPUs. At least
// one field is set; an unset field leaves the CPUs as the node has them.
// +kubebuilder:validation:XValidation:rule="has(self.maxIdleExitLatency) || has(self.governor)",message="set maxIdleExitLatency, governor or both"
type CPUPower struct {
	// maxIdleExitLatency is the longest exit latency an idle state of these
	// CPUs may have, from 0 to 10ms in whole microseconds (the kernel's
	// unit; a fraction is rounded down, which only makes the limit
	// stricter). 0us allows no idle state but polling: the CPUs spin when
	// idle, which wakes fastest and burns a core's power each. 10us allows
	// shallow states only. The agent writes it to each CPU's PM QoS
	// resume-latency limit (power/pm_qos_resume_latency_us, where 0us is
	// written as "n/a": the kernel reads a plain 0 as "no limit") and
	// disables the cpuidle states whose exit latency exceeds it: the menu,
	// teo and ladder governors honour both, idle injection only the disable
	// files, the haltpoll governor only a limit of 0. A node without the PM
	// QoS file reports the setting Unsupported.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('10ms')",message="maxIdleExitLatency must be at most 10ms"
	// +kubebuilder:validation:XValidation:rule="duration(self) == duration('0s') || duration(self) >= duration('1us')",message="maxIdleExitLatency must be 0us or at least 1us: the kernel counts whole microseconds"
	MaxIdleExitLatency *metav1.Duration `json:"maxIdleExitLatency,omitempty"`

	// governor is the cpufreq scaling governor of these CPUs
	// (cpuN/cpufreq/scaling_governor). CPUs that share a cpufreq policy
	// share one governor. Reported Unsupported where the node has no cpufreq
	// (most VMs) or its driver does not offer the governor.
	// +optional
	Governor *CPUGovernor `json:"governor,omitempty"`
}
