#!/usr/bin/env bash
# demo.sh (`make demo`): bring up a real single-node cluster on this machine,
# run workloads with a CPU limit that opt in to quota removal (one of them a
# server that its 500m limit throttles: hack/demo/server.yaml), apply the
# gateway sample profile to this node with a safe rollout, show the node's
# and the server pod's run-queue p99 before and after as the operator
# recorded them, its verdict, the kernel values and the workloads' CFS quota
# before and after; the boot-parameter plan the profile makes for the node
# (policy ReportOnly: `kubectl latency boot` lists the kernel arguments the
# node lacks and why; nothing is staged and nothing reboots); then a noisy
# neighbour (hack/demo/hog.sh) that `kubectl latency explain` names as what
# the server waited behind; then on Ctrl-C
# delete the profile, show the values restored, and tear everything down.
#
#   DEMO_NONINTERACTIVE=1  do not wait for Ctrl-C: hold for DEMO_HOLD seconds (default 5)
#   DEMO_KEEP=1            leave the cluster running at the end (hack/local-cluster down removes it)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/hack/demo/lib.sh"
source "$ROOT/hack/demo/load.sh"
source "$ROOT/hack/demo/hog.sh"
SAMPLE="$ROOT/config/samples/gateway.yaml"
WAIT_APPLY="${DEMO_WAIT_APPLY:-180}"

interrupted=0
finished=0

# gateway_with_rollout is the sample with a safe rollout and short windows
# (5s measurement interval, judged 10s after the move) so the demo shows the
# verdict within a minute; the latency budget is widened to 50ms because
# this shared 2-CPU VM, busy with the server and the cluster, stays above
# the sample's 2ms even tuned, and a budget miss counts as a regression.
# bootParameters asks, report only, for the two typed extras (the sample
# isolates no CPU, and isolating one of this machine's two would move the
# demo's pods): the agent reports the plan, stages nothing, never reboots.
gateway_with_rollout() {
  sed -e 's/^    interval: 30s/    interval: 5s\n    namespaceSelector: {matchLabels: {latencytier.io\/latency-tenant: "true"}}/' -e 's/^    runQueueP99: 2ms/    runQueueP99: 50ms/' "$SAMPLE"
  cat <<'EOF'
  rollout:
    maxInFlight: 1
    verificationWindow: 10s
    maxP99Regression: "1.2"
  bootParameters:
    policy: ReportOnly
    skewTick: Enabled
    maxCState: 1
EOF
}
# boot_planned: the agent reported the node's boot-parameter plan.
boot_planned() { [[ -n "$(k get latencynode "$NODE" -o jsonpath='{.status.boot.arguments[*].argument}' 2>/dev/null)" ]]; }
rollout_done() { [[ "$(rollout_phase gateway)" =~ ^(Complete|RolledBack|Paused)$ ]]; }

# finish reverts and tears down, whatever state the demo is in.
finish() {
  local rc=$?
  ((finished)) && return
  finished=1
  trap '' INT TERM
  stop_hog
  end_load
  if k get latencyprofile gateway >/dev/null 2>&1; then
    say "Deleting the profile: the agent restores every value it journaled"
    k delete latencyprofile gateway --wait=true --timeout="${WAIT_APPLY}s" || true
    if manager_present; then
      wait_until "$WAIT_APPLY" "LatencyNode $NODE to go" bash -c "! '$LC' kubectl get latencynode '$NODE'" || true
    fi
    show_values "After revert"
  fi
  unlock_kernel
  if [[ "${DEMO_KEEP:-}" == 1 ]]; then
    say "Leaving the cluster running (DEMO_KEEP=1): export KUBECONFIG=$("$LC" kubeconfig); hack/local-cluster down"
  else
    say "Tearing the cluster down"
    "$LC" down
  fi
  exit "$rc"
}
trap finish EXIT
trap 'interrupted=1' INT TERM

say "Bringing up a single-node Kubernetes cluster on this machine (node $NODE)"
"$LC" up

say "Starting two hostNetwork workloads with a CPU limit (latency-workload opts in: latencytier.io/cpu-quota=disable)"
k apply -f "$ROOT/hack/demo/workloads.yaml"
k wait --for=condition=Ready pod/latency-workload pod/plain-workload --timeout=120s
# Hold the host-wide lock the kernel-changing Go tests take, so neither they
# nor we see the other's temporary values.
if ! flock -n "$KERNEL_LOCK" true; then say "Waiting for kernel tests to release $KERNEL_LOCK"; fi
lock_kernel
show_values "Before: the kernel and the workloads' CFS quota as the kubelet set them"

say "Starting rollout-server: 700 requests/s of 1 ms CPU each (0.7 CPU) under a 500m limit, so CFS throttles it"
start_load

say "Labelling node $NODE $PROFILE_LABEL= and applying config/samples/gateway.yaml with a safe rollout"
k label node "$NODE" "$PROFILE_LABEL=" --overwrite
# The sample grants quota removal only to namespaces the admin labelled.
k label namespace default latencytier.io/latency-tenant=true --overwrite
gateway_with_rollout | sed -n '/^  measurement:/,$p'
gateway_with_rollout | k apply -f -
t_apply=$SECONDS

if manager_present; then
  say "Waiting for the agent DaemonSet pod on $NODE, its baseline, the move and the verdict"
  wait_until "$WAIT_APPLY" "the agent pod to run" agent_ready && k -n latencytier-system get pods -o wide
  wait_until "$WAIT_APPLY" "the rollout to finish" rollout_done || true
  say "The evidence as the operator recorded it ($((SECONDS - t_apply))s after kubectl apply)"
  show_evidence gateway
  say "kubectl latency boot gateway: the kernel arguments the profile asks of $NODE, which it lacks and why (ReportOnly: nothing staged, nothing rebooted)"
  wait_until 60 "the boot-parameter plan" boot_planned || true
  kubectl_latency boot gateway | sed 's/^/  /' || true
  show_noisy_neighbour
else
  say "The manager is not in config/default yet: the profile is stored, nothing tunes the node"
fi

say "kubectl get latencyprofiles -o wide"
k get latencyprofiles -o wide
say "kubectl get latencynodes"
k get latencynodes -o wide 2>/dev/null || true
show_values "After: the profile applied by the agent"

if [[ "${DEMO_NONINTERACTIVE:-}" == 1 ]]; then
  say "Holding for ${DEMO_HOLD:-5}s (DEMO_NONINTERACTIVE=1)"
  for ((i = 0; i < ${DEMO_HOLD:-5} && !interrupted; i++)); do sleep 1 || true; done
else
  say "The node stays tuned. Press Ctrl-C to revert and tear down."
  while ((!interrupted)); do sleep 1 || true; done
fi
exit 0 # Ctrl-C here is the normal end: finish reverts and tears down
