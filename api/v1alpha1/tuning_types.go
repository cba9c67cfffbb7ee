package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Toggle switches a kernel feature on or off.
// +kubebuilder:validation:Enum=Enabled;Disabled
type Toggle string

const (
	// Enabled turns the feature on.
	Enabled Toggle = "Enabled"
	// Disabled turns the feature off.
	Disabled Toggle = "Disabled"
)

// TuningSpec is the node tuning a LatencyProfile asks for. The controller
// copies it, resolved, into each selected node's LatencyNode spec; the agent
// maps every field to whatever the running kernel offers.
// +kubebuilder:validation:XValidation:rule="!has(self.irq) || self.irq.affinity != 'Reserved' || (has(self.cpus) && has(self.cpus.reserved))",message="irq.affinity Reserved needs cpus.reserved: IRQs are steered to the reserved (housekeeping) CPUs"
// +kubebuilder:validation:XValidation:rule="!has(self.power) || !has(self.power.reserved) || (has(self.cpus) && has(self.cpus.reserved))",message="power.reserved needs cpus.reserved: it applies to the reserved (housekeeping) CPUs"
// +kubebuilder:validation:XValidation:rule="!has(self.power) || !has(self.power.isolated) || (has(self.cpus) && has(self.cpus.isolated))",message="power.isolated needs cpus.isolated: it applies to the isolated CPUs"
// +kubebuilder:validation:XValidation:rule="!has(self.scheduler) || !has(self.scheduler.rtRuntime) || self.scheduler.rtRuntime != 'Unlimited' || (has(self.cpus) && has(self.cpus.isolated))",fieldPath=".scheduler.rtRuntime",message="scheduler.rtRuntime Unlimited turns RT throttling off and needs cpus.isolated: without it a spinning real-time thread starves every other task on its CPU, kubelet and the IRQ threads included"
// +kubebuilder:validation:XValidation:rule="!has(self.realtime) || (has(self.cpus) && has(self.cpus.isolated))",message="realtime needs cpus.isolated: a real-time pod is granted its policy only when all its CPUs are isolated, so it cannot starve kubelet and the IRQ threads on shared CPUs"
// +kubebuilder:validation:XValidation:rule="!has(self.bootParameters) || (has(self.cpus) && has(self.cpus.isolated)) || has(self.bootParameters.skewTick) || has(self.bootParameters.maxCState)",message="bootParameters needs cpus.isolated or an extra (skewTick, maxCState): the arguments are derived from the isolated CPUs, so there would be nothing to stage"
type TuningSpec struct {
	// scheduler sets the kernel scheduler knobs (autogroup, NUMA balancing,
	// migration cost, time slices, RT throttling). Each is mapped to the
	// running kernel: /proc/sys/kernel/sched_* up to 5.12, debugfs
	// /sys/kernel/debug/sched/* from 5.13, base_slice_ns on EEVDF (6.6+).
	// Knobs the kernel lacks are reported Unsupported, never failed.
	// +optional
	Scheduler *SchedulerSpec `json:"scheduler,omitempty"`

	// sysctls are extra kernel parameters the typed fields do not cover, as
	// dotted names (net.core.busy_poll), from the built-in allowlist of
	// latency sysctls; any other name only when the cluster admin unlocks
	// it (ConfigMap latencytier-sysctls, key allowedSysctls). Knobs with a
	// typed field in scheduler are refused here so that one knob has one
	// place, and so are, whatever the admin unlocks, sysctls that make the
	// kernel run a program (kernel.core_pattern, kernel.modprobe), cannot be
	// undone (kernel.modules_disabled), live in the IPC or PID namespace
	// (kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*, kernel.pid_max,
	// vm.memfd_noexec), are not tuning, or are the RT period
	// (kernel.sched_rt_period_us): docs/knobs.md lists them all with the
	// reason.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Sysctls []Sysctl `json:"sysctls,omitempty"`

	// cpus splits the node's CPUs into reserved (housekeeping: system
	// services, IRQs) and isolated (latency-critical pods).
	// +optional
	CPUs *CPUSpec `json:"cpus,omitempty"`

	// irq steers hardware interrupts away from the isolated CPUs.
	// +optional
	IRQ *IRQSpec `json:"irq,omitempty"`

	// cpuQuota removes CFS bandwidth limits (the cause of throttling stalls)
	// from pods that opt in.
	// +optional
	CPUQuota *CPUQuotaSpec `json:"cpuQuota,omitempty"`

	// realtime grants SCHED_FIFO/SCHED_RR to pods that ask for it.
	// +optional
	Realtime *RealtimeSpec `json:"realtime,omitempty"`

	// measurement configures how the agent measures run-queue latency and
	// throttling on the node.
	// +optional
	Measurement *MeasurementSpec `json:"measurement,omitempty"`

	// power limits idle states and sets the cpufreq governor per CPU class.
	// +optional
	Power *PowerSpec `json:"power,omitempty"`

	// latencyBudget is what the node must deliver; a node outside it is
	// reported (condition WithinBudget=False), not hidden.
	// +optional
	LatencyBudget *LatencyBudget `json:"latencyBudget,omitempty"`

	// bootParameters asks for the kernel arguments only the command line
	// gives (the tick, RCU callbacks, managed IRQs), derived per node from
	// cpus, reported as a plan and, with policy Reboot, staged through the
	// node's bootloader and rebooted into (docs/boot-parameters.md).
	// +optional
	BootParameters *BootParametersSpec `json:"bootParameters,omitempty"`
}

