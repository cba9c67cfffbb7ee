#!/usr/bin/env bash
# test.sh (`make test-cluster`): the multi-node end-to-end scenarios on
# hack/cluster/cluster.sh's cluster (a control plane in a netns of its own,
# one emulated VM per node: Debian 6.1 and 6.12, cgroup v2, systemd). Every
# assertion on a node's tuning reads the guest's own kernel (cluster.sh
# ask: the guest reads /proc/sys and hands the value back over its 9p
# share), never a status. The cluster is always torn down, and the host's
# links, addresses, routes and network namespaces must be as before.
#
#   CLUSTER_SCENARIOS=S  the scenarios to run, in order (scenario-NAME.sh; default
#                     "rollout realtime rollback reboot")
#   CLUSTER_NODES=N   the nodes to bring up (default "node-6-1 node-6-12";
#                     make test-node-stack: node-6-12 alone)
#   CLUSTER_KEEP=1    leave the cluster up at the end (tear down: hack/cluster/cluster.sh down)
#   CLUSTER_FIGURES=F append this run's figures to F
#   CLUSTER_LOGS=DIR  copy the logs, timings and timelines to DIR before the teardown
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
C="$HERE/cluster.sh"
STATE="${LATENCYTIER_CLUSTER_STATE:-/var/lib/latencytier-cluster}"
NS="${LATENCYTIER_CLUSTER_NETNS:-latencytier-cluster}"
LABEL=latencytier.io/cluster-e2e
failures=() T0=$SECONDS figures=()

pass() { printf '  PASS %s\n' "$*"; }
fail() { printf '  FAIL %s\n' "$*"; failures+=("$*"); }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
must() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; exit 1; fi; }
say() { printf '\n== %s\n' "$*"; }
k() { "$C" kubectl "$@"; }
ask() { "$C" ask "$1" "$2"; }
figure() { figures+=("$1=$2"); echo "  ($1: $2)"; }
wait_until() {   # SECONDS COMMAND...
  local secs=$1 t=$SECONDS; shift
  until "$@" >/dev/null 2>&1; do ((SECONDS - t < secs)) || return 1; sleep 2; done
}

# host_state: what the cluster must leave as it found it (the host's own
# network namespace, the list of namespaces, our mounts).
# Our own netns and mounts are left out, so that a CLUSTER_REUSE run, begun
# with the cluster up, compares the same things; that they are gone after
# down is checked apart.
host_state() {
  ip -o link show | awk -F': ' '{print $2}' | sort
  ip -o addr show | awk '{print $2, $4}' | sort
  ip route show table all | sort
  ip netns list | awk '{print $1}' | { grep -vx "$NS" || true; } | sort
}
ours_gone() {
  ! ip netns list | awk '{print $1}' | grep -qx "$NS" &&
    ! findmnt -rn -o TARGET | grep -qE "^($STATE|/run/netns/$NS)(/|$)" && [[ ! -e $STATE ]]
}

