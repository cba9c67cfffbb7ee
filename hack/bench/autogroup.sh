#!/usr/bin/env bash
# autogroup.sh: field note 004. A multi-threaded server in one session and a
# gzip hog in another, with kernel.sched_autogroup_enabled=1; then the same
# after the gateway profile (autogroup Disabled) is applied through the agent.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

REQS=${AG_REQS:-10000}
RATE=${AG_RATE:-1200}
SERVICE=${AG_SERVICE_US:-1000}
WORKERS=${AG_WORKERS:-16}
HOGS=${AG_HOGS:-$((2 * $(nproc)))}
AUTOGROUP=/proc/sys/kernel/sched_autogroup_enabled
SPEC=$OUT/gateway-spec.json

# apply_gateway_profile applies the profile through the agent's one-shot CLI
# when it exists; otherwise it writes the same sysctl itself and says so in
# the results (agent_path=fallback).
apply_gateway_profile() {
	cat >"$SPEC" <<'EOF'
{"action":"Apply","profile":"gateway","tuning":{"scheduler":{"autogroup":"Disabled"}}}
EOF
	if agent_has apply node-spec; then
		undo_push "'$LT' agent revert >>'$OUT/logs/autogroup-agent.log' 2>&1"
		"$LT" agent apply --node-spec "$SPEC" >>"$OUT/logs/autogroup-agent.log" 2>&1
		AGENT_PATH=agent
	else
		log "AGENT PATH NOT AVAILABLE: writing $AUTOGROUP directly"
		echo 0 >"$AUTOGROUP"
		AGENT_PATH=fallback
	fi
	log "applied gateway profile via $AGENT_PATH: autogroup=$(cat $AUTOGROUP)"
}

export DURATION_S=$((REQS / RATE + 5))
kernel_lock
set_value "$AUTOGROUP" 1
start_hog "$HOGS"
args=(-n "$REQS" -r "$RATE" -s "$SERVICE" -w "$WORKERS" -T 30)
before=$(run_workload autogroup-before "${args[@]}")
apply_gateway_profile
after=$(run_workload autogroup-after "${args[@]}")
stop_hog
echo "scenario=autogroup agent_path=$AGENT_PATH autogroup_after=$(cat $AUTOGROUP) hogs=$HOGS workers=$WORKERS cmd=$(IFS=_; echo "${args[*]}")" >>"$OUT/results.txt"
echo "$before"
echo "$after"