// The bounds of spec.scheduler.rtRuntime (a share of the kernel's default
// 1s sched_rt_period_us), for the CRD's CEL (checked by a test) and the
// agent alike. RTRuntimeMin keeps real-time threads, IRQ threads included,
// running a tenth of every second; RTRuntimeMax leaves every other task
// at least 10ms of each second on every CPU. RTRuntimeUnit is the kernel
// file's unit: a value must be a whole number of it.
const (
	RTRuntimeMin  = 100 * time.Millisecond
	RTRuntimeMax  = 990 * time.Millisecond
	RTRuntimeUnit = time.Microsecond
	// RTRuntimeUnlimited is the spelling of -1: no RT throttling.
	RTRuntimeUnlimited = "Unlimited"
)

// SchedulerSpec holds the typed scheduler intent. Durations use Go syntax
// (500us, 5ms, 1.5s). Unset fields are left as the node has them.
type SchedulerSpec struct {
	// autogroup sets kernel.sched_autogroup_enabled. With autogroup the
	// scheduler shares CPU time between sessions first and between their
	// threads second, so a one-thread background job started in its own
	// session (cron, ssh) gets as much as a many-threaded server's hundred
	// threads together. Disabled shares it between threads again.
	// +optional
	Autogroup *Toggle `json:"autogroup,omitempty"`

	// numaBalancing sets kernel.numa_balancing. Disabled stops the kernel
	// migrating pages and tasks between NUMA nodes under a latency-critical
	// workload.
	// +optional
	NumaBalancing *Toggle `json:"numaBalancing,omitempty"`

	// migrationCost sets sched_migration_cost_ns: how long a task stays
	// cache-hot, so the scheduler migrates it less. 5ms suits gateways: their
	// many short bursts of work, woken by network events, then stay on the
	// CPU whose cache holds their data. Between 0 and 1s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('1s')",message="migrationCost must be at most 1s"
	MigrationCost *metav1.Duration `json:"migrationCost,omitempty"`

	// baseSlice sets the minimum time slice: base_slice_ns on EEVDF kernels
	// (6.6+), sched_min_granularity_ns on CFS kernels. Between 100us and 100ms.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100us') && duration(self) <= duration('100ms')",message="baseSlice must be between 100us and 100ms"
	BaseSlice *metav1.Duration `json:"baseSlice,omitempty"`

	// latency sets sched_latency_ns, the CFS target period. CFS kernels only
	// (before 6.6); reported Unsupported on EEVDF. Between 1ms and 1s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1ms') && duration(self) <= duration('1s')",message="latency must be between 1ms and 1s"
	Latency *metav1.Duration `json:"latency,omitempty"`

	// wakeupGranularity sets sched_wakeup_granularity_ns: how much more a
	// waking task must deserve before it preempts the running one. CFS
	// kernels only; reported Unsupported on EEVDF. Between 0 and 1s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('1s')",message="wakeupGranularity must be at most 1s"
	WakeupGranularity *metav1.Duration `json:"wakeupGranularity,omitempty"`

	// rtRuntime sets kernel.sched_rt_runtime_us, the share of each 1s period
	// real-time tasks may use: "Unlimited" (-1), accepted only with
	// cpus.isolated, or a duration from 100ms to 990ms in whole
	// microseconds (the kernel default is 950ms). The floor keeps real-time
	// threads, the IRQ threads among them, running at least a tenth of
	// every second (0 freezes them all); the ceiling leaves every other
	// task at least 10ms of each second on every CPU (999999us would leave
	// it 1us). A spelling finer than a microsecond (999ns, 1.5us) would be
	// cut by the kernel's unit and is refused. The agent checks the same
	// bounds (RTRuntimeMin, RTRuntimeMax) and again against the node's own
	// kernel.sched_rt_period_us: a runtime at or above a lowered period is
	// Invalid on that node without cpus.isolated, and not written.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^(Unlimited|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s))+)$`
	// +kubebuilder:validation:XValidation:rule="self == 'Unlimited' || (duration(self) >= duration('100ms') && duration(self) <= duration('990ms'))",message="rtRuntime must be Unlimited or a duration from 100ms to 990ms of the 1s RT period: below, real-time threads (IRQ threads included) stall most of every second; above, the rest of the node is left almost nothing"
	// +kubebuilder:validation:XValidation:rule="self == 'Unlimited' || int(duration(self)) % 1000 == 0",message="rtRuntime must be a whole number of microseconds (sched_rt_runtime_us): a finer spelling such as 999ns or 1.5us would be cut by the kernel"
	RTRuntime *string `json:"rtRuntime,omitempty"`

	// class is the scheduling class the node's normal tasks run in
	// (setting scheduler/class). Unset leaves the node's class alone.
	// Fair is the kernel's own fair class (CFS or EEVDF): the agent
	// unloads the scheduler it loaded, never one someone else loaded.
	// Tier is experimental: the agent loads latencytier's own sched_ext
	// scheduler, which runs the threads of the profile's granted pods
	// first with a short slice and everything else fairly. It is accepted
	// only while the manager runs with --feature-gates=TierScheduler=true;
	// otherwise the profile is refused (condition SchedulerClassAccepted
	// False, reason FeatureGateDisabled) and no node is given the class.
	// A node whose kernel ejects the scheduler reports the setting
	// Fallback and counts as failed in a rollout. docs/sched_ext.md.
	// +optional
	Class *SchedulerClass `json:"class,omitempty"`
}

