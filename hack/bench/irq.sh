#!/usr/bin/env bash
# irq.sh: field notes 000/001/003, as far as a 2-vCPU VM allows. The
# workload runs pinned to CPU 1 (the "isolated" CPU) while a disk reader on
# CPU 0 generates interrupts (O_DIRECT reads: one virtio-blk completion IRQ
# per request; loopback traffic raises softirqs on the sender, no device
# IRQ, and this VM may send nothing else). First with IRQ affinity left
# alone, then after the agent steers every movable IRQ to CPU 0 (profile:
# cpus.reserved=0, cpus.isolated=1, irq.affinity=Reserved). Each run records
# how many device interrupts CPU 1 took.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

REQS=${IRQ_REQS:-20000}
RATE=${IRQ_RATE:-2000}
SERVICE=${IRQ_SERVICE_US:-50}
WORKERS=${IRQ_WORKERS:-4}
SPEC=$OUT/irq-spec.json
DATA=$OUT/irq-data.bin

# device_irqs CPU: total device (numbered) interrupts CPU has taken.
device_irqs() {
	awk -v col=$(($1 + 2)) '$1 ~ /^[0-9]+:$/ {s += $col} END {print s+0}' /proc/interrupts
}

start_disk_load() {
	# A file on the real disk (not tmpfs), read with O_DIRECT so every 4k
	# read is a block request and an interrupt.
	[ -s "$DATA" ] || dd if=/dev/zero of="$DATA" bs=1M count=64 status=none conv=fsync
	setsid taskset -c 0 sh -c 'while :; do dd if="$1" of=/dev/null bs=4k iflag=direct status=none; done' sh "$DATA" &
	DISK_PID=$!
	undo_push "kill -- -$DISK_PID 2>/dev/null || true"
	sleep 1
}

# steer_irqs applies the profile through the agent, or writes the affinity
# of every movable IRQ itself (agent_path=fallback) when the agent CLI is
# not there. Immovable IRQs (EIO) are listed either way.
steer_irqs() {
	cat >"$SPEC" <<'EOF'
{"action":"Apply","profile":"isolated","tuning":{"cpus":{"reserved":"0","isolated":"1"},"irq":{"affinity":"Reserved"}}}
EOF
	if agent_has apply node-spec; then
		undo_push "'$LT' agent revert >>'$OUT/logs/irq-agent.log' 2>&1"
		"$LT" agent apply --node-spec "$SPEC" >>"$OUT/logs/irq-agent.log" 2>&1 || log "agent apply reported failures (see irq-agent.log)"
		AGENT_PATH=agent
	else
		log "AGENT PATH NOT AVAILABLE: writing /proc/irq/*/smp_affinity_list directly"
		local f
		for f in /proc/irq/[0-9]*/smp_affinity_list; do
			local old; old=$(cat "$f")
			if echo 0 2>/dev/null >"$f"; then
				undo_push "echo '$old' > '$f' 2>/dev/null || true"
			else
				echo "immovable ${f%/smp_affinity_list}" >>"$OUT/logs/irq-agent.log"
			fi
		done
		AGENT_PATH=fallback
	fi
}

run_phase() {
	local label=$1 b a line
	b=$(device_irqs 1)
	line=$(DURATION_S=$((REQS / RATE + 5)) run_workload "$label" "${args[@]}")
	a=$(device_irqs 1)
	sed -i '$d' "$OUT/results.txt"
	line+=" cpu1_device_irqs=$((a - b)) cpu1_irq_per_s=$(((a - b) * RATE / REQS))"
	echo "$line" >>"$OUT/results.txt"
	echo "$line"
}

kernel_lock
start_disk_load
args=(-n "$REQS" -r "$RATE" -s "$SERVICE" -w "$WORKERS" -c 1 -T 30)
run_phase irq-before
steer_irqs
run_phase irq-after
eff=$(for i in /proc/irq/[0-9]*; do printf '%s:%s ' "${i#/proc/irq/}" "$(cat "$i/effective_affinity_list" 2>/dev/null)"; done)
echo "scenario=irq agent_path=$AGENT_PATH cmd=$(IFS=_; echo "${args[*]}") effective_after=${eff// /,}" >>"$OUT/results.txt"
