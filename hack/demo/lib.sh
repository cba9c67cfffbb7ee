# lib.sh: helpers shared by hack/demo.sh and hack/e2e.sh (sourced, not run).
# They read the local cluster's state through kubectl and this machine's
# kernel through /proc and /sys.

ROOT="${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
LC="$ROOT/hack/local-cluster"
NODE="$(hostname | tr '[:upper:]' '[:lower:]')"
PROFILE_LABEL="tier.latencytier.io/gateway"
KERNEL_LOCK=/run/latencytier-kernel-test.lock # internal/kernellock.Path

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
k() { "$LC" kubectl "$@"; }

# lock_kernel takes the host-wide lock the kernel-changing Go tests take, so a
# profile applied here never races them; released when the shell exits.
lock_kernel() {
  exec {KERNEL_LOCK_FD}>>"$KERNEL_LOCK"
  flock "$KERNEL_LOCK_FD"
}
unlock_kernel() { [[ -n "${KERNEL_LOCK_FD:-}" ]] && exec {KERNEL_LOCK_FD}>&- || true; KERNEL_LOCK_FD=; }

# pod_cgroup POD prints the pod's cpu cgroup directory (v1 cpu controller or
# v2 unified, cgroupfs driver).
pod_cgroup() {
  local uid base
  uid=$(k get pod "$1" -o jsonpath='{.metadata.uid}')
  for base in /sys/fs/cgroup/cpu,cpuacct/kubepods /sys/fs/cgroup/cpu/kubepods /sys/fs/cgroup/kubepods; do
    [[ -d "$base" ]] || continue
    find "$base" -maxdepth 2 -type d -name "pod$uid" -print -quit
    return
  done
}

# quota_of DIR prints the CFS quota of a cgroup (v1 cfs_quota_us, v2 cpu.max).
quota_of() {
  if [[ -f "$1/cpu.cfs_quota_us" ]]; then cat "$1/cpu.cfs_quota_us"; else awk '{print $1}' "$1/cpu.max"; fi
}

# pod_quotas POD prints "pod=<quota> container=<quota>" for its app container.
pod_quotas() {
  local dir cid
  dir=$(pod_cgroup "$1")
  [[ -n "$dir" ]] || { echo "pod=? container=?"; return; }
  cid=$(k get pod "$1" -o jsonpath='{.status.containerStatuses[0].containerID}')
  cid=${cid#*://}
  echo "pod=$(quota_of "$dir") container=$(quota_of "$dir/$cid")"
}

# movable_irqs lists IRQs whose affinity can be read, "irq=cpus" per line.
irq_affinities() {
  local d
  for d in /proc/irq/[0-9]*; do
    [[ -r "$d/smp_affinity_list" ]] && printf '%s=%s ' "${d##*/}" "$(cat "$d/smp_affinity_list")"
  done
  echo
}

# kernel_snapshot prints every value the demo profile touches, one per line,
# so two snapshots compare with diff.
kernel_snapshot() {
  local f
  for f in sched_autogroup_enabled numa_balancing sched_rt_runtime_us; do
    [[ -r /proc/sys/kernel/$f ]] && echo "kernel.$f=$(cat /proc/sys/kernel/$f)"
  done
  echo "irq.default_smp_affinity=$(cat /proc/irq/default_smp_affinity)"
  echo "irq.affinity=$(irq_affinities)"
}

show_values() {
  say "$1"
  kernel_snapshot | sed 's/^/  /'
  local p
  for p in latency-workload plain-workload; do
    printf '  %-17s cfs quota: %s\n' "$p" "$(pod_quotas "$p")"
  done
}

# ln_condition TYPE prints the status of the node's LatencyNode condition.
ln_condition() {
  k get latencynode "$NODE" -o jsonpath="{.status.conditions[?(@.type==\"$1\")].status}" 2>/dev/null
}
ln_condition_is() { [[ "$(ln_condition "$1")" == "$2" ]]; }

# wait_until SECONDS DESCRIPTION COMMAND...: polls; returns 1 on timeout.
wait_until() {
  # A deadline, not a count of tries: on a loaded machine one kubectl call
  # takes seconds, and 240 tries took eight minutes.
  local secs=$1 what=$2 end=$((SECONDS + $1)); shift 2
  while ((SECONDS < end)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 1
  done
  "$@" >/dev/null 2>&1 && return 0
  echo "timed out after ${secs}s waiting for $what" >&2
  return 1
}

applied() { [[ "$(ln_condition Applied)" == True ]]; }
agent_ready() {
  [[ "$(k -n latencytier-system get pods -l app.kubernetes.io/component=agent \
    --field-selector "spec.nodeName=$NODE" -o jsonpath='{.items[*].status.phase}' 2>/dev/null)" == Running ]]
}
manager_present() { k -n latencytier-system get deploy latencytier-manager >/dev/null 2>&1; }
# writes_total prints "<latencynodes> <latencyprofiles>": the API server's
# count of write requests (create, update, patch, apply, delete; any client,
# any subresource, accepted or not) to each since it started. A no-op patch
# counts too: it is still a needless write.
writes_total() {
  k get --raw /metrics | awk '
    index($0, "apiserver_request_total{") == 1 && $0 ~ /verb="(POST|PUT|PATCH|APPLY|DELETE)"/ {
      if (index($0, "resource=\"latencynodes\"")) ln += $NF
      if (index($0, "resource=\"latencyprofiles\"")) lp += $NF
    }
    END { printf "%d %d\n", ln, lp }'
}
# writes_over SECONDS prints the writes to each over the next SECONDS, as
# writes_total; "? ?" when the metrics cannot be read.
writes_over() {
  local a b a0 a1 b0 b1
  { a=$(writes_total) && sleep "$1" && b=$(writes_total); } || { echo "? ?"; return 0; }
  read -r a0 a1 <<<"$a"
  read -r b0 b1 <<<"$b"
  echo "$((b0 - a0)) $((b1 - a1))"
}
# at_most N MAX: N is a count (not "?") of at most MAX.
at_most() { [[ "$1" =~ ^[0-9]+$ ]] && (($1 <= $2)); }
# go_dur_ratio_at_least A B R: Go durations ("41µs", "1.2ms") with B >= R*A.
go_dur_ratio_at_least() {
  awk -v a="$1" -v b="$2" -v r="$3" 'function ns(d,  v, u) {
      if (d ~ /h|m[0-9]/ && d !~ /ms$/) return -1
      v = d + 0; u = d; sub(/^[0-9.]+/, "", u)
      if (u == "ns") return v; if (u == "µs" || u == "us") return v * 1e3
      if (u == "ms") return v * 1e6; if (u == "s") return v * 1e9; return -1 }
    BEGIN { x = ns(a); y = ns(b); exit !(x > 0 && y >= r * x) }'
}