// SchedulerClass is a scheduling class a profile may ask for.
// +kubebuilder:validation:Enum=Fair;Tier
type SchedulerClass string

const (
	// SchedulerClassFair is the kernel's fair class (CFS or EEVDF).
	SchedulerClassFair SchedulerClass = "Fair"
	// SchedulerClassTier is latencytier's own sched_ext scheduler
	// (experimental, behind the manager's TierScheduler feature gate).
	SchedulerClassTier SchedulerClass = "Tier"
)

// ReportedClass is how a node reports c in its evidence and kernel facts
// (status.kernel, LatencyEvidence.schedulerClass) once it holds: "fair",
// or "ext:" and the sched_ext ops name of latencytier's scheduler. The
// agent's agent/tiersched holds it to its scheduler's ops name in a test.
func (c SchedulerClass) ReportedClass() string {
	switch c {
	case SchedulerClassFair:
		return "fair"
	case SchedulerClassTier:
		return "ext:latencytier"
	}
	return ""
}

// Sysctl is one extra kernel parameter. The name must be on latencytier's
// built-in allowlist of latency sysctls or unlocked by the cluster admin
// (ConfigMap latencytier-sysctls, checked by the admission policy
// latencytier-sysctl-allowlist and again by the agent). Refused whatever the
// admin unlocks, each with its reason: a sysctl a typed scheduler field
// owns, one that makes the kernel run a program as root, cannot be set back
// until reboot, lives in the IPC or PID namespace, is node identity,
// triggers an action, or is the RT period; a value with a newline or NUL;
// and a value of an allowlisted sysctl outside its type and bounds (the
// catalogue's, internal/knobs). docs/knobs.md lists them; the agent refuses
// them again.
// +kubebuilder:validation:XValidation:rule=`!(self.name in ['kernel.sched_autogroup_enabled', 'kernel.numa_balancing', 'kernel.sched_migration_cost_ns', 'kernel.sched_min_granularity_ns', 'kernel.sched_latency_ns', 'kernel.sched_wakeup_granularity_ns', 'kernel.sched_rt_runtime_us'])`,messageExpression=`'sysctl ' + self.name + ' duplicates a typed field of spec.scheduler (' + {'kernel.sched_autogroup_enabled': 'autogroup', 'kernel.numa_balancing': 'numaBalancing', 'kernel.sched_migration_cost_ns': 'migrationCost', 'kernel.sched_min_granularity_ns': 'baseSlice', 'kernel.sched_latency_ns': 'latency', 'kernel.sched_wakeup_granularity_ns': 'wakeupGranularity', 'kernel.sched_rt_runtime_us': 'rtRuntime'}[self.name] + '); set it there'`
// +kubebuilder:validation:XValidation:rule=`!(self.name in ['kernel.core_pattern', 'kernel.hotplug', 'kernel.modprobe', 'kernel.poweroff_cmd'] || ['fs.binfmt_misc.'].exists(p, self.name.startsWith(p)))`,messageExpression=`'sysctl ' + self.name + ' is refused: it makes the kernel run a program as root, so a profile could run code on every node it selects'`
// +kubebuilder:validation:XValidation:rule=`!(self.name in ['kernel.kexec_load_disabled', 'kernel.kexec_load_limit_panic', 'kernel.kexec_load_limit_reboot', 'kernel.modules_disabled', 'kernel.tainted', 'kernel.unprivileged_bpf_disabled', 'kernel.yama.ptrace_scope'] || ['kernel.usermodehelper.'].exists(p, self.name.startsWith(p)))`,messageExpression=`'sysctl ' + self.name + ' is refused: once changed it cannot be set back until reboot, so the agent could never revert it'`
// +kubebuilder:validation:XValidation:rule=`!(self.name in ['kernel.auto_msgmni', 'kernel.pid_max', 'vm.memfd_noexec'] || ['fs.mqueue.', 'kernel.msg', 'kernel.sem', 'kernel.shm'].exists(p, self.name.startsWith(p)))`,messageExpression=`'sysctl ' + self.name + ' is refused: it is per IPC or PID namespace and the agent shares neither with the host, so it would change only its own'`
// +kubebuilder:validation:XValidation:rule=`!(self.name in ['kernel.domainname', 'kernel.hostname', 'kernel.ns_last_pid'])`,messageExpression=`'sysctl ' + self.name + ' is refused: it is the identity or bookkeeping of the node (host name, domain name, last PID) that kubelet, the runtime and every fork rely on, not a tuning knob'`
// +kubebuilder:validation:XValidation:rule=`!(self.name in ['net.ipv4.route.flush', 'net.ipv6.route.flush', 'vm.compact_memory', 'vm.drop_caches', 'vm.stat_refresh'])`,messageExpression=`'sysctl ' + self.name + ' is refused: writing it triggers an action (drop caches, compact, flush), there is no setting to hold or revert'`
// +kubebuilder:validation:XValidation:rule=`!(self.name in ['kernel.sched_rt_period_us'])`,messageExpression=`'sysctl ' + self.name + ' is refused: it is the period the real-time runtime limit (spec.scheduler.rtRuntime) is a share of, and the RT period must not be changed'`
// +kubebuilder:validation:XValidation:rule=`!self.value.contains('\n') && !self.value.contains('\x00')`,messageExpression=`'sysctl ' + self.name + ' value holds a newline or NUL character: the kernel would take only the part before it'`
// +kubebuilder:validation:XValidation:rule=`self.name != 'kernel.sched_rr_timeslice_ms' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 1 && int(self.value) <= 1000)`,messageExpression=`'sysctl kernel.sched_rr_timeslice_ms value ' + self.value + ' is out of bounds: it must be an integer from 1 to 1000 (ms)'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'kernel.sched_cfs_bandwidth_slice_us' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 100 && int(self.value) <= 100000)`,messageExpression=`'sysctl kernel.sched_cfs_bandwidth_slice_us value ' + self.value + ' is out of bounds: it must be an integer from 100 to 100000 (µs)'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'kernel.sched_schedstats' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 0 && int(self.value) <= 1)`,messageExpression=`'sysctl kernel.sched_schedstats value ' + self.value + ' is out of bounds: it must be an integer from 0 to 1'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'kernel.timer_migration' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 0 && int(self.value) <= 1)`,messageExpression=`'sysctl kernel.timer_migration value ' + self.value + ' is out of bounds: it must be an integer from 0 to 1'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'kernel.nmi_watchdog' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 0 && int(self.value) <= 1)`,messageExpression=`'sysctl kernel.nmi_watchdog value ' + self.value + ' is out of bounds: it must be an integer from 0 to 1'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'kernel.watchdog' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 0 && int(self.value) <= 1)`,messageExpression=`'sysctl kernel.watchdog value ' + self.value + ' is out of bounds: it must be an integer from 0 to 1'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'kernel.watchdog_cpumask' || (self.value.matches('^[0-9]{1,4}(-[0-9]{1,4})?(,[0-9]{1,4}(-[0-9]{1,4})?)*$') && self.value.split(',').all(r, int(r.split('-')[0]) <= int(r.split('-')[r.split('-').size() - 1]) && int(r.split('-')[r.split('-').size() - 1]) <= 8191))`,messageExpression=`'sysctl kernel.watchdog_cpumask value ' + self.value + ' is out of bounds: it must be a cpulist of ascending ranges of CPUs 0 to 8191 (0,2-4)'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'kernel.hung_task_timeout_secs' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 0 && int(self.value) <= 86400)`,messageExpression=`'sysctl kernel.hung_task_timeout_secs value ' + self.value + ' is out of bounds: it must be an integer from 0 to 86400 (s)'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'vm.stat_interval' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 1 && int(self.value) <= 3600)`,messageExpression=`'sysctl vm.stat_interval value ' + self.value + ' is out of bounds: it must be an integer from 1 to 3600 (s)'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'vm.swappiness' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 0 && int(self.value) <= 200)`,messageExpression=`'sysctl vm.swappiness value ' + self.value + ' is out of bounds: it must be an integer from 0 to 200'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'vm.dirty_ratio' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 5 && int(self.value) <= 80)`,messageExpression=`'sysctl vm.dirty_ratio value ' + self.value + ' is out of bounds: it must be an integer from 5 to 80 (%)'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'vm.dirty_background_ratio' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 1 && int(self.value) <= 50)`,messageExpression=`'sysctl vm.dirty_background_ratio value ' + self.value + ' is out of bounds: it must be an integer from 1 to 50 (%)'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'vm.dirty_bytes' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 1048576 && int(self.value) <= 68719476736)`,messageExpression=`'sysctl vm.dirty_bytes value ' + self.value + ' is out of bounds: it must be an integer from 1048576 to 68719476736 (bytes)'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'vm.dirty_background_bytes' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 1048576 && int(self.value) <= 68719476736)`,messageExpression=`'sysctl vm.dirty_background_bytes value ' + self.value + ' is out of bounds: it must be an integer from 1048576 to 68719476736 (bytes)'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'vm.dirty_expire_centisecs' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 100 && int(self.value) <= 360000)`,messageExpression=`'sysctl vm.dirty_expire_centisecs value ' + self.value + ' is out of bounds: it must be an integer from 100 to 360000 (cs)'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'vm.dirty_writeback_centisecs' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 100 && int(self.value) <= 360000)`,messageExpression=`'sysctl vm.dirty_writeback_centisecs value ' + self.value + ' is out of bounds: it must be an integer from 100 to 360000 (cs)'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'vm.zone_reclaim_mode' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 0 && int(self.value) <= 7)`,messageExpression=`'sysctl vm.zone_reclaim_mode value ' + self.value + ' is out of bounds: it must be an integer from 0 to 7 (bitmask)'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'vm.compaction_proactiveness' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 0 && int(self.value) <= 100)`,messageExpression=`'sysctl vm.compaction_proactiveness value ' + self.value + ' is out of bounds: it must be an integer from 0 to 100'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'net.core.busy_poll' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 0 && int(self.value) <= 200)`,messageExpression=`'sysctl net.core.busy_poll value ' + self.value + ' is out of bounds: it must be an integer from 0 to 200 (µs)'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'net.core.busy_read' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 0 && int(self.value) <= 200)`,messageExpression=`'sysctl net.core.busy_read value ' + self.value + ' is out of bounds: it must be an integer from 0 to 200 (µs)'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'net.core.netdev_budget' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 50 && int(self.value) <= 3000)`,messageExpression=`'sysctl net.core.netdev_budget value ' + self.value + ' is out of bounds: it must be an integer from 50 to 3000 (packets)'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'net.core.netdev_budget_usecs' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 100 && int(self.value) <= 10000)`,messageExpression=`'sysctl net.core.netdev_budget_usecs value ' + self.value + ' is out of bounds: it must be an integer from 100 to 10000 (µs)'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'net.core.dev_weight' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 1 && int(self.value) <= 1024)`,messageExpression=`'sysctl net.core.dev_weight value ' + self.value + ' is out of bounds: it must be an integer from 1 to 1024 (packets)'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'net.core.netdev_max_backlog' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 64 && int(self.value) <= 65536)`,messageExpression=`'sysctl net.core.netdev_max_backlog value ' + self.value + ' is out of bounds: it must be an integer from 64 to 65536 (packets)'`,fieldPath=`.value`
// +kubebuilder:validation:XValidation:rule=`self.name != 'net.core.rps_sock_flow_entries' || (self.value.matches('^[0-9]{1,15}$') && int(self.value) >= 0 && int(self.value) <= 1048576)`,messageExpression=`'sysctl net.core.rps_sock_flow_entries value ' + self.value + ' is out of bounds: it must be an integer from 0 to 1048576 (entries)'`,fieldPath=`.value`
type Sysctl struct {
	// name is the dotted sysctl name, lowercase (vm.swappiness,
	// net.core.busy_poll). Slashes, "..", spaces and uppercase are refused.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-z0-9_]+(\.[a-z0-9_-]+)+$`
	Name string `json:"name"`

	// value is written as-is, on one line (no newline or NUL), at most 256
	// characters; the kernel's refusal is reported Invalid.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Value string `json:"value"`
}

