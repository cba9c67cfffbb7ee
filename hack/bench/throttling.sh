#!/usr/bin/env bash
# throttling.sh: field notes 001/002. The workload runs in a kubelet-shaped
# pod cgroup (cgroupfs driver, cgroup v1 cpu controller:
# kubepods-bench/burstable/pod<uid>/<container id>) whose CFS quota, at pod
# and container level as kubelet sets it, covers the workload's average CPU
# but not its bursts; then the same after the agent's cpuquota code removes
# the quota of the opted-in pod. Reports p99 and nr_throttled for both.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

REQS=${TH_REQS:-20000}
RATE=${TH_RATE:-2000}
SERVICE=${TH_SERVICE_US:-100}
BURST=${TH_BURST:-100}
WORKERS=${TH_WORKERS:-8}
QUOTA_US=${TH_QUOTA_US:-40000}
PERIOD_US=100000
CPU_ROOT=$(awk '$3=="cgroup" && $4 ~ /(^|,)cpu(,|$)/ {print $2; exit}' /proc/mounts)
KUBEPODS=kubepods-bench
POD_UID=5e1f0c2a-7b3d-4c9e-a1f2-0000000be4c7
CID=be4c7000000000000000000000000000000000000000000000000000000000aa
POD=$CPU_ROOT/$KUBEPODS/burstable/pod$POD_UID
CTR=$POD/$CID

[ -n "$CPU_ROOT" ] || { log "no cgroup v1 cpu controller mounted: skipping"; exit 0; }

make_pod() {
	undo_push "rmdir '$CTR' '$POD' '$CPU_ROOT/$KUBEPODS/burstable' '$CPU_ROOT/$KUBEPODS' 2>/dev/null || true"
	mkdir -p "$CTR"
	# Like kubelet's kubepods cgroup on a dedicated node, the pod tree
	# outweighs everything else on this shared, busy VM, so what limits the
	# workload is its quota, not other people's builds.
	echo 262144 >"$CPU_ROOT/$KUBEPODS/cpu.shares"
	for d in "$POD" "$CTR"; do
		echo "$PERIOD_US" >"$d/cpu.cfs_period_us"
	done
	echo "$QUOTA_US" >"$POD/cpu.cfs_quota_us"
	echo "$QUOTA_US" >"$CTR/cpu.cfs_quota_us"
}

# throttled DIR: "periods throttled throttled_ms" from cpu.stat.
throttled() {
	awk '/^nr_periods/ {p=$2} /^nr_throttled/ {t=$2} /^throttled_time/ {ns=$2}
	     END {printf "%d %d %.0f", p, t, ns/1e6}' "$1/cpu.stat"
}

# remove_quota removes the pod's quota through the agent's cpuquota code
# (quotafix: podcgroup.Find + cpuquota.Knobs + apply.Engine, journaled).
remove_quota() {
	undo_push "'$OUT/quotafix' revert >>'$OUT/logs/throttling-agent.log' 2>&1"
	"$OUT/quotafix" apply -kubepods "$KUBEPODS" -uid "$POD_UID" >>"$OUT/logs/throttling-agent.log" 2>&1
	log "quota after agent: pod=$(cat "$POD/cpu.cfs_quota_us") container=$(cat "$CTR/cpu.cfs_quota_us")"
}

# run_phase LABEL: one workload run in the container cgroup, with the
# container's cpu.stat delta appended to the result line.
run_phase() {
	local label=$1 b a line
	b=($(throttled "$CTR"))
	line=$(WORKLOAD_CGROUP=$CTR run_workload "$label" "${args[@]}")
	a=($(throttled "$CTR"))
	sed -i '$d' "$OUT/results.txt"
	line+=" nr_periods=$((a[0] - b[0])) nr_throttled=$((a[1] - b[1])) throttled_ms=$((a[2] - b[2]))"
	echo "$line" >>"$OUT/results.txt"
	echo "$line"
}

export DURATION_S=$((REQS / RATE + 5))
kernel_lock
make_pod
args=(-n "$REQS" -r "$RATE" -s "$SERVICE" -b "$BURST" -w "$WORKERS" -T 30)
run_phase throttling-before
remove_quota
run_phase throttling-after
echo "scenario=throttling agent_path=cpuquota-code cmd=$(IFS=_; echo "${args[*]}") quota_us=$QUOTA_US period_us=$PERIOD_US cgroup=${POD#$CPU_ROOT/}" >>"$OUT/results.txt"
