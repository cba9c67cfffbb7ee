#!/usr/bin/env bash
# autogroup.sh: a cron job's session against a many-threaded server: the
# server in one session and a gzip hog in another, with
# kernel.sched_autogroup_enabled=1; then the same after the gateway profile
# (autogroup Disabled) is applied through the agent.
# Floor: the server alone, no hog, the machine's own tuning.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

REQS=${AG_REQS:-10000}
RATE=${AG_RATE:-1200}
SERVICE=${AG_SERVICE_US:-1000}
WORKERS=${AG_WORKERS:-16}
HOGS=${AG_HOGS:-$((2 * $(nproc)))}
AUTOGROUP=/proc/sys/kernel/sched_autogroup_enabled
args=(-n "$REQS" -r "$RATE" -s "$SERVICE" -w "$WORKERS" -T 30)

bench_run() { run_workload "$2" "${args[@]}"; }
bench_load() {
	set_value "$AUTOGROUP" 1
	start_hog "$HOGS"
}
autogroup_off() { [ "$(cat $AUTOGROUP)" = 0 ]; }
write_autogroup_off() { fix_set "$AUTOGROUP" 0; }
# bench_fix applies the gateway profile through the agent's one-shot CLI, or
# writes the same sysctl itself (agent_path=fallback).
bench_fix() {
	agent_fix autogroup '{"action":"Apply","profile":"gateway","tuning":{"scheduler":{"autogroup":"Disabled"}}}' \
		autogroup_off write_autogroup_off
	log "applied gateway profile via $AGENT_PATH: autogroup=$(cat $AUTOGROUP)"
	AUTOGROUP_AFTER=$(cat $AUTOGROUP)
}
bench_unfix() { agent_unfix; }

export DURATION_S=$((REQS / RATE + 5))
kernel_lock
run_pairs autogroup
stop_hog
echo "scenario=autogroup agent_path=$AGENT_PATH autogroup_after=$AUTOGROUP_AFTER hogs=$HOGS workers=$WORKERS cmd=$(IFS=_; echo "${args[*]}")" >>"$OUT/results.txt"