// CPUSpec partitions the node's CPUs. Lists use kernel cpulist syntax
// ("0-1,4"), ascending ranges, no empty entries.
// +kubebuilder:validation:XValidation:rule="!has(self.isolated) || has(self.namespaceSelector)",message="cpus.namespaceSelector is required with cpus.isolated: it names the namespaces whose opted-in pods may run on the isolated CPUs ({} admits every namespace)"
// +kubebuilder:validation:XValidation:rule="!has(self.isolated) || has(self.reserved)",message="cpus.isolated needs cpus.reserved: system services must have somewhere to run"
// +kubebuilder:validation:XValidation:rule="!has(self.isolated) || !has(self.reserved) || self.reserved.split(',').all(a, self.isolated.split(',').all(b, int(a.split('-')[0]) > int(b.split('-')[b.split('-').size() - 1]) || int(b.split('-')[0]) > int(a.split('-')[a.split('-').size() - 1])))",message="cpus.reserved and cpus.isolated must not overlap"
// +kubebuilder:validation:XValidation:rule="!has(self.partition) || self.partition == 'None' || has(self.isolated)",message="cpus.partition Isolated or Root needs cpus.isolated: partitions are made only of granted pods' exclusive CPUs within the isolated CPUs"
// +kubebuilder:validation:XValidation:rule="!has(self.isolated) || !has(self.reserved) || self.reserved.split(',').map(r, int(r.split('-')[r.split('-').size() - 1]) - int(r.split('-')[0]) + 1).sum() * 16 >= self.isolated.split(',').map(r, int(r.split('-')[r.split('-').size() - 1]) - int(r.split('-')[0]) + 1).sum()",fieldPath=".reserved",message="cpus.reserved is too small for cpus.isolated: it needs at least one housekeeping CPU for every 16 isolated ones (rounded up), since it carries kubelet, the runtime, every movable IRQ and the isolated CPUs' RCU callbacks"
// +kubebuilder:validation:XValidation:rule="!has(self.isolated) || (has(self.cpu0) && self.cpu0 == 'Isolatable') || !self.isolated.split(',').exists(r, int(r.split('-')[0]) == 0)",fieldPath=".isolated",message="cpus.isolated includes CPU 0, which takes boot-time interrupts, timers and firmware calls on many machines: set cpus.cpu0 to Isolatable to isolate it by explicit choice"
type CPUSpec struct {
	// reserved are the housekeeping CPUs: system.slice, user.slice,
	// init.scope and movable IRQs are confined to them.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]{1,4}(-[0-9]{1,4})?(,[0-9]{1,4}(-[0-9]{1,4})?)*$`
	// +kubebuilder:validation:XValidation:rule="self.split(',').all(r, !r.contains('-') || int(r.split('-')[0]) <= int(r.split('-')[1]))",message="cpus.reserved has a descending range"
	Reserved *string `json:"reserved,omitempty"`

	// isolated are the CPUs kept for latency-critical pods. Full isolation
	// also needs nohz_full, rcu_nocbs, isolcpus=managed_irq and irqaffinity
	// on the kernel command line, derived from isolated and reserved:
	// bootParameters says whether the agent only reports what the node
	// lacks (ReportOnly, the default, RebootRequired) or stages it through
	// the node's bootloader for a managed reboot (Reboot).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[0-9]{1,4}(-[0-9]{1,4})?(,[0-9]{1,4}(-[0-9]{1,4})?)*$`
	// +kubebuilder:validation:XValidation:rule="self.split(',').all(r, !r.contains('-') || int(r.split('-')[0]) <= int(r.split('-')[1]))",message="cpus.isolated has a descending range"
	Isolated *string `json:"isolated,omitempty"`

	// namespaceSelector is the cluster admin's grant: only pods in
	// namespaces whose labels match it are kept on the isolated CPUs when
	// they opt in (annotation latencytier.io/cpu-quota: disable or
	// cpuQuota.podSelector). A pod opting in from any other namespace is
	// reported Refused and left where it is. Required with isolated; {}
	// admits every namespace. Separate from cpuQuota.namespaceSelector:
	// the isolated CPUs are a scarcer grant than an unthrottled pod.
	// +optional
	NamespaceSelector *NamespaceSelector `json:"namespaceSelector,omitempty"`

	// partition isolates, at run time, the exclusive CPUs kubelet's static
	// CPU manager gives a granted pod's containers within isolated: None
	// (default), Isolated (no load balancing: one busy or pinned thread per
	// CPU) or Root (balanced only among the container's CPUs). Needs cgroup
	// v2 and Linux 6.7+; elsewhere it is reported Unsupported. See
	// CPUPartition.
	// +optional
	Partition CPUPartition `json:"partition,omitempty"`

	// cpu0 says whether isolated may include CPU 0: Housekeeping (the
	// default when empty) keeps CPU 0 for the node's own work (boot-time
	// interrupts, timers and firmware calls that land there on many
	// machines); Isolatable lets isolated include it, an explicit choice.
	// +optional
	CPU0 CPU0Policy `json:"cpu0,omitempty"`
}

