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
// them also lands in pod_hists (all measured pods together) and in its own
// pod's histogram, pod_slot_hists[slot]: user space gives every measured
// pod a slot (the same slot for the pod's and its containers' cgroups) in
// pod_cgroups' value. There are POD_SLOTS slots; the last, OTHER_SLOT, is
// shared by every pod past the first POD_SLOTS - 1, which user space then
// reports as not measured one by one. Those histograms are shared by all
// CPUs (a per-CPU copy would cost POD_SLOTS histograms per CPU), so a
// count is an atomic add. The cpu controller's cgroup is the right one
// on both cgroup versions: on v1 it is the task's cgroup in the cpu
// hierarchy, on v2 the unified one (kubelet enables cpu on its subtree).
//
// Two copies of the programs exist: tp_btf (typed, where the kernel offers
// BPF tracing programs) and raw_tp (everywhere else). User space loads one set.
//
// Attribution (who made a measured pod wait; on when user space sets
// attribution = 1 at load time, otherwise the verifier drops the code):
//   - a measured task (its cpu cgroup in pod_cgroups) is stamped at enqueue
//     (in start, beside the time) with its cgroup, the CPU it waits on and
//     whether its own cfs bandwidth group is throttled
//     (se.cfs_rq->throttle_count > 0), and that CPU's waiting counter goes
//     up;
//   - every CPU keeps the time its current task switched in (cpu_state.since)
//     and, while a measured task waits on it, a ring of the last RING
//     runner intervals [since, switch-out) with the runner's offender key:
//     idle (pid 0), kernel thread (PF_KTHREAD, by comm) or task (by cpu cgroup
//     ID; user space says which pod or system service that is);
//   - when the measured task switches in, its wait [enqueue, now] is split
//     over the ring entries it overlaps, newest first (the runner it waited
//     behind at the end is the one just switched out). A wait that started
//     while its own group was throttled is charged whole to self-throttling.
//     What the ring no longer covers, and a wait that migrated from another
//     CPU's queue before the ring saw it, goes to "unknown".
// Interrupt time is not measured apart (no IRQ_TIME_ACCOUNTING here): hard
// and soft IRQs that run in a task's context count to that task; ksoftirqd
// and threaded handlers (irq/...) are kernel threads, which user space
// reports as interrupt time by their comm.
// Each charge goes into attr keyed (victim cgroup, generation, offender);
// when attr is full the charge goes to the victim's entry in others, never
// an error. User space flips the generation to read a window.
// The per-switch cost with measured pods: one per-CPU array write on every
// switch, a ring append only on CPUs where a measured task waits (the
// runner's cgroup cached when it was a measured task itself), and, when a
// measured task switches in, a hash update per overlapped interval, one
// pod_cgroups lookup and an atomic add to its pod's histogram.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#define TASK_RUNNING 0
#define MAX_ENTRIES 10240
#define PF_KTHREAD 0x00200000
#define TASK_COMM_LEN 16
#define RING 128 // a power of two
#define ATTR_ENTRIES 8192

// Offender classes (keep in sync with agent/measure/bpf/tracer.go).
#define OFF_UNKNOWN 0
#define OFF_TASK 1
#define OFF_KTHREAD 2
#define OFF_IDLE 3
#define OFF_THROTTLED 4

// attribution is set by user space before load; 0 compiles attribution out.
volatile const __u32 attribution = 0;

// Histogram layout; keep in sync with agent/measure/hist.go.
#define SUB_BITS 3
#define SUBS (1 << SUB_BITS)
#define MAX_EXP 33 // 2^33 units = 537 s; NR_SLOTS is a power of two
#define NR_SLOTS ((MAX_EXP - SUB_BITS + 2) * SUBS)

struct hist {
	__u64 slots[NR_SLOTS];
};

#define ST_THROTTLED 1
#define PC_MEASURED 1
#define PC_LIMITED 2

// stamp is when a task began to wait and, for a measured task (cg != 0),
// what attribution needs.
struct stamp {
	__u64 ts;
	__u64 cg;  // cpu cgroup ID of a measured task, else 0
	__u32 cpu; // the CPU whose queue it waits on
	__u32 flags;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_ENTRIES);
	__type(key, __u32);
	__type(value, struct stamp);
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

// Per-pod histograms: POD_SLOTS of them, 2 KiB each (keep in sync with
// agent/measure/bpf/tracer.go).
#define POD_SLOTS 256
#define OTHER_SLOT (POD_SLOTS - 1)

