//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// latencytier's tier scheduler: a sched_ext BPF scheduler (Linux 6.13+ with
// CONFIG_SCHED_CLASS_EXT) that runs a latency tier's threads first.
//
//   - Granted tasks (their cpu-controller cgroup, or one of its three
//     nearest ancestors, is in granted_cgroups; or their tgid is in
//     granted_tgids; user space fills both) go to their CPU's local queue
//     with a short slice (tier_slice_ns), and preempt the task running
//     there when that is an ordinary one. Preemption never cuts in front of
//     another granted task or a per-CPU kernel thread (SCX_ENQ_PREEMPT
//     implies the head of the queue).
//   - Per-CPU kernel threads (PF_KTHREAD, one allowed CPU) go to their
//     CPU's local queue too, preempting an ordinary task: they are never
//     left behind a hog, whatever else waits.
//   - Everything else shares the global queue in FIFO order with equal
//     slices (fair_slice_ns): round robin, no weights (nice and cpu.weight
//     are not honoured in this version).
//   - A budget keeps the others alive: when granted tasks have used more
//     than tier_budget_pct of a CPU within the current 100 ms window, that
//     CPU's granted tasks go to the global queue like everyone else until
//     the window ends (the sched_rt_runtime_us idea). So the kernel's stall
//     watchdog never fires for the others because of the tier.
//
// Only the built-in queues are used and there is no ops.dispatch: the
// kernel itself consumes the local queue, then the global one. That keeps
// the program to kfuncs whose prototype is the same on every kernel since
// 6.13 (scx_bpf_dsq_move_to_local changed in 7.1). The insert kfunc was
// renamed in 6.19; hack/generate-bpf.sh builds this file once per name
// (sched_ext.h, TIER_INSERT_V2) and the loader picks one.
//
// cpu_online/cpu_offline are no-ops on purpose: without them the kernel
// exits the scheduler on any CPU hotplug.
//
// ops.exit copies the kernel's exit info into exit_info, which user space
// pins, so the reason of an ejection (a stall, an error, SysRq-S) outlives
// the scheduler.
//
// Test control (test_controls, read-only data set only by the test binary):
// a task whose tgid is stall_tgid[0] is never inserted anywhere, so the
// kernel's watchdog sees it stall and ejects the scheduler. The agent binary
// cannot set test_controls; with it false the verifier drops that code.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "sched_ext.h"

#define PF_KTHREAD 0x00200000
#define MAX_CPUS 1024
#define GRANTED_ENTRIES 4096
#define WINDOW_NS 100000000ULL // the budget's window, 100 ms
#define ANCESTORS 3
#define REASON_LEN 128
#define MSG_LEN 1024

// What a CPU runs (cpu_ctx.cur); keep in sync with agent/tiersched.
#define RUN_NONE 0
#define RUN_FAIR 1
#define RUN_TIER 2
#define RUN_KTHREAD 3

// Counters (stats index); keep in sync with agent/tiersched.
enum tier_stat {
	STAT_TIER = 0,        // granted tasks inserted into a local queue
	STAT_TIER_PREEMPT,    // ... of which preempted an ordinary task
	STAT_TIER_DEMOTED,    // granted tasks sent to the global queue (budget spent)
	STAT_FAIR,            // others inserted into the global queue
	STAT_KTHREAD,         // per-CPU kernel threads inserted locally
	STAT_IDLE,            // tasks inserted straight onto an idle CPU
	STAT_STALLED,         // test control: tasks dropped on purpose
	TIER_NR_STATS,
};

const volatile __u64 tier_slice_ns = 1000000;
const volatile __u64 fair_slice_ns = 5000000;
const volatile __u32 tier_budget_pct = 90;
const volatile bool test_controls = false;

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GRANTED_ENTRIES);
	__type(key, __u64);  // cgroup ID (kernfs node ID, the directory's inode)
	__type(value, __u8);
} granted_cgroups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GRANTED_ENTRIES);
	__type(key, __u32);  // tgid
	__type(value, __u8);
} granted_tgids SEC(".maps");