// CPU0Policy says whether CPU 0 may be isolated.
// +kubebuilder:validation:Enum=Housekeeping;Isolatable
type CPU0Policy string

const (
	// CPU0Housekeeping keeps CPU 0 out of cpus.isolated (the default).
	CPU0Housekeeping CPU0Policy = "Housekeeping"
	// CPU0Isolatable lets cpus.isolated include CPU 0.
	CPU0Isolatable CPU0Policy = "Isolatable"
)

// IsolatedPerReservedCPU is the sizing rule for cpus: at least one
// reserved (housekeeping) CPU for every IsolatedPerReservedCPU isolated
// ones, since the housekeeping CPUs carry kubelet, the runtime, every
// movable IRQ and, with rcu_nocbs, every isolated CPU's RCU callbacks.
// The CRD checks it where both lists are given and each agent checks it
// against the node's own CPUs.
const IsolatedPerReservedCPU = 16

// NamespaceSelector selects namespaces by their labels (Kubernetes label
// selector semantics: {} selects every namespace), bounded like the other
// selectors. The label kubernetes.io/metadata.name selects one namespace by
// name.
// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || size(self.matchLabels) <= 16",message="at most 16 matchLabels"
// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || size(self.matchExpressions) <= 16",message="at most 16 matchExpressions"
// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="a matchExpressions operator must be In, NotIn, Exists or DoesNotExist"
// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, (e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0))",message="matchExpressions values: In and NotIn need at least one, Exists and DoesNotExist take none"
// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !has(e.values) || size(e.values) <= 64)",message="at most 64 matchExpressions values per expression"
type NamespaceSelector metav1.LabelSelector