// pod_cg is a measured cgroup's value in pod_cgroups: flags is
// PC_MEASURED, plus PC_LIMITED when the pod has a CFS quota (only then is
// its tasks' throttle state read); slot is its pod's histogram.
struct pod_cg {
	__u32 flags;
	__u32 slot;
};

// Cgroup IDs of the measured pods and their containers.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct pod_cg);
} pod_cgroups SEC(".maps");

// pod_slot_hists are the measured pods' own histograms, cumulative like
// hists; user space reads the slots it gave out and subtracts its
// previous read (and re-bases a slot it gives to another pod).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, POD_SLOTS);
	__type(key, __u32);
	__type(value, struct hist);
} pod_slot_hists SEC(".maps");

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

// offender is what ran on a CPU: class, cgroup ID (OFF_TASK) and comm
// (OFF_KTHREAD).
struct offender {
	__u64 id;
	__u32 class;
	__u32 pad;
	char comm[TASK_COMM_LEN];
};

struct attr_key {
	__u64 victim; // the waiting task's cpu cgroup ID
	__u32 gen;    // gen[0] when charged
	__u32 pad;
	struct offender off;
};

// gen[0] is the generation charges go to. User space flips it, waits for
// programs in flight, and reads and deletes the other generation: a wait
// and all its charges land in one window.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} gen SEC(".maps");

// charged is wait charged to one (victim, offender): ns, and waits, the
// number of waits whose newest part it is (so they sum to the victim's).
struct charged {
	__u64 ns;
	__u64 waits;
};

// Per CPU: a charge is made on the CPU the victim switches in on, so no
// atomics; user space sums the CPUs.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, ATTR_ENTRIES);
	__type(key, struct attr_key);
	__type(value, struct charged);
} attr SEC(".maps");

// others holds, per victim and generation, what did not fit in attr.
struct victim_key {
	__u64 cg;
	__u32 gen;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 2 * 4096); // pod_cgroups' size per generation: every victim fits
	__type(key, struct victim_key);
	__type(value, struct charged);
} others SEC(".maps");

// waiting[cpu] counts measured tasks stamped to wait on that CPU. Written
// from other CPUs at wakeup (bpf_map_lookup_percpu_elem), hence atomics.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} waiting SEC(".maps");

struct interval {
	__u64 start, end;
	struct offender off;
};

struct cpu_state {
	__u64 since;  // when the current task switched in (0: not seen yet)
	__u64 cur_cg; // its cgroup when it is a measured task (else 0)
	__u64 cur;    // the task's address when cur_cg is set (compared, never read)
	__u32 head;   // next ring slot
	__u32 pad;
	struct interval ring[RING];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_state);
} cpu_states SEC(".maps");

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

// pods_measured says pod_cgroups has entries.
static __always_inline bool pods_measured(void)
{
	__u32 key = 0, *on;

	on = bpf_map_lookup_elem(&pods_on, &key);
	return on && *on;
}

// measured_pod is next's entry in pod_cgroups (NULL: not a measured pod's
// task).
static __always_inline struct pod_cg *measured_pod(struct task_struct *next)
{
	__u64 id;

	if (!pods_measured())
		return NULL;
	id = cpu_cgroup_id(next);
	if (!id)
		return NULL;
	return bpf_map_lookup_elem(&pod_cgroups, &id);
}

// record_pod adds delta to the histogram of pc's pod.
static __always_inline void record_pod(struct pod_cg *pc, __s64 delta)
{
	__u32 key = pc->slot, s;
	struct hist *h;

	if (key >= POD_SLOTS)
		key = OTHER_SLOT;
	h = bpf_map_lookup_elem(&pod_slot_hists, &key);
	if (!h)
		return;
	s = slot(delta) & (NR_SLOTS - 1);
	__sync_fetch_and_add(&h->slots[s], 1);
}

// task_struct.cpu moved into thread_info (THREAD_INFO_IN_TASK) in 5.16.
struct task_struct___cpu {
	unsigned int cpu;
} __attribute__((preserve_access_index));

// task_cpu_of is the CPU whose run queue p is on (a woken task: its target).
static __always_inline __u32 task_cpu_of(struct task_struct *p)
{
	struct task_struct___cpu *o = (void *)p;

	if (bpf_core_field_exists(p->thread_info.cpu))
		return BPF_CORE_READ(p, thread_info.cpu);
	if (bpf_core_field_exists(o->cpu))
		return BPF_CORE_READ(o, cpu);
	return bpf_get_smp_processor_id();
}

