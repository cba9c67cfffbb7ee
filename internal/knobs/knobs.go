// Package knobs is the one catalogue of every kernel knob latencytier knows:
// where each typed scheduler knob lives on each kernel and the setting ID it
// reports under; which raw sysctls latency tuning needs (the built-in
// allowlist, each with its reason), which are refused whatever the cluster
// admin says and why, and the namespace each raw sysctl lives in. Every
// other sysctl is accepted only when the cluster admin unlocks it (AdminList,
// the way kubelet's --allowed-unsafe-sysctls does). The agent's writers, the
// findings, the CRD's CEL deny-lists (checked by a test in api/v1alpha1), the
// allowlist admission policy in config/admission and docs/knobs.md (both
// checked by tests here) all derive from it. It imports nothing of the project, so
// the API package's tests and the agent can both use it.
package knobs

import (
	"slices"
	"strings"

	"latencytier.io/latencytier/internal/settingid"
)

// MaxValueChars bounds a raw sysctl value, counted in characters (as the API
// server counts maxLength), not bytes.
const MaxValueChars = 256

// Place is one file a typed knob lives in on some range of kernels.
type Place struct {
	// Proc is the name under /proc/sys/kernel ("" for a debugfs place).
	Proc string
	// Debug is the name under /sys/kernel/debug/sched.
	Debug string
	// Since and Until are the first and last kernel releases with this place
	// ("" = open ended). Informational: the agent probes, it does not trust
	// the version.
	Since, Until string
}

// Sysctl is the dotted sysctl name of a /proc/sys/kernel place, "" for debugfs.
func (p Place) Sysctl() string {
	if p.Proc == "" {
		return ""
	}
	return "kernel." + p.Proc
}

// Scheduler is one typed field of spec.scheduler.
type Scheduler struct {
	// Field is the JSON name of the field in SchedulerSpec.
	Field string
	// Places are where the knob may live, in the order the agent probes them.
	Places []Place
	// EEVDFRemoved says EEVDF (6.6+) has no such knob: reported Unsupported.
	EEVDFRemoved bool
	// FairOnly says the knob acts on fair-class (CFS/EEVDF) tasks only: a
	// sched_ext scheduler's tasks do not see it (agent/findings says so
	// while one runs). rtRuntime is the one that is not: real-time tasks
	// run above sched_ext.
	FairOnly bool
}

// ID is the setting ID the knob reports under in status and the journal.
func (s Scheduler) ID() string { return SchedulerID(s.Field) }

// Sysctl is the knob's first /proc/sys name, for knobs that are sysctls on
// every kernel (autogroup, numaBalancing, rtRuntime).
func (s Scheduler) Sysctl() string {
	for _, p := range s.Places {
		if n := p.Sysctl(); n != "" {
			return n
		}
	}
	return ""
}

// SchedulerID is the setting ID of a typed scheduler field.
func SchedulerID(field string) string { return settingid.Scheduler.ID(field) }

// SysctlID is the setting ID of a raw sysctl.
func SysctlID(name string) string { return settingid.Sysctl.ID(name) }

// The typed scheduler knobs: each a kernel cause of run-queue delay
// (autogroup, NUMA balancing, migration cost, ...) with where it lives by
// kernel version.
var (
	Autogroup = Scheduler{Field: "autogroup", FairOnly: true, // groups fair-class tasks (task_group's cfs_rq)
		Places: []Place{{Proc: "sched_autogroup_enabled", Since: "2.6.38"}}}
	NumaBalancing = Scheduler{Field: "numaBalancing", FairOnly: true, // scans from task_tick_fair only
		Places: []Place{{Proc: "numa_balancing", Since: "3.8"}}}
	MigrationCost = Scheduler{Field: "migrationCost", FairOnly: true, Places: []Place{
		{Proc: "sched_migration_cost_ns", Until: "5.12"},
		{Debug: "migration_cost_ns", Since: "5.13"}}}
	BaseSlice = Scheduler{Field: "baseSlice", FairOnly: true, Places: []Place{
		{Debug: "base_slice_ns", Since: "6.6"},
		{Proc: "sched_min_granularity_ns", Until: "5.12"},
		{Debug: "min_granularity_ns", Since: "5.13", Until: "6.5"}}}
	Latency = Scheduler{Field: "latency", EEVDFRemoved: true, FairOnly: true, Places: []Place{
		{Proc: "sched_latency_ns", Until: "5.12"},
		{Debug: "latency_ns", Since: "5.13", Until: "6.5"}}}
	WakeupGranularity = Scheduler{Field: "wakeupGranularity", EEVDFRemoved: true, FairOnly: true, Places: []Place{
		{Proc: "sched_wakeup_granularity_ns", Until: "5.12"},
		{Debug: "wakeup_granularity_ns", Since: "5.13", Until: "6.5"}}}
	RTRuntime = Scheduler{Field: "rtRuntime",
		Places: []Place{{Proc: "sched_rt_runtime_us", Since: "2.6.25"}}}
)