// IRQAffinity says where movable interrupts go.
// +kubebuilder:validation:Enum=Reserved;Unchanged
type IRQAffinity string

const (
	// IRQAffinityReserved steers every movable IRQ and default_smp_affinity
	// to cpus.reserved.
	IRQAffinityReserved IRQAffinity = "Reserved"
	// IRQAffinityUnchanged leaves interrupts alone.
	IRQAffinityUnchanged IRQAffinity = "Unchanged"
)

// IRQSpec steers interrupts.
type IRQSpec struct {
	// affinity is Reserved (every movable IRQ and default_smp_affinity to
	// cpus.reserved; immovable managed or per-CPU IRQs are reported) or
	// Unchanged.
	// +optional
	// +kubebuilder:default=Reserved
	Affinity IRQAffinity `json:"affinity,omitempty"`
}

// CPUQuotaPolicy says what happens to CFS bandwidth limits.
// +kubebuilder:validation:Enum=Remove;Burst;Keep
type CPUQuotaPolicy string

const (
	// CPUQuotaRemove removes the limit of opted-in pods at pod and container
	// level and re-asserts when kubelet or the runtime writes it back.
	CPUQuotaRemove CPUQuotaPolicy = "Remove"
	// CPUQuotaBurst keeps the limit of opted-in pods and lets them spend
	// quota they left unused in earlier periods: a CFS burst (cgroup v1
	// cpu.cfs_burst_us, v2 cpu.max.burst; Linux 5.14+) of burstPercent of
	// the quota, at pod and container level. The average stays within the
	// limit; a period may use up to quota + burst.
	CPUQuotaBurst CPUQuotaPolicy = "Burst"
	// CPUQuotaKeep leaves every limit in place.
	CPUQuotaKeep CPUQuotaPolicy = "Keep"
)