// group_throttled says p's cfs group, or one above it, is out of CFS
// bandwidth quota right now (throttle_count counts throttled ancestors too).
static __always_inline bool group_throttled(struct task_struct *p)
{
	struct cfs_rq *cfs;

	if (!bpf_core_field_exists(p->se.cfs_rq))
		return false;
	cfs = BPF_CORE_READ(p, se.cfs_rq);
	if (!cfs || !bpf_core_field_exists(cfs->throttle_count))
		return false;
	return BPF_CORE_READ(cfs, throttle_count) > 0;
}

static __always_inline void add_waiting(__u32 cpu, __s64 n)
{
	__u32 zero = 0;
	__s64 *w;

	if (cpu == bpf_get_smp_processor_id())
		w = bpf_map_lookup_elem(&waiting, &zero); // inlined
	else
		w = bpf_map_lookup_percpu_elem(&waiting, &zero, cpu);

	if (w)
		__sync_fetch_and_add(w, n);
}

// enqueue stamps pid (task p) as waiting since ts; with attribution, a
// measured task's stamp says which cgroup and CPU. cpu is the CPU it waits
// on, or -1 for task_cpu (a wakeup from another CPU).
static __always_inline int enqueue(struct task_struct *p, __u32 pid, __s64 cpu, __u64 ts, bool attr)
{
	struct stamp st = {}, *old;
	struct pod_cg *pc = NULL;
	__u64 cg;

	if (!pid)
		return 0;
	st.ts = ts;
	if (attr) {
		cg = cpu_cgroup_id(p);
		if (cg)
			pc = bpf_map_lookup_elem(&pod_cgroups, &cg);
		if (pc) {
			st.cg = cg;
			st.cpu = cpu < 0 ? task_cpu_of(p) : cpu;
			if ((pc->flags & PC_LIMITED) && group_throttled(p))
				st.flags = ST_THROTTLED;
			// Usually the task has no stamp; a re-stamp corrects the
			// counter of the CPU it was counted on.
			if (bpf_map_update_elem(&start, &pid, &st, BPF_NOEXIST)) {
				old = bpf_map_lookup_elem(&start, &pid);
				if (old && old->cg)
					add_waiting(old->cpu, -1);
				if (bpf_map_update_elem(&start, &pid, &st, BPF_ANY)) {
					bpf_map_delete_elem(&start, &pid);
					return 0;
				}
			}
			add_waiting(st.cpu, 1);
			return 0;
		}
	}
	bpf_map_update_elem(&start, &pid, &st, BPF_ANY);
	return 0;
}

static __always_inline int wakeup(struct task_struct *p, __u32 pid)
{
	return enqueue(p, pid, -1, bpf_ktime_get_ns(), attribution && pods_measured());
}

// offender_of fills o with what t is; st caches the cgroup of a measured
// runner.
static __always_inline void offender_of(struct task_struct *t, struct cpu_state *st, struct offender *o)
{
	__u32 flags;

	o->id = 0;
	o->pad = 0;
	if (st->cur_cg && st->cur == (__u64)t) {
		o->class = OFF_TASK;
		o->id = st->cur_cg;
		return;
	}
	__builtin_memset(o->comm, 0, sizeof(o->comm));
	if (!BPF_CORE_READ(t, pid)) {
		o->class = OFF_IDLE;
		return;
	}
	flags = BPF_CORE_READ(t, flags);
	if (flags & PF_KTHREAD) {
		o->class = OFF_KTHREAD;
		bpf_probe_read_kernel_str(o->comm, sizeof(o->comm), &t->comm);
		return;
	}
	o->class = OFF_TASK;
	o->id = cpu_cgroup_id(t);
}

// cpu_switch keeps this CPU's runner intervals: prev ran [since, now]. The
// interval goes into the ring only while a measured task waits here (or is
// the one switching in: next_cg, its cgroup, is non-zero).
static __always_inline struct cpu_state *cpu_switch(struct task_struct *prev, __u64 now, __u64 next_cg, __u64 next)
{
	__u32 zero = 0, h;
	struct cpu_state *st;
	struct interval *iv;
	__s64 *w;

	st = bpf_map_lookup_elem(&cpu_states, &zero);
	if (!st)
		return NULL;
	w = bpf_map_lookup_elem(&waiting, &zero);
	if (st->since && (next_cg || (w && *w > 0))) {
		h = st->head & (RING - 1);
		iv = &st->ring[h];
		iv->start = st->since;
		iv->end = now;
		offender_of(prev, st, &iv->off);
		st->head = h + 1;
	}
	st->since = now;
	st->cur_cg = next_cg;
	st->cur = next;
	return st;
}

