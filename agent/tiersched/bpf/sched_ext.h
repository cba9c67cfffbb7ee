// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// The parts of the kernel's sched_ext interface tier.bpf.c uses, declared
// here because the committed vmlinux.h (agent/measure/bpf, dumped from a
// kernel without CONFIG_SCHED_CLASS_EXT) has none of them. Written for
// latencytier from the kernel's documented ABI (Documentation/scheduler/
// sched-ext.rst, kernel/sched/ext*.h); nothing is copied from scx or the
// kernel's tools.
//
// Keep it apart from vmlinux.h: a vmlinux.h regenerated on a sched_ext
// kernel would declare these types too, and the compiler then says so.
#ifndef LATENCYTIER_SCHED_EXT_H
#define LATENCYTIER_SCHED_EXT_H

// Built-in dispatch queues (enum scx_dsq_id_flags): SCX_DSQ_FLAG_BUILTIN is
// bit 63, GLOBAL is 1 and LOCAL 2 under it. ABI since 6.12.
#define SCX_DSQ_FLAG_BUILTIN (1ULL << 63)
#define SCX_DSQ_GLOBAL (SCX_DSQ_FLAG_BUILTIN | 1)
#define SCX_DSQ_LOCAL (SCX_DSQ_FLAG_BUILTIN | 2)

// enum scx_enq_flags: PREEMPT zeroes the slice of the task running on the
// target CPU and implies SCX_ENQ_HEAD.
#define SCX_ENQ_PREEMPT (1ULL << 32)

// enum scx_exit_kind. CO-RE matches a field of enum type only with an enum,
// so kind keeps the kernel's enum type name.
enum scx_exit_kind {
	SCX_EXIT_NONE = 0,
	SCX_EXIT_DONE = 1,
	SCX_EXIT_UNREG = 64,
	SCX_EXIT_UNREG_BPF = 65,
	SCX_EXIT_UNREG_KERN = 66,
	SCX_EXIT_SYSRQ = 67,
	SCX_EXIT_ERROR = 1024,
	SCX_EXIT_ERROR_BPF = 1025,
	SCX_EXIT_ERROR_STALL = 1026,
};

// What ops.exit is told; CO-RE finds each field's offset in the running
// kernel (a flags member was added before reason in later kernels).
struct scx_exit_info {
	enum scx_exit_kind kind;
	s64 exit_code;
	const char *reason;
	char *msg;
} __attribute__((preserve_access_index));

// Only the members this scheduler sets: the loader (cilium/ebpf) copies
// struct_ops members into the kernel's layout by name, so order and absent
// members do not matter. The type name must be sched_ext_ops: the loader
// looks up bpf_struct_ops_ + this name in the kernel's BTF.
struct sched_ext_ops {
	s32 (*select_cpu)(struct task_struct *p, s32 prev_cpu, u64 wake_flags);
	void (*enqueue)(struct task_struct *p, u64 enq_flags);
	void (*running)(struct task_struct *p);
	void (*stopping)(struct task_struct *p, bool runnable);
	void (*cpu_online)(s32 cpu);
	void (*cpu_offline)(s32 cpu);
	void (*exit)(struct scx_exit_info *info);
	u64 flags;
	u32 timeout_ms;
	char name[128];
};

// kfuncs. Only those whose prototype is the same on every kernel accepted
// (6.13+): cilium/ebpf looks kfuncs up by exact name and refuses one whose
// prototype differs. Inserting into a DSQ is scx_bpf_dsq_insert (6.13+,
// void) or scx_bpf_dsq_insert___v2 (6.19+, bool; the kernel's own symbol
// name). The program is built twice, once with each (TIER_INSERT_V2), and
// the loader picks the object whose insert the kernel has: an object
// naming both cannot load on 6.19+, where cilium/ebpf v0.22.0's lookup of
// scx_bpf_dsq_insert also returns scx_bpf_dsq_insert___v2_impl ("multiple
// matching types"; seen on Debian's 7.3.4), even for a weak reference.
extern s32 scx_bpf_select_cpu_dfl(struct task_struct *p, s32 prev_cpu, u64 wake_flags, bool *is_idle) __ksym;
extern s32 scx_bpf_task_cpu(const struct task_struct *p) __ksym;
#ifdef TIER_INSERT_V2
extern bool scx_bpf_dsq_insert___v2(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags) __ksym;
#define scx_insert scx_bpf_dsq_insert___v2
#else
extern void scx_bpf_dsq_insert(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags) __ksym;
#define scx_insert scx_bpf_dsq_insert
#endif

#endif