// The bounds of spec.cpuQuota.burstPercent, for the CRD's markers (checked
// by a test) and the agent alike. The kernel refuses a burst larger than
// the quota: tg_set_cfs_bandwidth (kernel/sched/core.c, since 5.14) returns
// EINVAL when "quota != RUNTIME_INF && (burst > quota || burst + quota >
// max_cfs_runtime)", and every write of the quota (cpu.cfs_quota_us,
// cpu.max) passes the group's current burst through the same check. So a
// burst is at most 100% of the quota, and a quota may not drop below the
// burst: whoever lowers one must lower the burst first.
const (
	BurstPercentMin     = 1
	BurstPercentMax     = 100
	BurstPercentDefault = 100
)

// CPUQuotaSpec selects the pods whose CFS quota is removed. A pod asks (the
// annotation or podSelector); the cluster admin grants, per namespace
// (namespaceSelector).
// +kubebuilder:validation:XValidation:rule="(has(self.policy) && self.policy == 'Keep') || has(self.namespaceSelector)",message="cpuQuota.namespaceSelector is required when cpuQuota.policy is Remove (the default) or Burst: it names the namespaces whose pods may drop or stretch their CPU limit ({} admits every namespace)"
// +kubebuilder:validation:XValidation:rule="!has(self.burstPercent) || (has(self.policy) && self.policy == 'Burst')",message="cpuQuota.burstPercent applies only to cpuQuota.policy Burst"
type CPUQuotaSpec struct {
	// policy is Remove or Burst (for pods annotated latencytier.io/cpu-quota:
	// disable or matching podSelector, in a namespace namespaceSelector
	// admits) or Keep. Remove drops their CFS limit; Burst keeps it and adds
	// a CFS burst of burstPercent of the quota (Linux 5.14+; Unsupported on
	// older kernels).
	// +optional
	// +kubebuilder:default=Remove
	Policy CPUQuotaPolicy `json:"policy,omitempty"`

	// burstPercent is, with policy Burst, the burst as a percentage of each
	// cgroup's quota: 100 (the default) lets a pod that was idle use twice
	// its limit in one period. The kernel caps a burst at the quota, hence
	// at most 100.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	BurstPercent *int32 `json:"burstPercent,omitempty"`

	// namespaceSelector is the cluster admin's grant: only pods in
	// namespaces whose labels match it lose their CFS limit when they opt
	// in. A pod opting in from any other namespace keeps its limit and is
	// reported Refused (setting result and an event on the pod). Required
	// when policy is Remove; {} admits every namespace.
	// +optional
	NamespaceSelector *NamespaceSelector `json:"namespaceSelector,omitempty"`

	// podSelector opts in pods by label, in addition to the annotation.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || size(self.matchLabels) <= 16",message="at most 16 matchLabels"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || size(self.matchExpressions) <= 16",message="at most 16 matchExpressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="a matchExpressions operator must be In, NotIn, Exists or DoesNotExist"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, (e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0))",message="matchExpressions values: In and NotIn need at least one, Exists and DoesNotExist take none"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !has(e.values) || size(e.values) <= 64)",message="at most 64 matchExpressions values per expression"
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
}