finish() {
  local rc=$?
  trap '' INT TERM
  set +e
  if ((${#failures[@]})) && [[ -f "$STATE/log/manager.log" ]]; then
    echo "  (the manager's log, last 30 lines:)"; tail -30 "$STATE/log/manager.log" | cut -c1-400 | sed 's/^/    /'
  fi
  if [[ -n "${CLUSTER_LOGS:-}" && -d "$STATE" ]]; then   # keep the logs, timings and timelines
    mkdir -p "$CLUSTER_LOGS" && cp -r "$STATE/log" "$STATE"/*.txt "$STATE/timing" "$CLUSTER_LOGS/" 2>/dev/null
    for n in "$STATE"/nodes/*/; do
      cp "$n/timing" "$CLUSTER_LOGS/timing.$(basename "$n")" 2>/dev/null
      cp "$n/boots" "$CLUSTER_LOGS/boots.$(basename "$n")" 2>/dev/null
      cp "$n/console.log" "$CLUSTER_LOGS/console.$(basename "$n").log" 2>/dev/null
    done
  fi
  if [[ "${CLUSTER_KEEP:-}" != 1 ]]; then
    "$C" down >/dev/null 2>&1 || fail "cluster.sh down"
    local after; after=$(host_state)
    if [[ "$after" == "$HOST_BEFORE" ]]; then pass "host links, addresses, routes, netns, mounts as before"
    else fail "host state differs after down: $(diff <(echo "$HOST_BEFORE") <(echo "$after") | tr '\n' ' ')"; fi
    if ours_gone; then pass "netns $NS, its mounts and $STATE gone"; else fail "netns $NS, a mount of ours or $STATE left after down"; fi
    pgrep -f "mount_tag=share" -a | grep -F "$STATE/" && fail "a VM of ours still runs"
    pgrep -af "cluster.sh supervise" && fail "a VM supervisor still runs"
    pgrep -af "$STATE/bin/latencytier manager" && fail "the manager process still runs"
  fi
  figure total_s $((SECONDS - T0))
  [[ -n "${CLUSTER_FIGURES:-}" ]] && echo "$(date -u +%FT%TZ) ${figures[*]} failures=${#failures[@]}" >>"$CLUSTER_FIGURES"
  echo
  if ((${#failures[@]})); then
    echo "test-cluster: ${#failures[@]} failure(s) in $((SECONDS - T0))s:"; printf '  - %s\n' "${failures[@]}"; exit 1
  fi
  ((rc == 0)) || { echo "test-cluster: aborted (exit $rc)"; exit "$rc"; }
  echo "test-cluster: all checks passed in $((SECONDS - T0))s"
}

[[ $(id -u) -eq 0 ]] || { echo "test-cluster needs root (netns, taps, qemu)" >&2; exit 1; }
# the containerd the nodes must run: hack/node-runtime.sh's pin
CONTAINERD_WANT=$("$HERE/../node-runtime.sh" --versions | sed -n 's/^containerd \([^,]*\),.*/\1/p')
# CLUSTER_REUSE=1: run on the cluster already up (with CLUSTER_KEEP=1, to iterate)
[[ "${CLUSTER_REUSE:-}" == 1 ]] || "$C" down >/dev/null 2>&1 || true   # a cluster left by an interrupted run
HOST_BEFORE=$(host_state)
trap finish EXIT
# a timeout's TERM (make test-node-stack) or ^C: a failure, then the teardown
trap 'fail "interrupted (TERM or INT)"; exit 143' TERM INT

read -r -a NODES <<<"${CLUSTER_NODES:-node-6-1 node-6-12}"
say "Cluster: control plane in netns $NS, nodes ${NODES[*]} (node-6-1: Debian 6.1, node-6-12: Debian 6.12)"
t=$SECONDS
must "cluster up, ${NODES[*]} Ready" "$C" up "${NODES[@]}"
figure up_s $((SECONDS - t))
t=$SECONDS
must "latencytier deployed (charts/latencytier), the manager ready as a process in the netns" "$C" deploy
figure deploy_s $((SECONDS - t))
check "the manager runs outside the guests (its Deployment at 0 replicas, no manager pod)" bash -c \
  "[ \"\$('$C' kubectl -n latencytier-system get deploy latencytier-manager -o jsonpath='{.spec.replicas}')\" = 0 ] &&
   [ -z \"\$('$C' kubectl -n latencytier-system get pods -l app.kubernetes.io/component=manager -o name)\" ]"
for n in "${NODES[@]}"; do
  check "$n runs its own kernel: $(ask "$n" /proc/sys/kernel/osrelease)" true
  cg=$(ask "$n" /sys/fs/cgroup/cgroup.controllers)
  check "$n is on cgroup v2 (controllers: $cg)" grep -qw cpu <<<"$cg"
  # the guest's crictl version and NRI socket, written by guest-node.sh
  rt=$(cat "$STATE/nodes/$n/runtime.txt" 2>/dev/null || true)
  echo "  ($n: $(tr '\n' ' ' <<<"$rt"))"
  check "$n runs containerd $CONTAINERD_WANT with NRI's socket (guest crictl version)" \
    bash -c '[[ "$1" == *"RuntimeVersion:  $2"* && "$1" == *"NRI socket"* ]]' _ "$rt" "$CONTAINERD_WANT"
  check "$n's kubelet uses the systemd cgroup driver (kubepods.slice: $(ask "$n" /sys/fs/cgroup/kubepods.slice/cgroup.type))" \
    bash -c '! [[ "$1" == error* ]]' _ "$(ask "$n" /sys/fs/cgroup/kubepods.slice/cgroup.type)"
done

# The scenarios, each in its own file (scenario-NAME.sh), sourced in this
# order; CLUSTER_SCENARIOS picks some (e.g. "reboot" to iterate on one with
# CLUSTER_REUSE=1 CLUSTER_KEEP=1). The sysctl scenarios write vm.swappiness,
# on the built-in allowlist and 60 on both guests.
SYSCTL=/proc/sys/vm/swappiness
# canary_profile NAME WINDOW: the sysctl scenarios' profile, vm.swappiness
# 10 on the labelled nodes, rolled out canary first, judged after WINDOW.
canary_profile() {
  cat <<YAML
apiVersion: tuning.latencytier.io/v1alpha1
kind: LatencyProfile
metadata:
  name: $1
spec:
  nodeSelector:
    matchLabels: {$LABEL: ""}
  sysctls:
  - {name: vm.swappiness, value: "10"}
  measurement:
    interval: 10s
    namespaceSelector:         # a rollout's evidence comes only from these namespaces
      matchLabels: {kubernetes.io/metadata.name: default}
  rollout:
    canary: {nodes: 1}
    maxInFlight: 1
    verificationWindow: $2
    maxP99Regression: "4"
    minSamples: 50
    inconclusiveTimeout: 5m
YAML
}
for s in ${CLUSTER_SCENARIOS:-rollout realtime rollback reboot}; do
  [[ -f "$HERE/scenario-$s.sh" ]] || { fail "no scenario $s (hack/cluster/scenario-$s.sh)"; continue; }
  # shellcheck disable=SC1090
  source "$HERE/scenario-$s.sh"
done