// SchedulerKnobs are all typed scheduler knobs in apply order.
var SchedulerKnobs = []Scheduler{Autogroup, NumaBalancing, MigrationCost, BaseSlice, Latency, WakeupGranularity, RTRuntime}

// SchedulerClassField is spec.scheduler.class: the scheduling class the
// node's normal tasks run in, a sched_ext program rather than a file, so
// not one of SchedulerKnobs (no places, no sysctl). SchedulerClassID is
// the setting ID it reports under.
const SchedulerClassField = "class"

// SchedulerClassID is the setting ID of spec.scheduler.class.
var SchedulerClassID = SchedulerID(SchedulerClassField)

// TypedBy returns the typed knob whose sysctl name is name: a raw sysctl of
// that name would be a second writer of the same file.
func TypedBy(name string) (Scheduler, bool) {
	for _, s := range SchedulerKnobs {
		for _, p := range s.Places {
			if p.Sysctl() == name {
				return s, true
			}
		}
	}
	return Scheduler{}, false
}

// namespace is the kernel namespace a sysctl lives in ("" = global).
type namespace string

// The namespaces raw sysctls live in.
const (
	nsGlobal namespace = ""
	// nsNet: the agent DaemonSet runs with hostNetwork (controllers/daemonset.go),
	// so it writes the host's network namespace (not any pod's).
	nsNet namespace = "network"
	// nsIPC: the agent has no hostIPC, so it would write only its own.
	nsIPC namespace = "IPC"
	// nsUTS: host name and domain name.
	nsUTS namespace = "UTS"
	// nsPID: the agent runs without hostPID (controllers/daemonset.go), so it
	// would write only its own PID namespace; from 6.14 kernel.pid_max is
	// per PID namespace too.
	nsPID namespace = "PID"
	// nsUser: the agent runs in the initial user namespace (no hostUsers: false).
	nsUser namespace = "user"
	// nsInitNet: the kernel registers these net.core sysctls in the initial
	// network namespace only (net/core/sysctl_net_core.c net_core_table):
	// one value for the whole node, absent from every other namespace.
	nsInitNet namespace = "initial network only"
)

// reason is why a raw sysctl is refused.
type reason string

// reasons, each with one sentence (why) shared by the agent's status message
// and the CRD's admission message.
const (
	// runsHelper: the kernel runs a program named by the value, as root with
	// full capabilities: a profile would be root on every node it selects.
	runsHelper reason = "RunsHelper"
	// oneWay: once written the old value cannot come back until reboot, which
	// breaks the exact-revert promise.
	oneWay reason = "OneWay"
	// namespacedAway: the sysctl lives in a namespace the agent does not
	// share with the host (IPC, PID), so the write would change only the
	// agent's own.
	namespacedAway reason = "NamespacedAway"
	// notTuning: identity or bookkeeping other software relies on.
	notTuning reason = "NotTuning"
	// action: writing triggers an action; there is no setting to hold or revert.
	action reason = "Action"
	// rtGuard: the period spec.scheduler.rtRuntime (sched_rt_runtime_us) is
	// a share of; changing it moves what the rtRuntime guard guarantees.
	rtGuard reason = "RTGuard"
)

// reasons lists every reason in a stable order (one CEL rule each).
var reasons = []reason{runsHelper, oneWay, namespacedAway, notTuning, action, rtGuard}

// why is the sentence that follows "sysctl <name> " in refusal messages. It
// holds no quote characters (it is embedded in CEL string literals).
func (r reason) why() string {
	switch r {
	case runsHelper:
		return "is refused: it makes the kernel run a program as root, so a profile could run code on every node it selects"
	case oneWay:
		return "is refused: once changed it cannot be set back until reboot, so the agent could never revert it"
	case namespacedAway:
		return "is refused: it is per IPC or PID namespace and the agent shares neither with the host, so it would change only its own"
	case notTuning:
		return "is refused: it is the identity or bookkeeping of the node (host name, domain name, last PID) that kubelet, the runtime and every fork rely on, not a tuning knob"
	case action:
		return "is refused: writing it triggers an action (drop caches, compact, flush), there is no setting to hold or revert"
	case rtGuard:
		return "is refused: it is the period the real-time runtime limit (spec.scheduler.rtRuntime) is a share of, and the RT period must not be changed"
	}
	return "is refused"
}

