//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// Run-queue latency, the way libbpf-tools runqlat measures it: a task is
// stamped when it is woken (sched_wakeup, sched_wakeup_new) or preempted while
// still runnable (sched_switch with prev in TASK_RUNNING), and the time until
// sched_switch puts it on a CPU is recorded.
//
// Differences from runqlat, all in favour of a cheap, precise agent:
//   - the histogram is log-linear: SUBS sub-buckets per power of two, in
//     units of 1/16 us (62.5 ns), so every bucket sits inside exactly one of
//     runqlat's log2 microsecond slots and percentiles are meaningful;
//   - it lives in a per-CPU array indexed by the CPU that ran the task, so no
//     atomics are needed and user space splits it by CPU class (isolated,
//     reserved, node) without any configuration in the kernel.
//
// Measured pods: user space puts the cgroup IDs (kernfs node IDs, the
// directories' inode numbers) of the pods it measures, and of their
// containers, into pod_cgroups; a task whose cpu-controller cgroup is one of
// them also lands in pod_hists. The cpu controller's cgroup is the right one
// on both cgroup versions: on v1 it is the task's cgroup in the cpu
// hierarchy, on v2 the unified one (kubelet enables cpu on its subtree).
//
// Two copies of the programs exist: tp_btf (typed, where the kernel offers
// BPF tracing programs) and raw_tp (everywhere else). User space loads one set.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#define TASK_RUNNING 0
#define MAX_ENTRIES 10240

// Histogram layout; keep in sync with agent/measure/hist.go.
#define SUB_BITS 3
#define SUBS (1 << SUB_BITS)
#define MAX_EXP 33 // 2^33 units = 537 s; NR_SLOTS is a power of two
#define NR_SLOTS ((MAX_EXP - SUB_BITS + 2) * SUBS)

struct hist {
	__u64 slots[NR_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_ENTRIES);
	__type(key, __u32);
	__type(value, __u64);
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hist);
} hists SEC(".maps");

// Largest latency per CPU; user space reads and zeroes it every window.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} maxes SEC(".maps");

// Cgroup IDs of the measured pods and their containers (value unused).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u8);
} pod_cgroups SEC(".maps");

// pods_on[0] is non-zero while pod_cgroups has entries, so an agent that
// measures no pod pays nothing per switch.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} pods_on SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hist);
} pod_hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} pod_maxes SEC(".maps");

// task_struct.state was renamed __state in 5.14.
struct task_struct___o {
	volatile long int state;
} __attribute__((preserve_access_index));

struct task_struct___x {
	unsigned int __state;
} __attribute__((preserve_access_index));

// task_state reads through bpf_probe_read_kernel (raw_tp: untyped pointers).
static __always_inline __s64 task_state(void *task)
{
	struct task_struct___x *t = task;

	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return BPF_CORE_READ((struct task_struct___o *)task, state);
}

// task_state_btf loads directly (tp_btf: the verifier knows the pointer's
// type, so no helper call is needed).
static __always_inline __s64 task_state_btf(void *task)
{
	struct task_struct___x *t = task;

	if (bpf_core_field_exists(t->__state))
		return t->__state;
	return ((struct task_struct___o *)task)->state;
}

static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

// slot maps a latency in ns to its log-linear bucket.
static __always_inline __u32 slot(__u64 ns)
{
	__u64 u = ns * 2 / 125; // 1/16 us
	__u32 e;

	if (u < SUBS)
		return u;
	e = log2_u64(u);
	if (e > MAX_EXP)
		return NR_SLOTS - 1;
	return (e - SUB_BITS + 1) * SUBS + ((u >> (e - SUB_BITS)) & (SUBS - 1));
}

static __always_inline int enqueue(__u32 pid)
{
	__u64 ts;

	if (!pid)
		return 0;
	ts = bpf_ktime_get_ns();
	bpf_map_update_elem(&start, &pid, &ts, BPF_ANY);
	return 0;
}

// cpu_cgroup_id is the kernfs ID of task's cgroup in the cpu controller
// (probe reads, so it serves raw_tp and tp_btf alike); 0 if unreadable.
static __always_inline __u64 cpu_cgroup_id(struct task_struct *task)
{
	int idx = bpf_core_enum_value(enum cgroup_subsys_id, cpu_cgrp_id);
	struct cgroup_subsys_state *css = NULL;
	struct css_set *cset;

	cset = BPF_CORE_READ(task, cgroups);
	if (!cset || idx < 0 || idx >= bpf_core_enum_value(enum cgroup_subsys_id, CGROUP_SUBSYS_COUNT))
		return 0;
	if (bpf_core_read(&css, sizeof(css), &cset->subsys[idx]) || !css)
		return 0;
	return BPF_CORE_READ(css, cgroup, kn, id);
}

// record adds delta to the histogram and max of one class (node or pods).
static __always_inline void record(void *hists_map, void *maxes_map, __s64 delta)
{
	__u32 key = 0, s;
	struct hist *h;
	__u64 *m;

	h = bpf_map_lookup_elem(hists_map, &key);
	if (!h)
		return;
	s = slot(delta) & (NR_SLOTS - 1); // a mask the verifier can follow
	h->slots[s]++;
	m = bpf_map_lookup_elem(maxes_map, &key);
	if (m && (__u64)delta > *m)
		*m = delta;
}

// in_measured_pod says next runs in a cgroup user space put in pod_cgroups.
static __always_inline bool in_measured_pod(struct task_struct *next)
{
	__u32 key = 0, *on;
	__u64 id;

	on = bpf_map_lookup_elem(&pods_on, &key);
	if (!on || !*on)
		return false;
	id = cpu_cgroup_id(next);
	return id && bpf_map_lookup_elem(&pod_cgroups, &id);
}

// on_switch re-queues a preempted prev (still TASK_RUNNING) and records how
// long next waited.
static __always_inline int on_switch(bool prev_runnable, __u32 prev_pid, struct task_struct *next, __u32 pid)
{
	__u64 *tsp;
	__s64 delta;

	if (prev_runnable)
		enqueue(prev_pid);

	tsp = bpf_map_lookup_elem(&start, &pid);
	if (!tsp)
		return 0;
	delta = bpf_ktime_get_ns() - *tsp;
	bpf_map_delete_elem(&start, &pid);
	if (delta < 0)
		return 0;

	record(&hists, &maxes, delta);
	if (in_measured_pod(next))
		record(&pod_hists, &pod_maxes, delta);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(ltb_wakeup, struct task_struct *p)
{
	return enqueue(p->pid);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(ltb_wakeup_new, struct task_struct *p)
{
	return enqueue(p->pid);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(ltb_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch(task_state_btf(prev) == TASK_RUNNING, prev->pid, next, next->pid);
}

SEC("raw_tp/sched_wakeup")
int BPF_PROG(ltr_wakeup, struct task_struct *p)
{
	return enqueue(BPF_CORE_READ(p, pid));
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(ltr_wakeup_new, struct task_struct *p)
{
	return enqueue(BPF_CORE_READ(p, pid));
}

SEC("raw_tp/sched_switch")
int BPF_PROG(ltr_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	bool runnable = task_state(prev) == TASK_RUNNING;

	return on_switch(runnable, runnable ? BPF_CORE_READ(prev, pid) : 0, next, BPF_CORE_READ(next, pid));
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