// Burst is the burst percentage of the spec: burstPercent, or
// BurstPercentDefault when unset.
func (s *CPUQuotaSpec) Burst() int64 {
	if s == nil || s.BurstPercent == nil {
		return BurstPercentDefault
	}
	return int64(*s.BurstPercent)
}

// MeasurementSource is where run-queue latency comes from.
// +kubebuilder:validation:Enum=Auto;EBPF;Schedstat;Disabled
type MeasurementSource string

const (
	// MeasurementAuto uses eBPF where allowed and schedstat + PSI otherwise.
	MeasurementAuto MeasurementSource = "Auto"
	// MeasurementEBPF uses the eBPF run-queue latency histogram only.
	MeasurementEBPF MeasurementSource = "EBPF"
	// MeasurementSchedstat uses /proc/<pid>/schedstat run_delay and PSI.
	MeasurementSchedstat MeasurementSource = "Schedstat"
	// MeasurementDisabled measures nothing.
	MeasurementDisabled MeasurementSource = "Disabled"
)

// MeasurementSpec configures measurement on the node.
// +kubebuilder:validation:XValidation:rule="!has(self.podSelector) || has(self.namespaceSelector)",message="measurement.namespaceSelector is required with measurement.podSelector: it names the namespaces whose pods may count as the tier's (their run delay and throttling are rollout evidence; {} admits every namespace)"
type MeasurementSpec struct {
	// source is Auto, EBPF, Schedstat or Disabled.
	// +optional
	// +kubebuilder:default=Auto
	Source MeasurementSource `json:"source,omitempty"`

	// interval is how often the agent summarises and reports; between 5s and 1h.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('5s') && duration(self) <= duration('1h')",message="measurement.interval must be between 5s and 1h"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// podSelector chooses the pods whose tasks get per-pod numbers (throttling,
	// run delay), which are the rollout evidence a verdict rests on; pods
	// granted quota removal or the isolated CPUs are always included. It
	// matches only pods in namespaces namespaceSelector selects.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || size(self.matchLabels) <= 16",message="at most 16 matchLabels"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || size(self.matchExpressions) <= 16",message="at most 16 matchExpressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="a matchExpressions operator must be In, NotIn, Exists or DoesNotExist"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, (e.operator in ['In', 'NotIn']) == (has(e.values) && size(e.values) > 0))",message="matchExpressions values: In and NotIn need at least one, Exists and DoesNotExist take none"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !has(e.values) || size(e.values) <= 64)",message="at most 64 matchExpressions values per expression"
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`

	// namespaceSelector is the cluster admin's grant for podSelector: only
	// pods in namespaces whose labels match it are measured as the tier's.
	// Labels are the pod owner's to set, so without it any tenant could
	// label a pod like the tier's and push a rollout verdict to Regressed
	// (a fleet-wide rollback) with a pod of its own. Required with
	// podSelector; {} admits every namespace. Pods granted a tuning are
	// measured by the grant of that tuning (cpuQuota.namespaceSelector,
	// cpus.namespaceSelector), not by this.
	// +optional
	NamespaceSelector *NamespaceSelector `json:"namespaceSelector,omitempty"`

	// contention says when the node's RunQueueContention condition turns
	// True (the measured pods wait behind others) and False again; see
	// ContentionSpec. Left out, its defaults apply.
	// +optional
	Contention *ContentionSpec `json:"contention,omitempty"`

	// budgets are latency budgets per workload (PodBudget): each measured
	// pod is judged against the first entry whose podSelector matches it
	// (status.podBudgets, kubectl latency explain); a measured pod no
	// entry matches gets no verdict. At most 16, names unique.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Budgets []PodBudget `json:"budgets,omitempty"`
}

// LatencyBudget is what a node of the profile must deliver.
type LatencyBudget struct {
	// runQueueP99 is the highest acceptable 99th percentile run-queue
	// latency (time from wakeup to running) on the node; up to 10s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('10s')",message="latencyBudget.runQueueP99 must be between 0 and 10s"
	RunQueueP99 *metav1.Duration `json:"runQueueP99,omitempty"`

	// throttledRatio is the highest acceptable share of CFS periods in which
	// an opted-in pod was throttled, a decimal between 0 and 1 ("0.01").
	// +optional
	// +kubebuilder:validation:MaxLength=12
	// +kubebuilder:validation:Pattern=`^(0(\.[0-9]{1,6})?|1(\.0{1,6})?)$`
	ThrottledRatio *string `json:"throttledRatio,omitempty"`
}