struct cpu_ctx {
	__u64 window_start;
	__u64 tier_ns;   // granted runtime within the window
	__u64 started;   // when the current task started running
	__u32 cur;       // RUN_*
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUS);
	__type(key, __u32);
	__type(value, struct cpu_ctx);
} cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TIER_NR_STATS);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

struct exit_rec {
	__s32 kind;
	__u32 pad;
	__s64 exit_code;
	char reason[REASON_LEN];
	char msg[MSG_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exit_rec);
} exit_info SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} stall_tgid SEC(".maps");

static __always_inline void stat_inc(__u32 i)
{
	__u64 *c = bpf_map_lookup_elem(&stats, &i);

	if (c)
		(*c)++;
}

static __always_inline void insert(struct task_struct *p, __u64 dsq, __u64 slice, __u64 flags)
{
	scx_insert(p, dsq, slice, flags);
}

static __always_inline bool is_percpu_kthread(struct task_struct *p)
{
	return (BPF_CORE_READ(p, flags) & PF_KTHREAD) && BPF_CORE_READ(p, nr_cpus_allowed) == 1;
}

// is_granted looks the task's tgid up, then its cpu-controller cgroup and
// up to ANCESTORS of its parents (a container's threads may sit below the
// container's own cgroup).
static __always_inline bool is_granted(struct task_struct *p)
{
	int idx = bpf_core_enum_value(enum cgroup_subsys_id, cpu_cgrp_id);
	struct cgroup_subsys_state *css = NULL;
	struct css_set *cset;
	__u32 tgid = BPF_CORE_READ(p, tgid);
	__u64 id;
	int i;

	if (bpf_map_lookup_elem(&granted_tgids, &tgid))
		return true;
	cset = BPF_CORE_READ(p, cgroups);
	if (!cset || idx < 0 || idx >= bpf_core_enum_value(enum cgroup_subsys_id, CGROUP_SUBSYS_COUNT))
		return false;
	if (bpf_core_read(&css, sizeof(css), &cset->subsys[idx]) || !css)
		return false;
	for (i = 0; i <= ANCESTORS && css; i++) {
		id = BPF_CORE_READ(css, cgroup, kn, id);
		if (bpf_map_lookup_elem(&granted_cgroups, &id))
			return true;
		css = BPF_CORE_READ(css, parent);
	}
	return false;
}

static __always_inline bool stalled_on_purpose(struct task_struct *p)
{
	__u32 zero = 0, *tgid;

	if (!test_controls)
		return false;
	tgid = bpf_map_lookup_elem(&stall_tgid, &zero);
	return tgid && *tgid && *tgid == (__u32)BPF_CORE_READ(p, tgid);
}

static __always_inline struct cpu_ctx *cpu_ctx_of(__s32 cpu)
{
	__u32 key = cpu;

	return bpf_map_lookup_elem(&cpus, &key);
}

// budget_spent says granted tasks used their share of cpu's window.
static __always_inline bool budget_spent(struct cpu_ctx *c, __u64 now)
{
	if (!c || now - c->window_start >= WINDOW_NS)
		return false;
	return c->tier_ns * 100 > WINDOW_NS * tier_budget_pct;
}

SEC("struct_ops/tier_select_cpu")
s32 BPF_PROG(tier_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	bool idle = false;
	s32 cpu;

	cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &idle);
	if (!idle || stalled_on_purpose(p))
		return cpu;
	stat_inc(STAT_IDLE);
	if (is_granted(p) && !budget_spent(cpu_ctx_of(cpu), bpf_ktime_get_ns())) {
		stat_inc(STAT_TIER);
		insert(p, SCX_DSQ_LOCAL, tier_slice_ns, 0);
	} else {
		insert(p, SCX_DSQ_LOCAL, fair_slice_ns, 0);
	}
	return cpu;
}