// charge adds ns (and waits) to (victim, offender) or, when attr is full,
// to the victim's entry in others.
static __always_inline void charge(struct attr_key *k, __u64 ns, __u64 waits)
{
	struct charged zero = {}, *c;
	struct victim_key vk = {};

	if (!ns && !waits)
		return;
	c = bpf_map_lookup_elem(&attr, k);
	if (!c) {
		bpf_map_update_elem(&attr, k, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&attr, k);
	}
	if (c) { // this CPU's value: programs on one CPU do not nest
		c->ns += ns;
		c->waits += waits;
		return;
	}
	vk.cg = k->victim;
	vk.gen = k->gen;
	c = bpf_map_lookup_elem(&others, &vk);
	if (!c) {
		bpf_map_update_elem(&others, &vk, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&others, &vk);
		if (!c)
			return;
	}
	__sync_fetch_and_add(&c->ns, ns);
	if (waits)
		__sync_fetch_and_add(&c->waits, waits);
}

// attribute splits a measured task's wait [s->ts, now] over this CPU's
// runner intervals, newest first.
static __always_inline void attribute(struct stamp *s, __u64 now, struct cpu_state *st)
{
	struct attr_key k = {};
	struct interval *iv;
	__u64 left, lo, ov, waits = 1;
	__u32 zero = 0, i, head, *g;

	g = bpf_map_lookup_elem(&gen, &zero);
	k.victim = s->cg;
	k.gen = g ? *g & 1 : 0;
	left = now - s->ts;
	if (s->flags & ST_THROTTLED) {
		k.off.class = OFF_THROTTLED;
		charge(&k, left, 1);
		return;
	}
	if (st) {
		head = st->head;
		for (i = 0; i < RING && left; i++) {
			iv = &st->ring[(head - 1 - i) & (RING - 1)];
			if (iv->end <= s->ts || iv->end > now)
				break; // before the wait began, or stale
			lo = iv->start > s->ts ? iv->start : s->ts;
			ov = iv->end - lo;
			if (ov > left)
				ov = left;
			k.off = iv->off;
			charge(&k, ov, waits);
			waits = 0;
			left -= ov;
			if (iv->start <= s->ts)
				break;
		}
	}
	__builtin_memset(&k.off, 0, sizeof(k.off)); // OFF_UNKNOWN
	charge(&k, left, waits);
}

// on_switch re-queues a preempted prev (still TASK_RUNNING) and records how
// long next waited (and, with attribution, behind what).
static __always_inline int on_switch(struct task_struct *prev, bool prev_runnable, __u32 prev_pid,
				     struct task_struct *next, __u32 pid)
{
	__u64 now = bpf_ktime_get_ns();
	struct cpu_state *cs = NULL;
	struct stamp *tsp, s = {};
	struct pod_cg *pc = NULL;
	bool attr = false;
	__s64 delta;

	if (attribution)
		attr = pods_measured();
	tsp = bpf_map_lookup_elem(&start, &pid);
	if (tsp)
		s = *tsp;
	if (attr)
		cs = cpu_switch(prev, now, s.cg, (__u64)next);
	if (prev_runnable)
		enqueue(prev, prev_pid, bpf_get_smp_processor_id(), now, attr);

	if (!tsp)
		return 0;
	bpf_map_delete_elem(&start, &pid);
	if (s.cg)
		add_waiting(s.cpu, -1);
	delta = now - s.ts;
	if (delta < 0)
		return 0;

	record(&hists, &maxes, delta);
	if (attr) {
		if (s.cg) // the stamp's cgroup was measured at enqueue
			pc = bpf_map_lookup_elem(&pod_cgroups, &s.cg);
	} else {
		pc = measured_pod(next);
	}
	if (pc) {
		record(&pod_hists, &pod_maxes, delta);
		record_pod(pc, delta);
	}
	if (attr && s.cg && delta > 0)
		attribute(&s, now, cs);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(ltb_wakeup, struct task_struct *p)
{
	return wakeup(p, p->pid);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(ltb_wakeup_new, struct task_struct *p)
{
	return wakeup(p, p->pid);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(ltb_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch(prev, task_state_btf(prev) == TASK_RUNNING, prev->pid, next, next->pid);
}

SEC("raw_tp/sched_wakeup")
int BPF_PROG(ltr_wakeup, struct task_struct *p)
{
	return wakeup(p, BPF_CORE_READ(p, pid));
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(ltr_wakeup_new, struct task_struct *p)
{
	return wakeup(p, BPF_CORE_READ(p, pid));
}

SEC("raw_tp/sched_switch")
int BPF_PROG(ltr_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	bool runnable = task_state(prev) == TASK_RUNNING;

	return on_switch(prev, runnable, runnable ? BPF_CORE_READ(prev, pid) : 0, next, BPF_CORE_READ(next, pid));
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
