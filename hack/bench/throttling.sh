#!/usr/bin/env bash
# throttling.sh: a pod frozen by its CFS quota. The workload runs in a kubelet-shaped
# pod cgroup (cgroupfs driver, cgroup v1 cpu controller:
# kubepods-bench/burstable/pod<uid>/<container id>) whose CFS quota, at pod
# and container level as kubelet sets it, covers the workload's average CPU
# but not its bursts; then the same after the agent's cpuquota code removes
# the quota of the opted-in pod. Reports p99 and nr_throttled for both.
# Floor: the same pod cgroup before it has a quota.
# TH_FIX=burst (hack/bench/burst.sh, scenario "burst") keeps the quota and
# sets a CFS burst of TH_BURST_PERCENT of it instead (cpuQuota.policy
# Burst), so "burst" and "throttling" together are no fix / Burst / Remove.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

REQS=${TH_REQS:-20000}
RATE=${TH_RATE:-2000}
SERVICE=${TH_SERVICE_US:-100}
BURST=${TH_BURST:-100}
WORKERS=${TH_WORKERS:-8}
QUOTA_US=${TH_QUOTA_US:-40000}
PERIOD_US=100000
FIX=${TH_FIX:-remove}
SCENARIO=${TH_SCENARIO:-throttling}
BURST_PERCENT=${TH_BURST_PERCENT:-100}
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
}

# throttled: the container's cumulative cpu.stat counters.
throttled() {
	awk '/^nr_periods/ {p=$2} /^nr_throttled/ {t=$2} /^throttled_time/ {ns=$2} /^nr_bursts/ {b=$2} /^burst_time/ {bns=$2}
	     END {printf "nr_periods=%d nr_throttled=%d throttled_ms=%.0f nr_bursts=%d burst_ms=%.0f", p, t, ns/1e6, b, bns/1e6}' "$CTR/cpu.stat"
}

args=(-n "$REQS" -r "$RATE" -s "$SERVICE" -b "$BURST" -w "$WORKERS" -T 30)
bench_run() { WORKLOAD_CGROUP=$CTR COUNTERS=throttled run_workload "$2" "${args[@]}"; }
# The floor runs in the same pod cgroup before it has a quota; bench_load
# then sets the quota at pod and container level, as kubelet writes a limit.
bench_load() {
	echo "$QUOTA_US" >"$POD/cpu.cfs_quota_us"
	echo "$QUOTA_US" >"$CTR/cpu.cfs_quota_us"
	undo_push "bench_unfix || true"
}
# bench_fix removes the pod's quota through the agent's cpuquota code
# (quotafix: podcgroup.Find + cpuquota.Knobs + apply.Engine, journaled);
# bench_unfix reverts it through the same journal.
bench_fix() {
	"$OUT/quotafix" apply -kubepods "$KUBEPODS" -uid "$POD_UID" -policy "$FIX" -percent "$BURST_PERCENT" >>"$OUT/logs/$SCENARIO-agent.log" 2>&1
	log "quota after agent: pod=$(cat "$POD/cpu.cfs_quota_us") container=$(cat "$CTR/cpu.cfs_quota_us") burst: pod=$(cat "$POD/cpu.cfs_burst_us" 2>/dev/null) container=$(cat "$CTR/cpu.cfs_burst_us" 2>/dev/null)"
}
bench_unfix() { "$OUT/quotafix" revert >>"$OUT/logs/$SCENARIO-agent.log" 2>&1; }

export DURATION_S=$((REQS / RATE + 5))
kernel_lock
make_pod
if [ "$FIX" = burst ] && [ ! -e "$CTR/cpu.cfs_burst_us" ]; then
	log "no cpu.cfs_burst_us on this kernel (CFS burst needs 5.14+): skipping $SCENARIO"
	exit 0
fi
run_pairs "$SCENARIO"
extra=""
[ "$FIX" != burst ] || extra=" burst_percent=$BURST_PERCENT"
echo "scenario=$SCENARIO agent_path=cpuquota-code fix=$FIX cmd=$(IFS=_; echo "${args[*]}") quota_us=$QUOTA_US period_us=$PERIOD_US$extra cgroup=${POD#$CPU_ROOT/}" >>"$OUT/results.txt"