SEC("struct_ops/tier_enqueue")
void BPF_PROG(tier_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct cpu_ctx *c;
	bool ordinary_runs;

	if (stalled_on_purpose(p)) {
		stat_inc(STAT_STALLED);
		return;
	}
	c = cpu_ctx_of(scx_bpf_task_cpu(p));
	ordinary_runs = c && c->cur == RUN_FAIR;
	if (is_percpu_kthread(p)) {
		stat_inc(STAT_KTHREAD);
		insert(p, SCX_DSQ_LOCAL, fair_slice_ns, enq_flags | (ordinary_runs ? SCX_ENQ_PREEMPT : 0));
		return;
	}
	if (is_granted(p)) {
		if (!budget_spent(c, bpf_ktime_get_ns())) {
			stat_inc(STAT_TIER);
			if (ordinary_runs)
				stat_inc(STAT_TIER_PREEMPT);
			insert(p, SCX_DSQ_LOCAL, tier_slice_ns, enq_flags | (ordinary_runs ? SCX_ENQ_PREEMPT : 0));
			return;
		}
		stat_inc(STAT_TIER_DEMOTED);
	} else {
		stat_inc(STAT_FAIR);
	}
	insert(p, SCX_DSQ_GLOBAL, fair_slice_ns, enq_flags);
}

SEC("struct_ops/tier_running")
void BPF_PROG(tier_running, struct task_struct *p)
{
	struct cpu_ctx *c = cpu_ctx_of(bpf_get_smp_processor_id());

	if (!c)
		return;
	c->started = bpf_ktime_get_ns();
	if (is_percpu_kthread(p))
		c->cur = RUN_KTHREAD;
	else if (is_granted(p))
		c->cur = RUN_TIER;
	else
		c->cur = RUN_FAIR;
}

SEC("struct_ops/tier_stopping")
void BPF_PROG(tier_stopping, struct task_struct *p, bool runnable)
{
	struct cpu_ctx *c = cpu_ctx_of(bpf_get_smp_processor_id());
	__u64 now = bpf_ktime_get_ns();

	if (!c)
		return;
	if (now - c->window_start >= WINDOW_NS) {
		c->window_start = now;
		c->tier_ns = 0;
	}
	if (c->cur == RUN_TIER && now > c->started)
		c->tier_ns += now - c->started;
	c->cur = RUN_NONE;
}

SEC("struct_ops/tier_cpu_online")
void BPF_PROG(tier_cpu_online, s32 cpu)
{
}

SEC("struct_ops/tier_cpu_offline")
void BPF_PROG(tier_cpu_offline, s32 cpu)
{
}

SEC("struct_ops/tier_exit")
void BPF_PROG(tier_exit, struct scx_exit_info *ei)
{
	__u32 zero = 0;
	struct exit_rec *r = bpf_map_lookup_elem(&exit_info, &zero);

	if (!r)
		return;
	r->kind = BPF_CORE_READ(ei, kind);
	r->exit_code = BPF_CORE_READ(ei, exit_code);
	bpf_probe_read_kernel_str(r->reason, sizeof(r->reason), BPF_CORE_READ(ei, reason));
	bpf_probe_read_kernel_str(r->msg, sizeof(r->msg), BPF_CORE_READ(ei, msg));
}

SEC(".struct_ops.link")
struct sched_ext_ops tier_ops = {
	.select_cpu = (void *)tier_select_cpu,
	.enqueue = (void *)tier_enqueue,
	.running = (void *)tier_running,
	.stopping = (void *)tier_stopping,
	.cpu_online = (void *)tier_cpu_online,
	.cpu_offline = (void *)tier_cpu_offline,
	.exit = (void *)tier_exit,
	.flags = 0,       // every normal task (partial mode would put ext below fair)
	.timeout_ms = 0,  // the kernel's maximum (30 s); the loader may set it
	.name = "latencytier",
};
