#!/usr/bin/env bash
# e2e.sh (`make test-e2e`): the whole loop on a real single-node cluster on
# this machine (hack/local-cluster), driven through kubectl, asserted against
# this machine's kernel and the pods' real cgroups. The cluster is always torn
# down, pass or fail, and the machine must be as it was before.
#
#   E2E_KEEP=1   leave the cluster up at the end (for debugging)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/hack/demo/lib.sh"
source "$ROOT/hack/demo/checks.sh"
source "$ROOT/hack/demo/load.sh"
source "$ROOT/hack/e2e-prometheus.sh"
PROFILE=e2e
ROLLOUT_PROFILES=(e2e-rollout)
TIMEOUT="${E2E_TIMEOUT:-120}"
failures=()
T0=$SECONDS

finish() {
  local rc=$?
  trap '' INT TERM
  set +e
  end_load
  if [[ "${E2E_KEEP:-}" != 1 ]]; then
    # Revert before teardown if an assertion stopped us with a profile on.
    local p
    for p in "$PROFILE" "${ROLLOUT_PROFILES[@]}"; do
      if k get latencyprofile "$p" >/dev/null 2>&1; then
        k delete latencyprofile "$p" --timeout=60s >/dev/null 2>&1
      fi
    done
  fi
  prom_stop
  if [[ "${E2E_KEEP:-}" != 1 ]]; then
    "$LC" down >/dev/null 2>&1 || fail "hack/local-cluster down"
    diff <(echo "$HOST_BEFORE") <(host_state) >/dev/null && pass "machine state after down equals before up" ||
      fail "machine state after down differs: $(diff <(echo "$HOST_BEFORE") <(host_state) | tr '\n' ' ')"
  fi
  unlock_kernel
  echo
  if ((${#failures[@]})); then
    echo "e2e: ${#failures[@]} failure(s) in $((SECONDS - T0))s:"
    printf '  - %s\n' "${failures[@]}"
    exit 1
  fi
  ((rc == 0)) || { echo "e2e: aborted (exit $rc)"; exit "$rc"; }
  echo "e2e: all checks passed in $((SECONDS - T0))s"
}

# The profile under test: the gateway sample's knobs plus rtRuntime, so every
# kind the issue names (autogroup, rt_runtime, IRQs, quota) is exercised.
# rtRuntime goes above the 950ms default: with RT group scheduling the kernel
# refuses (EINVAL) a global value below what child cgroups already hold.
profile() {
  cat <<EOF
apiVersion: tuning.latencytier.io/v1alpha1
kind: LatencyProfile
metadata:
  name: $PROFILE
spec:
  nodeSelector:
    matchLabels: {$PROFILE_LABEL: ""}
  scheduler:
    autogroup: Disabled
    rtRuntime: ${1:-980ms}
  cpus:
    reserved: "0"
  irq:
    affinity: Reserved
  cpuQuota:
    policy: Remove
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: default}
  measurement:
    interval: 10s
EOF
}

apply_profile() { profile "$@" | k apply -f -; }

# bad_profile NAME SPEC_YAML: a profile that the API server must refuse.
bad_profile() {
  printf 'apiVersion: tuning.latencytier.io/v1alpha1\nkind: LatencyProfile\nmetadata:\n  name: %s\nspec:\n  nodeSelector: {matchLabels: {a: b}}\n%s\n' "$1" "$2"
}

# rejected WANT SPEC: kubectl apply fails and its message names WANT.
rejected() {
  local want=$1 out
  if out=$(bad_profile bad "$2" | k apply -f - 2>&1); then
    k delete latencyprofile bad --ignore-not-found >/dev/null
    echo "    accepted: $2" >&2
    return 1
  fi
  grep -qF -- "$want" <<<"$out" || { echo "    message lacks '$want': $out" >&2; return 1; }
}

sysctl_is() { [[ "$(cat "/proc/sys/kernel/$1")" == "$2" ]]; }
quota_is() { [[ "$(pod_quotas "$1")" == "$2" ]]; }
# agent_pod_field PATH: a field of the agent pod on $NODE (jsonpath under .items[0]).
agent_pod_field() {
  k -n latencytier-system get pods -l app.kubernetes.io/component=agent --field-selector "spec.nodeName=$NODE" \
    -o jsonpath="{.items[0].$1}" 2>/dev/null
}
node_labelled() { [[ "$(k get node "$NODE" -o jsonpath='{.metadata.labels.latencytier\.io/profile}')" == "$1" ]]; }
ln_generation_is() { [[ "$(k get latencynode "$NODE" -o jsonpath='{.status.profileGeneration}')" == "$1" ]] && applied; }
drifted() { [[ "$(ln_condition Drifted)" == True ]]; }
ln_gone() { ! k get latencynode "$NODE" >/dev/null 2>&1; }
lp_lists_node() {
  [[ "$(k get latencyprofile "$PROFILE" -o jsonpath='{.status.nodes[*].name}')" == *"$NODE"* ]] &&
    k get latencyprofile "$PROFILE" -o wide | awk -v n=1 'NR == 2 && $2 == n && $3 == n {ok = 1} END {exit !ok}'
}
measured() { [[ -n "$(k get latencynode "$NODE" -o jsonpath='{.status.latency.measuredAt}')" ]]; }
set_measurement() { k patch latencyprofile "$PROFILE" --type merge -p "{\"spec\":{\"measurement\":{\"source\":\"$1\"}}}" >/dev/null; }
# settle waits (at most 90s) for 10s without a write to either kind.
settle() {
  local i
  for ((i = 0; i < 9; i++)); do
    [[ "$(writes_over 10)" == "0 0" ]] && return 0
  done
  echo "    still writing after 90s" >&2
}
# transcript NAME SHOWN COMMAND...: runs COMMAND, prints its output and
# writes it, under the command line SHOWN, to docs/transcripts/NAME.txt: the
# outputs the README shows come from this run, and internal/transcripts
# fails when the README's copy differs (modulo figures, ages and names).
transcript() {
  local name=$1 shown=$2 out; shift 2
  out=$("$@" 2>&1) || true
  mkdir -p "$ROOT/docs/transcripts"
  printf '# hack/e2e.sh %s node=%s kernel=%s\n$ %s\n%s\n' "$(date -u +%FT%TZ)" "$NODE" "$(uname -r)" "$shown" "$out" \
    >"$ROOT/docs/transcripts/$name.txt"
  sed 's/^/    /' <<<"$out"
}
# kubectl_latency runs the kubectl plugin built at the start (bin/kubectl-latency).
kubectl_latency() { "$ROOT/bin/kubectl-latency" --kubeconfig "$("$LC" kubeconfig)" "$@"; }
apply_bad_cpus() { bad_profile bad '  cpus: {reserved: "0-1", isolated: "1"}' | k apply -f -; }
resource_versions() {
  echo "$(k get latencynode "$NODE" -o jsonpath='{.metadata.resourceVersion}') $(k get latencyprofile "$PROFILE" -o jsonpath='{.metadata.resourceVersion}')"
}
# movable_irqs_on CPUS: every IRQ the agent reports Applied sits on CPUS (the
# agent summarises IRQs with one outcome in range form: irq/24-31,40).
movable_irqs_on() {
  local irqs irq n=0
  irqs=$(k get latencynode "$NODE" -o jsonpath='{range .status.settings[?(@.state=="Applied")]}{.setting}{"\n"}{end}' |
    sed -n 's|^irq/\([0-9][0-9,-]*\)$|\1|p' | tr ',' '\n' | while IFS=- read -r lo hi; do seq "$lo" "${hi:-$lo}"; done)
  for irq in $irqs; do
    [[ "$(cat "/proc/irq/$irq/smp_affinity_list")" == "$1" ]] || { echo "    irq $irq on $(cat "/proc/irq/$irq/smp_affinity_list")" >&2; return 1; }
    n=$((n + 1))
  done
  ((n > 0)) || { echo "    no IRQ reported Applied" >&2; return 1; }
}

# Build first (a cold build takes minutes) so the lock below is not held
# through it.
"$ROOT/hack/install-deps.sh"
"$ROOT/hack/k8s-binaries.sh" all >/dev/null
make -s -C "$ROOT" kubectl-latency >/dev/null
# Hold the kernel-test lock for the whole run: the snapshots below must not
# see a Go test's temporary kernel values.
lock_kernel
HOST_BEFORE=$(host_state)
trap finish EXIT
trap 'exit 130' INT TERM

say "Cluster"
t=$SECONDS
must "hack/local-cluster up" "$LC" up
echo "  (cluster up in $((SECONDS - t))s)"
# The runtime the pods run on, as the kubelet's CRI sees it: the log of
# every run names it.
RUNTIME=$("$LC" crictl version 2>&1 | awk -F': *' '$1 == "RuntimeName" || $1 == "RuntimeVersion" || $1 == "RuntimeApiVersion" {printf "%s%s=%s", sep, $1, $2; sep = " "}') || true
echo "  crictl version: ${RUNTIME:-(no answer)}"
check "runtime is containerd v2.x" grep -Eq 'RuntimeName=containerd RuntimeVersion=v?2\.' <<<"$RUNTIME"
NRI_SOCK=$("$LC" nri-socket)
if [[ -S "$NRI_SOCK" ]]; then echo "  NRI: enabled (socket $NRI_SOCK)"; else echo "  NRI: disabled (no socket at $NRI_SOCK)"; fi
check "NRI enabled in containerd" test -S "$NRI_SOCK"
must "workloads Ready" k apply -f "$ROOT/hack/demo/workloads.yaml"
must "workloads Ready" k wait --for=condition=Ready pod/latency-workload pod/plain-workload --timeout=120s

say "Bad profiles are rejected by kubectl apply, with the field named"
check "autogroup: Maybe"             rejected "spec.scheduler.autogroup" '  scheduler: {autogroup: Maybe}'
check "priority: 5000"               rejected "spec.priority" '  priority: 5000'
check "rtRuntime: 2s"                rejected "spec.scheduler.rtRuntime" '  scheduler: {rtRuntime: 2s}'
check "sysctl name with a path"      rejected "spec.sysctls[0].name" '  sysctls: [{name: "kernel/../../etc/x", value: "1"}]'
check "sysctl duplicating a field"   rejected "duplicates a typed field" '  sysctls: [{name: kernel.sched_autogroup_enabled, value: "0"}]'
check "sysctl off the allowlist"     rejected "sysctl vm.panic_on_oom is not on the built-in allowlist" '  sysctls: [{name: vm.panic_on_oom, value: "1"}]'
check "sysctl that runs a helper"    rejected "sysctl kernel.core_pattern is refused" '  sysctls: [{name: kernel.core_pattern, value: "|/tmp/x"}]'
check "the RT period"                rejected "sysctl kernel.sched_rt_period_us is refused" '  sysctls: [{name: kernel.sched_rt_period_us, value: "2000000"}]'
check "overlapping cpus"             rejected "must not overlap" '  cpus: {reserved: "0-1", isolated: "1"}'
check "irq Reserved without cpus"    rejected "needs cpus.reserved" '  irq: {affinity: Reserved}'
check "quota removal for any namespace" rejected "cpuQuota.namespaceSelector is required" '  cpuQuota: {policy: Remove}'
check "measurement.interval: 1s"     rejected "spec.measurement.interval" '  measurement: {interval: 1s}'
check "a sysctl value out of bounds"  rejected "spec.sysctls[0].value" '  sysctls: [{name: net.core.netdev_max_backlog, value: "100000000"}]'
check "rtRuntime below the floor"    rejected "spec.scheduler.rtRuntime" '  scheduler: {rtRuntime: 999ns}'
check "reboots without a canary"     rejected "spec.rollout" '  cpus: {reserved: "0", isolated: "1", namespaceSelector: {}}
  bootParameters: {policy: Reboot}'
check "CPU 0 isolated by default"    rejected "spec.cpus.isolated" '  cpus: {reserved: "1", isolated: "0", namespaceSelector: {}}'
# The chart's default leaves the manager's TierScheduler gate off, so the
# API server refuses the experimental class (policy
# latencytier-tier-scheduler-gate), naming the gate.
check "scheduler.class Tier with the gate off" rejected "TierScheduler feature gate is off" '  scheduler: {class: Tier}'
transcript apply-bad "kubectl apply -f bad.yaml" apply_bad_cpus

# explain_has FIELD TEXT: kubectl explain documents FIELD with TEXT (the
# output is captured first: grep -q closing the pipe early would fail the
# check under pipefail with kubectl's SIGPIPE).
explain_has() { local out; out=$(k explain "latencyprofile.spec.$1") && grep -q "$2" <<<"$out"; }
check "kubectl explain latencyprofile.spec.power" explain_has power.isolated.maxIdleExitLatency "polling"
check "kubectl explain latencyprofile.spec.realtime" explain_has realtime "SCHED_FIFO"

say "Apply"
BEFORE=$(kernel_snapshot; pod_quotas latency-workload; pod_quotas plain-workload)
must "label node" k label node "$NODE" "$PROFILE_LABEL=" --overwrite
must "apply profile" apply_profile
check "node labelled latencytier.io/profile=$PROFILE" wait_until "$TIMEOUT" "node label" node_labelled "$PROFILE"
must "agent DaemonSet pod Running on $NODE" wait_until "$TIMEOUT" "agent pod" agent_ready
must "LatencyNode $NODE Applied" wait_until "$TIMEOUT" "Applied" applied
check "kernel.sched_autogroup_enabled = 0" sysctl_is sched_autogroup_enabled 0
check "kernel.sched_rt_runtime_us = 980000" sysctl_is sched_rt_runtime_us 980000
check "default_smp_affinity = CPU 0" bash -c '[[ $(cat /proc/irq/default_smp_affinity) == 1 ]]'
check "movable IRQs on CPU 0" movable_irqs_on 0
check "opted-in pod: pod and container quota removed" wait_until 30 "quota removal" quota_is latency-workload "pod=-1 container=-1"
check "non-opted pod keeps its quota" quota_is plain-workload "pod=30000 container=30000"
# The agent is also containerd's NRI plugin (issue 44): a granted container
# created now starts without its quota, from the runtime's CreateContainer,
# before any agent pass could see it; the agent logs each such decision.
nri_logged() {
  local out
  out=$(k -n latencytier-system logs --since=5m "pod/$(agent_pod_field metadata.name)" 2>/dev/null) || return 1
  awk 'index($0, "\"Tuned a container at its creation\"") && index($0, "\"pod\":\"default/nri-workload\"") {f = 1} END {exit !f}' <<<"$out"
}
check "RuntimeHookConnected True: the agent registered with containerd's NRI" \
  wait_until 60 "RuntimeHookConnected" ln_condition_is RuntimeHookConnected True
echo "  (RuntimeHookConnected: $(k get latencynode "$NODE" -o jsonpath='{.status.conditions[?(@.type=="RuntimeHookConnected")].reason}: {.status.conditions[?(@.type=="RuntimeHookConnected")].message}'))"
# The agent learns its node's pods from containerd through NRI
# (agent.podSource: Runtime, the chart's default): its role grants nothing
# on pods, so its token cannot read any pod of the cluster (issue 40).
agent_cannot_list_pods() {
  [[ "$(k auth can-i list pods --all-namespaces --as=system:serviceaccount:latencytier-system:latencytier-agent 2>/dev/null)" == no ]]
}
check "the agent's service account cannot list pods (agent.podSource: Runtime)" agent_cannot_list_pods
nri_workload() { sed 's/latency-workload/nri-workload/g' "$ROOT/hack/demo/workloads.yaml" | awk '/^---/ {exit} {print}' | k apply -f -; }
# first_looks POD OUT: from the pod's creation, polls its cpu cgroups
# every 10 ms: the pod's own (kubelet's, outside CRI) and each container's.
# For each, the first time it is seen it appends "<name> quota=<cfs quota>
# nr_throttled=<n> seen_ns=<now> made_ns=<the cgroup's ctime>", and
# "<name> unthrottled_ns=<now>" once its quota reads -1 (v1) or max (v2).
# <name> is pod<uid> or the container ID. Runs until killed.
first_looks() {
  local pod=$1 out=$2 uid dir="" base d q made seen=" " freed=" "
  until uid=$(k get pod "$pod" -o jsonpath='{.metadata.uid}' 2>/dev/null) && [[ -n "$uid" ]]; do sleep 0.01; done
  while :; do
    if [[ -z "$dir" ]]; then
      for base in /sys/fs/cgroup/cpu,cpuacct/kubepods /sys/fs/cgroup/cpu/kubepods /sys/fs/cgroup/kubepods; do
        [[ -d "$base" ]] && dir=$(find "$base" -maxdepth 2 -type d -name "pod$uid" -print -quit) && [[ -n "$dir" ]] && break
      done
    fi
    for d in ${dir:+"$dir" "$dir"/*/}; do
      [[ -d "$d" ]] || continue
      d=${d%/}
      q=$(quota_of "$d" 2>/dev/null) || continue
      if [[ "$seen" != *" ${d##*/} "* ]]; then
        made=$(stat -c %.9Z "$d")
        seen+="${d##*/} "
        echo "${d##*/} quota=$q nr_throttled=$(awk '$1 == "nr_throttled" {print $2}' "$d/cpu.stat" 2>/dev/null) nr_periods=$(awk '$1 == "nr_periods" {print $2}' "$d/cpu.stat" 2>/dev/null) seen_ns=$(date +%s%N) made_ns=${made/./}" >>"$out"
      fi
      if [[ ( "$q" == -1 || "$q" == max ) && "$freed" != *" ${d##*/} "* ]]; then
        freed+="${d##*/} "
        echo "${d##*/} unthrottled_ns=$(date +%s%N)" >>"$out"
      fi
    done
    sleep 0.01
  done
}
# look POD OUT WHAT: from first_looks' OUT, for POD's app container:
# "first" its first line; "container_ms" and "pod_ms" the milliseconds from
# the container's cgroup being made to its own quota, and its pod's, reading
# unlimited ("?" when never seen so).
look() {
  local cid uid
  cid=$(k get pod "$1" -o jsonpath='{.status.containerStatuses[0].containerID}'); cid=${cid#*://}
  uid=$(k get pod "$1" -o jsonpath='{.metadata.uid}')
  awk -v c="$cid" -v p="pod$uid" -v what="$3" '
    function v(k,   i) { for (i = 2; i <= NF; i++) if (index($i, k "=") == 1) return substr($i, length(k) + 2); return "" }
    $1 == c && v("quota") != "" && !first { first = $0; made = v("made_ns") }
    $1 == c && v("unthrottled_ns") != "" { cu = v("unthrottled_ns") }
    $1 == p && v("unthrottled_ns") != "" { pu = v("unthrottled_ns") }
    END {
      if (what == "first") print first
      else if (what == "container_ms") print (made && cu ? sprintf("%.0f", (cu - made) / 1e6) : "?")
      else if (what == "pod_ms") print (made && pu ? sprintf("%.0f", (pu - made) / 1e6) : "?")
    }' "$2"
}
# unthrottled_at_first_look "LINE": quota -1/max, nr_throttled 0 and
# nr_periods 0 at the first look: the kernel counts a period only while a
# quota is set, so a container whose quota came at creation and went later
# (the file path) has periods by the time anyone looks, and one created
# without a quota (the NRI hook) has none, however late the poller looks.
# (It was "read within 100 ms of the cgroup", a timed check that failed
# when a loaded machine delayed the 10 ms poller to 168 ms.)
unthrottled_at_first_look() {
  [[ "$1" =~ quota=(-1|max)\ nr_throttled=0\ nr_periods=0\ seen_ns=[0-9]+\ made_ns=[0-9]+$ ]]
}
LOOKS=$(mktemp)
first_looks nri-workload "$LOOKS" &
LOOKER=$!
must "pod nri-workload (opted in) created after the profile" nri_workload
must "nri-workload Ready" k wait --for=condition=Ready pod/nri-workload --timeout=120s
check "the agent's NRI hook tuned nri-workload's container at its creation (agent log)" wait_until 30 "NRI log" nri_logged
check "nri-workload: pod and container quota removed" wait_until 30 "quota removal" quota_is nri-workload "pod=-1 container=-1"
kill "$LOOKER" 2>/dev/null; wait "$LOOKER" 2>/dev/null || true
FIRST=$(look nri-workload "$LOOKS" first)
echo "  (first look at nri-workload's container cgroup, polled every 10 ms: ${FIRST:-none})"
check "nri-workload's container: no quota, nr_throttled 0 and no CFS period at its first look (created without a quota)" \
  unthrottled_at_first_look "$FIRST"
# Container start to unthrottled, 3 runs (docs/benchmarks.md, from
# hack/bench/out/e2e-nri.txt), both from the moment the container's cgroup
# is made: until the container's own quota reads unlimited (the NRI hook
# removes it in CreateContainer, so the first look finds it so: the figure
# is the poll's delay, an upper bound) and until its pod's does (kubelet
# writes the pod-level cgroup outside CRI; the agent's pass, woken by the
# sandbox's NRI event, removes it through the file path; negative when
# before the container existed).
median3() { sort -n | awk '{a[NR] = $1} END {print (NR ? a[int((NR + 1) / 2)] : "?")}'; }
mkdir -p "$ROOT/hack/bench/out"
NRI_C=() NRI_P=() NRI_FIRST=()
for run in 1 2 3; do
  first_looks "nri-start-$run" "$LOOKS" &
  LOOKER=$!
  sed "s/latency-workload/nri-start-$run/g" "$ROOT/hack/demo/workloads.yaml" | awk '/^---/ {exit} {print}' | k apply -f - >/dev/null
  k wait --for=condition=Ready "pod/nri-start-$run" --timeout=120s >/dev/null
  wait_until 30 "quota removal" quota_is "nri-start-$run" "pod=-1 container=-1" >/dev/null || true
  kill "$LOOKER" 2>/dev/null; wait "$LOOKER" 2>/dev/null || true
  NRI_C+=("$(look "nri-start-$run" "$LOOKS" container_ms)"); NRI_P+=("$(look "nri-start-$run" "$LOOKS" pod_ms)")
  NRI_FIRST+=("$(look "nri-start-$run" "$LOOKS" first)")
  echo "scenario=nri_start run=$run date=$(date -u +%FT%TZ) container_ms=${NRI_C[-1]} pod_ms=${NRI_P[-1]}" >>"$ROOT/hack/bench/out/e2e-nri.txt"
  k delete pod "nri-start-$run" --wait=true --timeout=60s >/dev/null 2>&1 || true
done
echo "  (container start to unthrottled, ms, runs ${NRI_C[*]} (container's quota, NRI) / ${NRI_P[*]} (pod's quota, file path))"
echo "  (medians: container's quota $(printf '%s\n' "${NRI_C[@]}" | median3) ms, pod's quota $(printf '%s\n' "${NRI_P[@]}" | median3) ms)"
# unthrottled_from_start: in every run the container's first look found
# no quota and no throttled period, and its pod's quota was unlimited by
# then: the container was never throttled.
unthrottled_from_start() {
  local i
  for i in 0 1 2; do
    unthrottled_at_first_look "${NRI_FIRST[i]}" || { echo "    run $((i + 1)): first look ${NRI_FIRST[i]:-none}" >&2; return 1; }
    [[ "${NRI_P[i]}" =~ ^-?[0-9]+$ && "${NRI_C[i]}" =~ ^-?[0-9]+$ ]] && (( NRI_P[i] <= NRI_C[i] )) ||
      { echo "    run $((i + 1)): pod's quota at ${NRI_P[i]} ms, container's first look at ${NRI_C[i]} ms" >&2; return 1; }
  done
}
check "3 runs: each container never throttled (no quota at its first look, its pod's already gone)" unthrottled_from_start
# A kubelet resize (in-place, the pod's resize subresource) sends the
# runtime UpdateContainerResources: the NRI hook answers it with the same
# quota removal, so the container never gets the new limit as a quota, and
# kubelet's pod-level write is the agent's to fix, not drift.
resize_nri_workload() {
  k patch pod nri-workload --subresource resize --type merge \
    -p '{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"100m","memory":"16Mi"},"limits":{"cpu":"700m","memory":"32Mi"}}}]}}' >/dev/null
}
resized() { [[ "$(k get pod nri-workload -o jsonpath='{.status.containerStatuses[0].resources.limits.cpu}')" == 700m ]]; }
container_quota_held() {
  local i q cid dir
  dir=$(pod_cgroup nri-workload); cid=$(k get pod nri-workload -o jsonpath='{.status.containerStatuses[0].containerID}'); cid=${cid#*://}
  for i in $(seq 100); do
    q=$(quota_of "$dir/$cid"); [[ "$q" == -1 || "$q" == max ]] || { echo "    container quota $q after the resize" >&2; return 1; }
    sleep 0.1
  done
}
must "resize nri-workload's CPU limit 500m -> 700m (pods/resize)" resize_nri_workload
check "kubelet applied the resize (status limit 700m)" wait_until 60 "resize" resized
check "the container's quota stayed removed for 10 s after the resize" container_quota_held
check "pod and container quota removed after the resize" wait_until 30 "quota removal" quota_is nri-workload "pod=-1 container=-1"
check "no drift counted for the resize (Drifted not True)" bash -c '[[ "$1" != True ]]' _ "$(ln_condition Drifted)"
k delete pod nri-workload --wait=true --timeout=60s >/dev/null 2>&1 || true
# Fail-open: with the agent gone the runtime has no plugin to ask, so a new
# granted pod still starts, with kubelet's quota; the agent fixes it on
# return. The agent is taken off the node by a nodeSelector nothing has.
agent_gone() { [[ -z "$(agent_pod_field metadata.name)" ]]; }
pause_agent() {
  k -n latencytier-system patch ds latencytier-agent --type merge \
    -p '{"spec":{"template":{"spec":{"nodeSelector":{"latencytier.io/e2e-agent-paused":"true"}}}}}' >/dev/null
}
resume_agent() {
  k -n latencytier-system patch ds latencytier-agent --type json \
    -p '[{"op":"remove","path":"/spec/template/spec/nodeSelector/latencytier.io~1e2e-agent-paused"}]' >/dev/null
}
late_workload() { sed 's/latency-workload/nri-late/g' "$ROOT/hack/demo/workloads.yaml" | awk '/^---/ {exit} {print}' | k apply -f -; }
must "agent taken off $NODE" pause_agent
check "no agent pod on $NODE" wait_until 60 "agent gone" agent_gone
must "pod nri-late (opted in) created with no agent" late_workload
check "nri-late Ready without the agent (the runtime did not wait for it)" k wait --for=condition=Ready pod/nri-late --timeout=120s
check "nri-late keeps kubelet's quota while the agent is away" quota_is nri-late "pod=50000 container=50000"
must "agent back on $NODE" resume_agent
check "the agent runs again" wait_until "$TIMEOUT" "agent pod" agent_ready
check "nri-late: pod and container quota removed after the agent's return" wait_until 60 "quota removal" quota_is nri-late "pod=-1 container=-1"
k delete pod nri-late --wait=true --timeout=60s >/dev/null 2>&1 || true
rm -f "$LOOKS"
check "kubectl get lp shows the node" wait_until 30 "profile status" lp_lists_node
k get latencyprofiles -o wide
k get latencynodes -o wide
# The node's conditions, so that a node not Applied here says which setting and why.
echo "  (conditions of $NODE: $(k get latencynode "$NODE" -o jsonpath='{range .status.conditions[*]}{.type}={.status} {.reason}: {.message}; {end}' 2>&1 || true))"

say "Steady state: no needless API writes"
# Measurement off: nothing on the node changes, so nothing is written, by
# the agent (LatencyNode status) or the manager (LatencyNode spec,
# LatencyProfile status). The profile's measurement source is patched, not
# re-applied, and put back to Auto (its default) at the end of this step.
must "measurement disabled" set_measurement Disabled
gen=$(k get latencyprofile "$PROFILE" -o jsonpath='{.metadata.generation}')
check "LatencyNode Applied at generation $gen" wait_until "$TIMEOUT" "generation $gen" ln_generation_is "$gen"
check "WithinBudget Unknown (not measured)" wait_until 60 "WithinBudget Unknown" ln_condition_is WithinBudget Unknown
settle
rv_before=$(resource_versions)
read -r ln_writes lp_writes <<<"$(writes_over 60)"
rv_after=$(resource_versions)
check "measurement off: 0 LatencyNode writes in 60s (saw $ln_writes)" at_most "$ln_writes" 0
check "measurement off: 0 LatencyProfile writes in 60s (saw $lp_writes)" at_most "$lp_writes" 0
check "measurement off: resourceVersions unchanged over the 60s ($rv_before -> $rv_after)" test "$rv_before" = "$rv_after"
# Measurement on (interval 10s, the profile's): at most one LatencyNode
# write per interval, so at most 60/10 + 1 in a window of 60s (the window
# need not start on an interval).
must "measurement on" set_measurement Auto
gen=$(k get latencyprofile "$PROFILE" -o jsonpath='{.metadata.generation}')
check "LatencyNode Applied at generation $gen" wait_until "$TIMEOUT" "generation $gen" ln_generation_is "$gen"
check "a measurement reported" wait_until 60 "status.latency.measuredAt" measured
check "measured by the eBPF tracer (not the schedstat fallback) without privileged" \
  test "$(k get latencynode "$NODE" -o jsonpath='{.status.latency.source}')" = EBPF
# This host's kernel has no sched_ext: the agent (through /host/sys) says
# fair, and the Class column says so too (issue 47).
fair_class() {
  [[ ! -e /sys/kernel/sched_ext ]] &&
    [[ "$(k get latencynode "$NODE" -o jsonpath='{.status.kernel.activeClass}/{.status.kernel.schedExt.supported}/{.status.summary.class}')" == "fair//fair" ]]
}
check "the node reports the fair class, sched_ext not built into the host's kernel" fair_class
sleep 10
# The README's worked example: what a person reads once the node is tuned.
transcript get-lp "kubectl get lp" k get latencyprofiles
transcript get-ln "kubectl get ln" k get latencynodes
transcript get-lp-wide "kubectl get lp -o wide" k get latencyprofiles -o wide
transcript get-ln-wide "kubectl get ln -o wide" k get latencynodes -o wide
transcript latency-status "kubectl latency status $PROFILE" kubectl_latency status "$PROFILE"
# Quiet status on a working node (issue 43): a periodic CPU burner on both
# CPUs (40% duty) makes the run-queue p99 wander window to window, as
# ordinary load does; nothing a reader acts on changes, so over 12 windows
# the agent writes its heartbeat (5m) at most, and the manager the profile
# as often. Before, every window that moved the p99 into another 1-2-5
# bucket, or the evidence by 10%, was written (20 a 10 minutes).
stress-ng --cpu 2 --cpu-load 40 --timeout 175s >/dev/null 2>&1 &
burner=$!
sleep 30 # two windows: the burner's arrival is a real change, written
# What each write carried, to name the figure that moved when there are too many.
quiet_watch=$(mktemp)
k get latencynode "$NODE" -w --output-watch-events -o jsonpath='{.object.status.reportedAt} p99={.object.status.runQueueP99} classes={.object.status.latency.classes[*].p99} pods={.object.status.latency.pods[*].waitPerSecond} top={.object.status.latency.pods[*].offenders[0].name} findings={.object.status.findings[*].type} current={.object.status.current.runQueue.p99} throttled={.object.status.throttledRatio}{"\n"}' \
  >"$quiet_watch" 2>/dev/null &
watcher=$!
read -r ln_writes lp_writes <<<"$(writes_over 120)"
kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null || true
echo "  (a wandering p99 over 12 windows of 10s: $ln_writes LatencyNode and $lp_writes LatencyProfile writes; the LatencyNode as watched:)"
sed 's/^/    /' "$quiet_watch"; rm -f "$quiet_watch"
check "wandering p99: at most 2 LatencyNode writes in 120s (saw $ln_writes)" at_most "$ln_writes" 2
check "wandering p99: at most 2 LatencyProfile writes in 120s (saw $lp_writes)" at_most "$lp_writes" 2
kill "$burner" 2>/dev/null; wait "$burner" 2>/dev/null || true
# A real change is still written: a hog of six CPU-bound workers on two
# CPUs at least doubles the p99 the node last wrote. A move of ×3 or more
# is written from its window; one under ×3 when the next window holds it
# (the window the hog started in may hold it only for its last seconds):
# three windows and the write.
p99_before=$(k get latencynode "$NODE" -o jsonpath='{.status.runQueueP99}')
stress-ng --cpu 6 --timeout 60s >/dev/null 2>&1 &
hog=$!
p99_doubled() {
  local now
  now=$(k get latencynode "$NODE" -o jsonpath='{.status.runQueueP99}')
  [[ -n "$now" ]] && go_dur_ratio_at_least "$p99_before" "$now" 1.8
}
t_hog=$SECONDS
check "a hog: the doubled p99 written within three windows (was $p99_before)" wait_until 35 "p99 doubled" p99_doubled
echo "  (written after $((SECONDS - t_hog))s)"
echo "  (runQueueP99 $p99_before -> $(k get latencynode "$NODE" -o jsonpath='{.status.runQueueP99}'))"
kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null || true

say "Drift: autogroup written back to 1"
echo 1 >/proc/sys/kernel/sched_autogroup_enabled
check "drift reported (Drifted=True)" wait_until "$TIMEOUT" "Drifted" drifted
check "drift re-asserted (autogroup 0)" wait_until "$TIMEOUT" "re-assert" sysctl_is sched_autogroup_enabled 0

# A real Prometheus scrapes the agent and answers the run-queue p99 query
# (hack/e2e-prometheus.sh); the agent has measured and re-asserted by now.
prometheus_checks

say "Agent pod deleted in the middle of an apply"
must "change profile (rtRuntime 970ms)" apply_profile 970ms
gen=$(k get latencyprofile "$PROFILE" -o jsonpath='{.metadata.generation}')
k -n latencytier-system delete pod -l app.kubernetes.io/component=agent --wait=false >/dev/null
check "DaemonSet recreated the agent pod" wait_until "$TIMEOUT" "agent pod" agent_ready
check "LatencyNode Applied at generation $gen" wait_until "$TIMEOUT" "generation $gen" ln_generation_is "$gen"
check "kernel.sched_rt_runtime_us = 970000" sysctl_is sched_rt_runtime_us 970000

say "Delete the profile: everything restored exactly"
check "profile deleted (finalizer released after revert)" k delete latencyprofile "$PROFILE" --timeout="${TIMEOUT}s"
check "LatencyNode removed" wait_until "$TIMEOUT" "LatencyNode removal" ln_gone
AFTER=$(kernel_snapshot; pod_quotas latency-workload; pod_quotas plain-workload)
if [[ "$BEFORE" == "$AFTER" ]]; then pass "snapshot before == after"; else
  fail "snapshot before != after"; diff <(echo "$BEFORE") <(echo "$AFTER") | sed 's/^/    /'
fi
check "node profile label removed" node_labelled ""

# --- Safe rollout (issue 12): each node's own before/after latency ---
# The measured pod is hack/demo/server.yaml (rollout-server): a server that
# needs 0.7 CPU under a 500m limit, so its CFS quota throttles it. The
# profile measures it by label; its verdicts rest on its own run delay.
# rollout_profile POLICY: cpuQuota POLICY (Remove or Keep) for opted-in pods,
# 5s measurement windows, judged 15s after the move.
rollout_profile() {
  cat <<YAML
apiVersion: tuning.latencytier.io/v1alpha1
kind: LatencyProfile
metadata:
  name: e2e-rollout
spec:
  nodeSelector:
    matchLabels: {$PROFILE_LABEL: ""}
  cpuQuota:
    policy: $1
    namespaceSelector: {}
  measurement:
    interval: 5s
    podSelector:
      matchLabels: {app: rollout-server}
    namespaceSelector:         # only these namespaces' pods are rollout evidence
      matchLabels: {kubernetes.io/metadata.name: default}
    # This node is the whole cluster on 2 CPUs: its control plane and this
    # script run in cgroup "/", beside the measured server. Behind them the
    # server waits 30-50 ms a second with no hog (the two e2e runs that
    # left issue 45 open), above the 30ms default meant for a node whose system services
    # have CPUs of their own; behind e2e-hog it waits 2.4-2.6 s a second.
    # 500ms sits 10x above the one and 5x below the other.
    # A latency budget for the server (issue 45): beside e2e-hog it waits
    # seconds a second, so explain names it outside this budget.
    budgets:
    - name: e2e-server
      podSelector:
        matchLabels: {app: rollout-server}
      waitPerSecond: 100ms
    contention:
      waitPerSecond: 500ms
      taint: PreferNoSchedule
      maxTaintedPercent: 100
  rollout:
    maxInFlight: 1
    verificationWindow: 15s
    maxP99Regression: "1.2"
    inconclusiveTimeout: 2m
YAML
}
# The node's verdict is in the profile's status.rollout: listed (with its
# message) when Regressed or Inconclusive, else counted Improved/Unchanged.
verdict_field() { k get latencyprofile e2e-rollout -o jsonpath='{.status.rollout.verdicts[?(@.node=="'"$NODE"'")].'"$1"'}'; }
node_verdict() {
  local v
  v=$(verdict_field verdict)
  if [[ -n "$v" ]]; then echo "$v"; return; fi
  if (( $(k get latencyprofile e2e-rollout -o jsonpath='{.status.rollout.improved}' || echo 0) > 0 )); then echo Improved
  elif (( $(k get latencyprofile e2e-rollout -o jsonpath='{.status.rollout.unchanged}' || echo 0) > 0 )); then echo Unchanged
  fi
}
verdict_is() { [[ "$(node_verdict)" == "$1" ]]; }
verdict_passed() { [[ "$(node_verdict)" == Improved || "$(node_verdict)" == Unchanged ]]; }
server_quota_is() { quota_is "$SERVER_POD" "$1"; }
# to_ns prints a Go duration ("86.016ms", "1.2s") in nanoseconds;
# pod_p99_ratio the measured pod's p99 in status.current over the one in
# status.baseline ("?" when either is missing).
to_ns() {
  awk -v s="$1" 'BEGIN { t = 0
    while (match(s, /^[0-9.]+(ns|us|µs|ms|s|m|h)/)) {
      tok = substr(s, 1, RLENGTH); s = substr(s, RLENGTH + 1)
      match(tok, /[0-9.]+/); v = substr(tok, 1, RLENGTH); u = substr(tok, RLENGTH + 1)
      t += v * (u == "ns" ? 1 : (u == "us" || u == "µs") ? 1e3 : u == "ms" ? 1e6 : u == "s" ? 1e9 : u == "m" ? 6e10 : 3.6e12)
    }
    printf "%.0f\n", t }'
}
pod_p99_ratio() {
  local b c
  b=$(evidence_p99 baseline pods); c=$(evidence_p99 current pods)
  [[ -n "$b" && -n "$c" ]] || { echo "?"; return; }
  awk -v b="$(to_ns "$b")" -v c="$(to_ns "$c")" 'BEGIN { printf "%.2f\n", c / (b > 0 ? b : 1) }'
}
ratio_below() { [[ "$1" != "?" ]] && awk -v r="$1" -v l="$2" 'BEGIN { exit !(r < l) }'; }
ratio_above() { [[ "$1" != "?" ]] && awk -v r="$1" -v l="$2" 'BEGIN { exit !(r > l) }'; }
apply_rollout() { rollout_profile "$1" | k apply -f -; }
ready_reason_is() { [[ "$(k get latencyprofile "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}')" == "$2" ]]; }
rolled_back_event() { k get events -A --field-selector reason=RolloutRolledBack -o name | grep -q .; }
# record_rollout NAME appends this run's figures to
# hack/bench/out/e2e-rollout.txt for hack/bench/report.sh
# (docs/benchmarks.md): the verdict, its message and the p99 ratio it
# rests on (from the message: after a rollback status.current is cleared;
# a passing node is not listed, so no message: from the evidence).
record_rollout() {
  local msg ratio
  msg=$(verdict_field message)
  ratio=$(sed -n 's/.*, \([0-9.]*\)×.*/\1/p' <<<"$msg")
  [[ -n "$ratio" ]] || ratio=$(pod_p99_ratio)
  mkdir -p "$ROOT/hack/bench/out"
  echo "scenario=$1 date=$(date -u +%FT%TZ) verdict=$(node_verdict) pod_p99_ratio=$ratio apply_to_end_s=$ROLLOUT_S message=\"$msg\"" >>"$ROOT/hack/bench/out/e2e-rollout.txt"
}

say "Rollout (a): quota removal for a throttled server, with a safe rollout: baseline, move, Improved, Complete"
must "label node" k label node "$NODE" "$PROFILE_LABEL=" --overwrite
must "rollout-server Running (700 req/s of 1 ms under a 500m limit)" start_load
check "rollout-server throttled by its quota" wait_until 30 "server quota" server_quota_is "pod=50000 container=50000"
t0=$SECONDS
must "apply e2e-rollout (cpuQuota Remove)" apply_rollout Remove
check "rollout Baselining first (nothing written yet)" wait_until 60 "Baselining" rollout_phase_is e2e-rollout Baselining
check "server quota untouched while Baselining" server_quota_is "pod=50000 container=50000"
check "rollout Complete" wait_until 240 "rollout Complete" rollout_phase_is e2e-rollout Complete
ROLLOUT_S=$((SECONDS - t0)); echo "  (kubectl apply to Complete: ${ROLLOUT_S}s)"
show_evidence e2e-rollout
check "verdict passed (Improved or Unchanged)" verdict_passed
RATIO=$(pod_p99_ratio)
check "the measured pod's own p99 fell (after/before = $RATIO < 0.9)" ratio_below "$RATIO" 0.9
check "server quota removed" server_quota_is "pod=-1 container=-1"
transcript rollout-passed-ln "kubectl get ln -o wide" k get latencynodes -o wide
transcript rollout-passed-lp "kubectl get lp e2e-rollout -o wide" k get latencyprofile e2e-rollout -o wide
transcript rollout-passed-status "kubectl latency status e2e-rollout" kubectl_latency status e2e-rollout
record_rollout rollout_improve

say "Rollout (b): a spec change that brings the quota back (policy Keep): Regressed, rolled back to revision 1"
t0=$SECONDS
must "apply e2e-rollout (cpuQuota Keep)" apply_rollout Keep
check "rollout RolledBack" wait_until 240 "rollout RolledBack" rollout_phase_is e2e-rollout RolledBack
ROLLOUT_S=$((SECONDS - t0)); echo "  (kubectl apply to RolledBack: ${ROLLOUT_S}s)"
show_evidence e2e-rollout
check "verdict Regressed (kept after the rollback)" verdict_is Regressed
# After the rollback status.baseline is the regressed window and current
# the first one back on revision 1: the figures are in the verdict.
MSG=$(verdict_field message)
RATIO=$(sed -n "s/^measured pods' run delay p99 .*, \([0-9.]*\)× > .*/\1/p" <<<"$MSG")
check "judged on the measured pod's own p99, which rose under revision 2 (${RATIO:-?}× > 1.2)" ratio_above "${RATIO:-?}" 1.2
check "profile Ready False, reason RolledBack" ready_reason_is e2e-rollout RolledBack
check "server quota removed again (revision 1's tuning)" wait_until 30 "quota removal" server_quota_is "pod=-1 container=-1"
check "RolloutRolledBack event on the profile" rolled_back_event
transcript rollout-rolledback-ln "kubectl get ln -o wide" k get latencynodes -o wide
transcript rollout-rolledback-lp "kubectl get lp e2e-rollout -o wide" k get latencyprofile e2e-rollout -o wide
transcript rollout-rolledback-status "kubectl latency status e2e-rollout" kubectl_latency status e2e-rollout
record_rollout rollout_regress

say "Who made the measured pod wait: a busy pod on the node is the rollout server's top offender"
# e2e-hog: two workers of hack/bench's workload asking for 20x the CPU the
# node has, without a limit, beside the measured rollout-server.
hog_pod() {
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: e2e-hog, namespace: default, labels: {app: e2e-hog}}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: hog
    image: latencytier.local/workload:1
    imagePullPolicy: Never
    args: ["-n", "100000000", "-r", "20000", "-s", "1000", "-w", "2", "-T", "300", "-l", "e2e-hog"]
    # A request of one CPU: cpu.shares 1024 against the server's 102, so it
    # takes the CPU from it. As BestEffort (shares 2) it barely ran: the
    # server then waited behind its own workers (SamePod), truthfully.
    resources:
      requests: {cpu: "1"}
YAML
}
start_hog() {
  hog_pod | k apply -f - >/dev/null || return 1
  k wait --for=condition=Ready pod/e2e-hog --timeout=60s >/dev/null && return 0
  # Why not: the scheduler's and kubelet's events, the node's taints.
  k describe pod e2e-hog | sed -n '/^Events:/,$p' | tail -8 | sed 's/^/    /'
  echo "    node taints: $(k get node "$NODE" -o jsonpath='{.spec.taints}')"
  return 1
}
top_offender() {
  k get latencynode "$NODE" -o jsonpath='{range .status.latency.pods[?(@.name=="rollout-server")]}{.offenders[0].class} {.offenders[0].name}{end}'
}
hog_is_top() { [[ "$(top_offender)" == "Pod default/e2e-hog" ]]; }
noisy_finding() { k get latencynode "$NODE" -o jsonpath='{.status.findings[?(@.type=="NoisyNeighbor")].message}' | grep -q "default/e2e-hog"; }
must "e2e-hog running beside rollout-server" start_hog
check "status.latency.pods: rollout-server's top offender is Pod default/e2e-hog" wait_until 90 "attribution" hog_is_top
check "a NoisyNeighbor finding names default/e2e-hog" wait_until 30 "NoisyNeighbor finding" noisy_finding
# RunQueueContention (issue 45): the server waits seconds a second behind
# the hog, far above the profile's 500ms; True after 3 windows of 5s in a
# row, counted by the profile; False again 5 quiet windows after the hog.
profile_contended() { [[ "$(k get latencyprofile e2e-rollout -o jsonpath='{.status.contended}')" == 1 ]]; }
check "RunQueueContention True beside e2e-hog" wait_until 60 "RunQueueContention True" ln_condition_is RunQueueContention True
check "the profile counts the contended node (status.contended 1)" wait_until 30 "status.contended" profile_contended
# The opt-in taint (measurement.contention.taint PreferNoSchedule): the
# manager taints the contended node; PreferNoSchedule never evicts, so the
# hog and the server stay. That the scheduler then prefers another node
# needs a second node, which this cluster does not have.
contention_taint_is() {
  [[ "$(k get node "$NODE" -o jsonpath='{.spec.taints[?(@.key=="latencytier.io/runqueue-contention")].effect}')" == "$1" ]]
}
check "the contended node carries latencytier.io/runqueue-contention:PreferNoSchedule" wait_until 30 "contention taint" contention_taint_is PreferNoSchedule
contention_tainted_counted() { [[ "$(k get latencyprofile e2e-rollout -o jsonpath='{.status.contentionTainted}')" == 1 ]]; }
check "status.contentionTainted 1" wait_until 30 "status.contentionTainted" contention_tainted_counted
check "PreferNoSchedule evicted nothing: e2e-hog still Running" test "$(k get pod e2e-hog -o jsonpath='{.status.phase}')" = Running
pod_outside() { kubectl_latency explain "$NODE" | grep -q '^  OUTSIDE default/rollout-server (budget e2e-server, Wait[A-Za-z]*OverBudget): wait '; }
check "kubectl latency explain names rollout-server outside its budget e2e-server" wait_until 30 "pod budget" pod_outside
pods_outside_counted() { [[ "$(k get latencyprofile e2e-rollout -o jsonpath='{.status.podsOutsideBudget}')" == 1 ]]; }
check "the profile counts it (status.podsOutsideBudget 1)" wait_until 30 "podsOutsideBudget" pods_outside_counted
transcript latency-explain "kubectl latency explain $NODE" kubectl_latency explain "$NODE"
transcript latency-top "kubectl latency top" kubectl_latency top
echo "  (rollout-server: $(k get latencynode "$NODE" -o jsonpath='{range .status.latency.pods[?(@.name=="rollout-server")]}{.waitPerSecond}/s:{range .offenders[*]} {.sharePercent}% {.class} {.name};{end}{end}'))"
# Every series the dashboard reads exists by now (rollout verdicts,
# attributed waits, drift re-asserts): hack/e2e-prometheus.sh.
dashboard_checks
k delete pod e2e-hog --wait=true --timeout=60s >/dev/null 2>&1 || true
# Off again after the hog: 5 quiet windows of 5s, then the manager lifts
# the taint (its pass follows the LatencyNode's status).
check "RunQueueContention False again once e2e-hog is gone" wait_until 90 "RunQueueContention False" ln_condition_is RunQueueContention False
check "the contention taint is lifted with it" wait_until 30 "contention taint gone" contention_taint_is ""
echo "  (RunQueueContention: $(k get latencynode "$NODE" -o jsonpath='{.status.conditions[?(@.type=="RunQueueContention")].message}'))"
echo "  (rollout-server: $(k get latencynode "$NODE" -o jsonpath='{range .status.latency.pods[?(@.name=="rollout-server")]}{.waitPerSecond}/s:{range .offenders[*]} {.sharePercent}% {.class} {.name};{end}{end}'))"

say "Rollout profile deleted: the kubelet's quota is back"
check "e2e-rollout deleted" k delete latencyprofile e2e-rollout --timeout="${TIMEOUT}s"
check "LatencyNode removed" wait_until "$TIMEOUT" "LatencyNode removal" ln_gone
check "server quota restored" server_quota_is "pod=50000 container=50000"
stop_load

# --- Install, upgrade, uninstall (issue 23): the chart is how the cluster
# got latencytier (hack/local-cluster deploy); upgrade it the documented way
# and uninstall it with a node tuned: its pre-delete hook reverts first.
# least_privilege: the running agent is not privileged, drops every
# capability but the kept ones, and has no host root mount.
least_privilege() {
  local sc vols
  sc=$(agent_pod_field 'spec.containers[0].securityContext')
  vols=$(agent_pod_field 'spec.volumes[*].hostPath.path')
  [[ "$sc" == *'"privileged":false'* && "$sc" == *'"drop":["ALL"]'* && "$sc" == *'"readOnlyRootFilesystem":true'* ]] ||
    { echo "    securityContext: $sc" >&2; return 1; }
  [[ " $vols " != *" / "* ]] || { echo "    host paths: $vols" >&2; return 1; }
}
agent_args_have() { [[ "$(agent_pod_field 'spec.containers[0].args')" == *"$1"* ]]; }
agent_rolled() { k -n latencytier-system rollout status ds/latencytier-agent --timeout=5s >/dev/null 2>&1 && agent_ready && agent_args_have "$1"; }
no_latencytier_objects() {
  [[ -z "$(k get latencyprofiles,latencynodes -o name 2>/dev/null)" ]] || { echo "    left: $(k get latencyprofiles,latencynodes -o name)" >&2; return 1; }
}
namespace_gone() { ! k get namespace latencytier-system >/dev/null 2>&1; }
node_unlabelled() {
  local l
  l=$(k get node "$NODE" -o jsonpath='{.metadata.labels}')
  [[ "$l" != *latencytier.io/profile* && "$l" != *latencytier-agent* ]] || { echo "    labels: $l" >&2; return 1; }
}

say "Upgrade through the chart: CRDs server-side, then helm upgrade; the agent rolls, the tuning holds"
BEFORE_UNINSTALL=$(kernel_snapshot)
must "label node" k label node "$NODE" "$PROFILE_LABEL=" --overwrite
must "apply profile" apply_profile
must "LatencyNode $NODE Applied" wait_until "$TIMEOUT" "Applied" applied
check "the agent runs with least privilege (not privileged, capabilities dropped, no host /)" least_privilege
check "the standard agent (no hostPID) on a node without realtime" test "$(agent_pod_field spec.hostPID)" != true
gen=$(k get latencyprofile "$PROFILE" -o jsonpath='{.metadata.generation}')
must "upgrade (agent.logLevel=1)" "$LC" upgrade --set agent.logLevel=1
check "agent DaemonSet rolled out with the new value" wait_until "$TIMEOUT" "agent rollout" agent_rolled "--v=1"
check "LatencyNode Applied at generation $gen after the upgrade" wait_until "$TIMEOUT" "generation $gen" ln_generation_is "$gen"
check "kernel.sched_autogroup_enabled still 0" sysctl_is sched_autogroup_enabled 0

say "Realtime on this node: the manager moves it to the hostPID agent and back; the journal carries over"
# rt_profile: the e2e profile with CPU 1 isolated and realtime granted to
# the default namespace (realtime requires cpus.isolated), and the boot
# parameters CPU 1 needs asked for report only: a plan, nothing staged.
rt_profile() {
  profile | sed 's|^  cpus:$|  realtime:\n    namespaceSelector:\n      matchLabels: {kubernetes.io/metadata.name: default}\n  cpus:\n    isolated: "1"\n    namespaceSelector:\n      matchLabels: {kubernetes.io/metadata.name: default}|'
  echo '  bootParameters: {policy: ReportOnly}'
}
# boot_planned: the agent reports the plan for CPU 1 (Planned, or Booted
# should this kernel already hold every argument) and staged nothing.
boot_planned() {
  [[ "$(k get latencynode "$NODE" -o jsonpath='{.status.boot.state}')" =~ ^(Planned|Booted)$ ]] &&
    k get latencynode "$NODE" -o jsonpath='{.status.boot.arguments[*].argument}' | grep -qw 'nohz_full=1' &&
    [[ ! -e /etc/default/grub.d/90-latencytier.cfg ]]
}
node_agent_is() { [[ "$(k get node "$NODE" -o jsonpath='{.metadata.labels.node-restriction\.kubernetes\.io/latencytier-agent}')" == "$1" ]]; }
hostpid_agent_ready() { agent_ready && [[ "$(agent_pod_field spec.hostPID)" == "$1" ]]; }
node_event() { k get events -A --field-selector "reason=AgentHostPID,involvedObject.kind=Node,involvedObject.name=$NODE" -o name | grep -q .; }
apply_rt_profile() { rt_profile | k apply -f -; }
must "grant realtime on $NODE (cpus.isolated 1)" apply_rt_profile
check "node labelled for the hostPID agent" wait_until "$TIMEOUT" "agent label hostpid" node_agent_is hostpid
check "the hostPID agent runs on $NODE" wait_until "$TIMEOUT" "hostPID agent" hostpid_agent_ready true
check "AgentHostPID event on the node" wait_until 30 "node event" node_event
gen=$(k get latencyprofile "$PROFILE" -o jsonpath='{.metadata.generation}')
check "LatencyNode Applied at generation $gen under the hostPID agent" wait_until "$TIMEOUT" "generation $gen" ln_generation_is "$gen"
check "kernel.sched_autogroup_enabled still 0 (the journal carried over)" sysctl_is sched_autogroup_enabled 0
check "boot parameters for CPU 1 planned, report only (nothing staged)" wait_until 60 "boot plan" boot_planned
say "kubectl latency boot $PROFILE: the arguments the node lacks and why, before anything reboots"
kubectl_latency boot "$PROFILE" | sed 's/^/    /' || true
must "withdraw realtime" apply_profile
check "node back on the standard agent" wait_until "$TIMEOUT" "agent label standard" node_agent_is standard
check "the standard agent runs on $NODE" wait_until "$TIMEOUT" "standard agent" hostpid_agent_ready ""
gen=$(k get latencyprofile "$PROFILE" -o jsonpath='{.metadata.generation}')
check "LatencyNode Applied at generation $gen" wait_until "$TIMEOUT" "generation $gen" ln_generation_is "$gen"

say "Uninstall through the chart with a node tuned: every node reverted first, nothing left"
# In a namespace whose policy requires requests (a LimitRange minimum and
# a ResourceQuota on requests, as many platform teams set), every pod the
# chart creates must carry them, the uninstall hook's included (issue 46).
requests_policy() {
  cat <<YAML
apiVersion: v1
kind: LimitRange
metadata: {name: e2e-require-requests, namespace: latencytier-system}
spec:
  limits:
  # Pod, not Container: a Container minimum also becomes the default
  # request (the API server defaults defaultRequest to min), so it would
  # fill in a missing request instead of refusing the pod.
  - type: Pod
    min: {cpu: 1m, memory: 1Mi}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: e2e-require-requests, namespace: latencytier-system}
spec:
  hard: {requests.cpu: "16", requests.memory: 32Gi, pods: "50"}
YAML
}
apply_requests_policy() { requests_policy | k apply -f - >/dev/null; }
# bare_pod_refused: the policy bites, so the uninstall below proves something.
bare_pod_refused() {
  local out
  out=$(k -n latencytier-system run e2e-no-requests --image=latencytier.local/workload:1 --restart=Never --dry-run=server 2>&1) &&
    { echo "    admitted: $out" >&2; return 1; }
  grep -Eq "No request is specified|must specify requests" <<<"$out" || { echo "    refused for another reason: $out" >&2; return 1; }
}
must "LimitRange and ResourceQuota requiring requests in latencytier-system" apply_requests_policy
check "a pod without requests is refused there" bare_pod_refused
must "helm uninstall" "$LC" undeploy
check "no LatencyProfile or LatencyNode left (no finalizer stuck)" no_latencytier_objects
AFTER_UNINSTALL=$(kernel_snapshot)
if [[ "$BEFORE_UNINSTALL" == "$AFTER_UNINSTALL" ]]; then pass "kernel after uninstall == before the profile"; else
  fail "kernel after uninstall != before the profile"; diff <(echo "$BEFORE_UNINSTALL") <(echo "$AFTER_UNINSTALL") | sed 's/^/    /'
fi
check "node has neither the profile nor the agent label" node_unlabelled
check "nothing of ours runs (namespace latencytier-system gone)" wait_until "$TIMEOUT" "namespace removal" namespace_gone

say "The README shows this run's outputs"
# docs/transcripts/ now holds this run's outputs; the README's copies must
# match them but for figures, ages and names (internal/transcripts).
check "README transcripts match docs/transcripts (go test ./internal/transcripts)" \
  bash -c "cd '$ROOT' && go test -count=1 ./internal/transcripts"
