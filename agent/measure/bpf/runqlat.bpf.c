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

// on_switch re-queues a preempted prev (still TASK_RUNNING) and records how
// long next waited.
static __always_inline int on_switch(bool prev_runnable, __u32 prev_pid, __u32 pid)
{
	__u32 key = 0, s;
	struct hist *h;
	__u64 *tsp, *m;
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

	h = bpf_map_lookup_elem(&hists, &key);
	if (!h)
		return 0;
	s = slot(delta) & (NR_SLOTS - 1); // a mask the verifier can follow
	h->slots[s]++;
	m = bpf_map_lookup_elem(&maxes, &key);
	if (m && (__u64)delta > *m)
		*m = delta;
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
	return on_switch(task_state_btf(prev) == TASK_RUNNING, prev->pid, next->pid);
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

	return on_switch(runnable, runnable ? BPF_CORE_READ(prev, pid) : 0, BPF_CORE_READ(next, pid));
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