// entry says, for one sysctl name or every name under a prefix, which
// namespace it lives in, whether it is on the built-in allowlist and whether
// it is refused even when the cluster admin unlocks it.
type entry struct {
	// Name is an exact dotted name, or a prefix when Prefix is set.
	Name   string
	Prefix bool
	// Namespace the sysctl lives in.
	Namespace namespace
	// Refused is why it is refused whatever the admin unlocks ("" = not).
	Refused reason
	// Allowed puts an exact name on the built-in allowlist: accepted without
	// the admin's unlock. Only global settings the agent's revert fully
	// restores qualify; Note says why latency tuning needs it.
	Allowed bool
	// Inherited says the kernel copies the value into every network
	// namespace created while it is set: pods created under the profile
	// keep it after the revert.
	Inherited bool
	// Note explains the entry in docs/knobs.md.
	Note string
	// Value is the type and bounds of an allowlisted sysctl's value
	// (every Allowed entry has one). Names the admin unlocks have none:
	// their values are only length-bounded (MaxValueChars, one line).
	Value Bounds
}

// rules is the raw sysctl catalogue. Names not listed here are global and
// need the admin's unlock (subject to the name pattern and the typed-field
// rule).
var rules = []entry{
	// The built-in allowlist (RHEL tuned realtime, network-latency and
	// latency-performance profiles, and the per-CPU work that delays a
	// service's runnable threads). Each with the type and bounds of its
	// value (values.go): the CRD's CEL, the agent and docs/knobs.md read
	// them from here. The kernel documentation each bound comes from is
	// Documentation/admin-guide/sysctl/{kernel,vm,net}.rst under the
	// sysctl's own heading unless the comment says otherwise: net.rst is
	// quoted, the others paraphrased.
	{Name: "kernel.sched_rr_timeslice_ms", Allowed: true, Note: "the SCHED_RR quantum of real-time threads granted by spec.realtime",
		// kernel.rst: sched_rr_timeslice_ms ... the default is 100ms; a
		// value <= 0 silently resets it to the default, so 0 is refused.
		Value: integer(1, 1000, "ms")},
	{Name: "kernel.sched_cfs_bandwidth_slice_us", Allowed: true, Note: "how much CFS quota a CPU takes at a time: a smaller slice throttles many-threaded pods less",
		// scheduler/sched-bwc.rst: sched_cfs_bandwidth_slice_us (default=5ms);
		// the kernel takes 1us and up, where every CPU takes the global
		// pool's lock every microsecond; above one 100ms period is no slice.
		Value: integer(100, 100000, "µs")},
	{Name: "kernel.sched_schedstats", Allowed: true, Note: "scheduler statistics: their cost on every context switch against wait-time detail (CONFIG_SCHEDSTATS)",
		// kernel.rst: Enables/disables scheduler statistics ... 0 disabled, 1 enabled.
		Value: toggle()},
	{Name: "kernel.timer_migration", Allowed: true, Note: "0 keeps timers on the CPU that armed them instead of moving them to busy (isolated) CPUs",
		// kernel.rst: timer_migration ... 0 or 1 (proc_dointvec_minmax 0..1).
		Value: toggle()},
	{Name: "kernel.nmi_watchdog", Allowed: true, Note: "0 removes the hard-lockup detector's periodic NMI on every CPU",
		// kernel.rst: nmi_watchdog ... 0 disabled, 1 enabled.
		Value: toggle()},
	{Name: "kernel.watchdog", Allowed: true, Note: "0 stops the lockup detectors' per-CPU timers and threads",
		// kernel.rst: watchdog ... 0 disables both lockup detectors, 1 enables.
		Value: toggle()},
	{Name: "kernel.watchdog_cpumask", Allowed: true, Note: "keeps the lockup detectors on the reserved CPUs",
		// kernel.rst: watchdog_cpumask ... echo 0,2-4 > /proc/sys/kernel/watchdog_cpumask:
		// a cpulist; CPUs up to the kernel's NR_CPUS limit (CONFIG_NR_CPUS <= 8192).
		Value: cpulist()},
	{Name: "kernel.hung_task_timeout_secs", Allowed: true, Note: "how often khungtaskd scans and wakes up (the panic switch hung_task_panic is not allowed)",
		// kernel.rst: hung_task_timeout_secs ... 0 means infinite timeout,
		// no checking is done. Possible values ... {0:LONG_MAX/HZ}; a day
		// is the longest scan interval anyone means.
		Value: integer(0, 86400, "s")},
	{Name: "vm.stat_interval", Allowed: true, Note: "how often per-CPU vmstat work runs on every CPU, isolated ones included",
		// vm.rst: stat_interval: The time interval between which vm
		// statistics are updated. The default is 1 second. The kernel
		// takes 0, which reschedules the vmstat work every jiffy on every CPU.
		Value: integer(1, 3600, "s")},
	{Name: "vm.swappiness", Allowed: true, Note: "how eagerly anonymous memory is swapped out instead of page cache dropped",
		// vm.rst: swappiness ... The default value is 60 ... range from 0 to 200 (100 before 5.8).
		Value: integer(0, 200, "")},
	{Name: "vm.dirty_ratio", Allowed: true, Note: "dirty page cache share at which writers block in writeback",
		// vm.rst: dirty_ratio: Contains, as a percentage of total available
		// memory ... (0..100). Below 5% every writer blocks in writeback
		// almost at once; above 80% the whole of memory can wait to be
		// written, one long stall. tuned: latency-performance 10, throughput 40.
		Value: integer(5, 80, "%")},
	{Name: "vm.dirty_background_ratio", Allowed: true, Note: "dirty page cache share at which background writeback starts",
		// vm.rst: dirty_background_ratio ... as a percentage of total
		// available memory (0..100); tuned latency-performance sets 3.
		Value: integer(1, 50, "%")},
	{Name: "vm.dirty_bytes", Allowed: true, Note: "dirty_ratio in bytes",
		// vm.rst: the minimum value allowed for dirty_bytes is two pages
		// (in bytes); 1 MiB to 64 GiB spans tuned's ratios on any node we tune.
		Value: integer(1<<20, 64<<30, "bytes")},
	{Name: "vm.dirty_background_bytes", Allowed: true, Note: "dirty_background_ratio in bytes",
		// vm.rst: dirty_background_bytes: Contains the amount of dirty
		// memory at which the background kernel flusher threads will start writeback.
		Value: integer(1<<20, 64<<30, "bytes")},
	{Name: "vm.dirty_expire_centisecs", Allowed: true, Note: "age at which dirty data is written back",
		// vm.rst: dirty_expire_centisecs ... expressed in 100'ths of a
		// second; 1s to 1h (default 30s).
		Value: integer(100, 360000, "cs")},
	{Name: "vm.dirty_writeback_centisecs", Allowed: true, Note: "how often the writeback threads wake up",
		// vm.rst: dirty_writeback_centisecs ... Setting this to zero
		// disables periodic writeback altogether (data at risk, not
		// latency); below 1s the flushers wake on every CPU up to 100 times a second.
		Value: integer(100, 360000, "cs")},
	{Name: "vm.zone_reclaim_mode", Allowed: true, Note: "0 allocates from another NUMA node instead of reclaiming on the local one in the allocation path",
		// vm.rst: zone_reclaim_mode ... a bitmask: 1 zone reclaim on, 2
		// write dirty pages out, 4 swap pages.
		Value: integer(0, 7, "bitmask")},
	{Name: "vm.compaction_proactiveness", Allowed: true, Note: "background compaction, which stalls tasks while it migrates pages",
		// vm.rst: compaction_proactiveness ... accepts values in the range [0, 100].
		Value: integer(0, 100, "")},
	{Name: "net.core.busy_poll", Namespace: nsInitNet, Allowed: true, Note: "microseconds poll() and select() busy-wait on a device queue instead of sleeping for the interrupt",
		// net.rst: "busy_poll ... Recommended value depends on the number
		// of sockets you poll on. For several sockets 50, for several
		// hundreds 100." The kernel takes up to INT_MAX: a CPU spinning
		// in every poll() for half an hour.
		Value: integer(0, 200, "µs")},
	{Name: "net.core.busy_read", Namespace: nsInitNet, Allowed: true, Note: "microseconds a socket read busy-waits on the device queue",
		// net.rst: "If you need to enable the feature globally via sysctl, a
		// value of 50 is recommended."
		Value: integer(0, 200, "µs")},
	{Name: "net.core.netdev_budget", Namespace: nsInitNet, Allowed: true, Note: "packets one NET_RX softirq run may take from all devices",
		// net.rst: "netdev_budget: Maximum number of packets taken from all
		// interfaces in one polling cycle (NAPI poll)" (default 300).
		Value: integer(50, 3000, "packets")},
	{Name: "net.core.netdev_budget_usecs", Namespace: nsInitNet, Allowed: true, Note: "microseconds one NET_RX softirq run may last",
		// net.rst: "netdev_budget_usecs: Maximum number of microseconds in
		// one NAPI polling cycle" (default 2 jiffies): up to 10ms, one tick at HZ=100.
		Value: integer(100, 10000, "µs")},
	{Name: "net.core.dev_weight", Namespace: nsInitNet, Allowed: true, Note: "packets one device's NAPI poll may take per softirq run",
		// net.rst: "dev_weight: The maximum number of packets that kernel
		// can handle on a NAPI interrupt ... Default: 64".
		Value: integer(1, 1024, "packets")},
	{Name: "net.core.netdev_max_backlog", Namespace: nsInitNet, Allowed: true, Note: "per-CPU input queue length before packets are dropped",
		// net.rst: "netdev_max_backlog: Maximum number of packets, queued on
		// the INPUT side ..." (default 1000), per CPU: every CPU may hold
		// that many skbs, so 65536 is already up to ~64 MiB a CPU.
		Value: integer(64, 65536, "packets")},
	{Name: "net.core.rps_sock_flow_entries", Namespace: nsInitNet, Allowed: true, Note: "receive flow steering table: packets are processed on the CPU the consuming thread runs on",
		// networking/scaling.rst: "The suggested flow count ... 32768 for a
		// moderately loaded server"; the kernel takes up to 1<<29 (a 2 GiB
		// table). 0 turns RFS off.
		Value: integer(0, 1<<20, "entries")},
	// Refused whatever the admin unlocks.
	{Name: "kernel.sched_rt_period_us", Refused: rtGuard, Note: "the RT period; spec.scheduler.rtRuntime is checked against the kernel's own"},
	{Name: "kernel.core_pattern", Refused: runsHelper, Note: "a value starting with a pipe names a program the kernel runs as root on every core dump"},
	{Name: "kernel.modprobe", Refused: runsHelper, Note: "the program the kernel runs to load a module, on demand from any process"},
	{Name: "kernel.poweroff_cmd", Refused: runsHelper, Note: "the program the kernel runs on an orderly power-off"},
	{Name: "kernel.hotplug", Refused: runsHelper, Note: "the uevent helper (CONFIG_UEVENT_HELPER), run on every device event"},
	{Name: "fs.binfmt_misc.", Prefix: true, Refused: runsHelper, Note: "registers interpreters the kernel runs for matching executables"},
	{Name: "kernel.modules_disabled", Refused: oneWay, Note: "1 cannot be set back to 0"},
	{Name: "kernel.kexec_load_disabled", Refused: oneWay, Note: "1 cannot be set back to 0"},
	{Name: "kernel.kexec_load_limit_panic", Refused: oneWay, Note: "can only be lowered (6.7+)"},
	{Name: "kernel.kexec_load_limit_reboot", Refused: oneWay, Note: "can only be lowered (6.7+)"},
	{Name: "kernel.yama.ptrace_scope", Refused: oneWay, Note: "3 cannot be lowered"},
	{Name: "kernel.unprivileged_bpf_disabled", Refused: oneWay, Note: "1 cannot be changed; 0 opens BPF to unprivileged users"},
	{Name: "kernel.tainted", Refused: oneWay, Note: "writes can only add taint bits"},
	{Name: "kernel.usermodehelper.", Prefix: true, Refused: oneWay, Note: "capability sets of kernel-run helpers; can only be reduced"},
	{Name: "kernel.shm", Prefix: true, Namespace: nsIPC, Refused: namespacedAway, Note: "shmmax, shmall, shmmni, shm_rmid_forced, shm_next_id"},
	{Name: "kernel.msg", Prefix: true, Namespace: nsIPC, Refused: namespacedAway, Note: "msgmax, msgmnb, msgmni, msg_next_id"},
	{Name: "kernel.sem", Prefix: true, Namespace: nsIPC, Refused: namespacedAway, Note: "sem, sem_next_id"},
	{Name: "kernel.auto_msgmni", Namespace: nsIPC, Refused: namespacedAway, Note: "older kernels"},
	{Name: "fs.mqueue.", Prefix: true, Namespace: nsIPC, Refused: namespacedAway, Note: "POSIX message queue limits"},
	{Name: "kernel.hostname", Namespace: nsUTS, Refused: notTuning, Note: "the node name kubelet registers under"},
	{Name: "kernel.domainname", Namespace: nsUTS, Refused: notTuning, Note: "NIS domain name"},
	{Name: "kernel.ns_last_pid", Namespace: nsPID, Refused: notTuning, Note: "moves on every fork"},
	{Name: "vm.drop_caches", Refused: action, Note: "drops the page cache on every write"},
	{Name: "vm.compact_memory", Refused: action, Note: "write-only trigger"},
	{Name: "vm.stat_refresh", Refused: action, Note: "write-only trigger: folds every CPU's vmstat counters"},
	{Name: "net.ipv4.route.flush", Namespace: nsNet, Refused: action, Note: "write-only trigger"},
	{Name: "net.ipv6.route.flush", Namespace: nsNet, Refused: action, Note: "write-only trigger"},
	{Name: "net.", Prefix: true, Namespace: nsNet, Note: "the host network namespace (the agent runs with hostNetwork); pods' own namespaces are not touched"},
	// Namespaced, unlockable, and copied into new network namespaces.
	{Name: "net.ipv4.conf.all.", Prefix: true, Namespace: nsNet, Inherited: true, Note: "copied into every network namespace created while set"},
	{Name: "net.ipv4.conf.default.", Prefix: true, Namespace: nsNet, Inherited: true, Note: "copied into every network namespace created while set, and into each interface created in it"},
	{Name: "net.ipv6.conf.all.", Prefix: true, Namespace: nsNet, Inherited: true, Note: "copied into new network namespaces when net.core.devconf_inherit_init_net is 1"},
	{Name: "net.ipv6.conf.default.", Prefix: true, Namespace: nsNet, Inherited: true, Note: "copied into new network namespaces when net.core.devconf_inherit_init_net is 1"},
	{Name: "net.ipv4.neigh.default.", Prefix: true, Namespace: nsNet, Inherited: true, Note: "the neighbour table defaults every interface starts from, in every network namespace"},
	{Name: "net.ipv6.neigh.default.", Prefix: true, Namespace: nsNet, Inherited: true, Note: "the neighbour table defaults every interface starts from, in every network namespace"},
	{Name: "net.ipv4.tcp_rmem", Namespace: nsNet, Inherited: true, Note: "copied into every network namespace created while set"},
	{Name: "net.ipv4.tcp_wmem", Namespace: nsNet, Inherited: true, Note: "copied into every network namespace created while set"},
	{Name: "kernel.pid_max", Namespace: nsPID, Refused: namespacedAway, Note: "per PID namespace from 6.14; the agent runs without hostPID"},
	{Name: "vm.memfd_noexec", Namespace: nsPID, Refused: namespacedAway, Note: "per PID namespace; the agent runs without hostPID"},
	{Name: "user.", Prefix: true, Namespace: nsUser, Note: "per user namespace; the agent runs in the initial one"},
}

// lookup returns the rule for name: an exact entry first, else the longest
// matching prefix. ok is false for a name the catalogue does not list (a
// global one, which needs the admin's unlock).
func lookup(name string) (entry, bool) {
	var best entry
	found := false
	for _, r := range rules {
		switch {
		case !r.Prefix && r.Name == name:
			return r, true
		case r.Prefix && strings.HasPrefix(name, r.Name) && len(r.Name) > len(best.Name):
			best, found = r, true
		}
	}
	return best, found
}

// Refusal says whether the agent refuses raw sysctl name, and the message
// naming it and why.
func Refusal(name string) (string, bool) {
	r, ok := lookup(name)
	if !ok || r.Refused == "" {
		return "", false
	}
	return "sysctl " + name + " " + r.Refused.why(), true
}

// refusedFor returns the exact names and the prefixes refused for reason r.
func refusedFor(r reason) (names, prefixes []string) {
	for _, rule := range rules {
		if rule.Refused != r {
			continue
		}
		if rule.Prefix {
			prefixes = append(prefixes, rule.Name)
		} else {
			names = append(names, rule.Name)
		}
	}
	slices.Sort(names)
	slices.Sort(prefixes)
	return names, prefixes
}
