#!/usr/bin/env bash
# irq.sh: device interrupts on the latency CPU, as far as a 2-vCPU VM allows. The
# workload runs pinned to CPU 1 (the "isolated" CPU) while a disk reader on
# CPU 0 generates interrupts (O_DIRECT reads: one virtio-blk completion IRQ
# per request; loopback traffic raises softirqs on the sender, no device
# IRQ, and this VM may send nothing else). First with IRQ affinity left
# alone, then after the agent steers every movable IRQ to CPU 0 (profile:
# cpus.reserved=0, cpus.isolated=1, irq.affinity=Reserved). Each run records
# how many device interrupts CPU 1 took. Floor: the workload alone, no disk
# reader, IRQ affinity as the machine has it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

REQS=${IRQ_REQS:-20000}
RATE=${IRQ_RATE:-2000}
SERVICE=${IRQ_SERVICE_US:-50}
WORKERS=${IRQ_WORKERS:-4}
DATA=$OUT/irq-data.bin

# cpu1_irqs: device (numbered) interrupts CPU 1 has taken so far.
cpu1_irqs() { awk '$1 ~ /^[0-9]+:$/ {s += $3} END {print "cpu1_device_irqs=" s+0}' /proc/interrupts; }

args=(-n "$REQS" -r "$RATE" -s "$SERVICE" -w "$WORKERS" -c 1 -T 30)
bench_run() { COUNTERS=cpu1_irqs run_workload "$2" "${args[@]}"; }

# bench_load: a file on the real disk (not tmpfs), read with O_DIRECT from
# CPU 0 so every 4k read is a block request and an interrupt.
bench_load() {
	[ -s "$DATA" ] || dd if=/dev/zero of="$DATA" bs=1M count=64 status=none conv=fsync
	setsid taskset -c 0 sh -c 'while :; do dd if="$1" of=/dev/null bs=4k iflag=direct status=none; done' sh "$DATA" &
	DISK_PID=$!
	undo_push "kill -- -$DISK_PID 2>/dev/null || true"
	sleep 1
}

# bench_fix applies the profile through the agent, or writes the affinity of
# every movable IRQ itself (agent_path=fallback). The agent reports the
# immovable IRQs (EIO) as Immovable; the fallback lists them in its log.
some_irq_on_cpu0() { grep -qx 0 /proc/irq/[0-9]*/smp_affinity_list; }
write_affinities() {
	local f
	for f in /proc/irq/[0-9]*/smp_affinity_list; do
		fix_set "$f" 0 || echo "immovable ${f%/smp_affinity_list}" >>"$AGENT_LOG"
	done
}
bench_fix() {
	agent_fix irq '{"action":"Apply","profile":"isolated","tuning":{"cpus":{"reserved":"0","isolated":"1"},"irq":{"affinity":"Reserved"}}}' \
		some_irq_on_cpu0 write_affinities
	EFFECTIVE_AFTER=$(for i in /proc/irq/[0-9]*; do printf '%s:%s,' "${i#/proc/irq/}" "$(cat "$i/effective_affinity_list" 2>/dev/null)"; done)
}
bench_unfix() { agent_unfix; }

export DURATION_S=$((REQS / RATE + 5))
kernel_lock
run_pairs irq
echo "scenario=irq agent_path=$AGENT_PATH cmd=$(IFS=_; echo "${args[*]}") effective_after=$EFFECTIVE_AFTER" >>"$OUT/results.txt"
