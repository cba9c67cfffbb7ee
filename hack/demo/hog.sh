# hog.sh: the demo's noisy neighbour (sourced by hack/demo.sh after
# hack/demo/lib.sh and load.sh). hack/demo/hog.yaml starts a busy pod beside
# the measured rollout-server; the agent charges the server's run-queue wait
# to what ran instead, and `kubectl latency explain NODE` names the hog in
# its "who made the measured pods wait" line.

HOG_POD=batch-hog

start_hog() {
  k apply -f "$ROOT/hack/demo/hog.yaml" >/dev/null
  k wait --for=condition=Ready "pod/$HOG_POD" --timeout=120s >/dev/null
}
stop_hog() { k delete pod "$HOG_POD" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1 || true; }

# server_top_offender prints "<class> <name>" of rollout-server's largest
# offender in status.latency.pods.
server_top_offender() {
  k get latencynode "$NODE" -o jsonpath="{range .status.latency.pods[?(@.name==\"$SERVER_POD\")]}{.offenders[0].class} {.offenders[0].name}{end}" 2>/dev/null
}
hog_is_top() { [[ "$(server_top_offender)" == "Pod default/$HOG_POD" ]]; }

# kubectl_latency runs the kubectl plugin (make kubectl-latency builds
# bin/kubectl-latency; with bin/ on PATH it is `kubectl latency ...`).
kubectl_latency() {
  make -s -C "$ROOT" kubectl-latency >/dev/null
  "$ROOT/bin/kubectl-latency" --kubeconfig "$("$LC" kubeconfig)" "$@"
}

# show_noisy_neighbour starts the hog, waits until the agent's attribution
# names it rollout-server's top offender, and prints what a person sees:
# kubectl latency explain, and the NoisyNeighbor finding.
show_noisy_neighbour() {
  say "A noisy neighbour: $HOG_POD (two busy workers, one CPU requested, no limit) beside $SERVER_POD"
  start_hog
  k get pods -o wide | sed 's/^/  /'
  if wait_until 120 "the attribution to name $HOG_POD" hog_is_top; then
    say "kubectl latency explain $NODE: who made the measured pods wait"
  else
    say "kubectl latency explain $NODE (the hog is not $SERVER_POD's top offender: $(server_top_offender))"
  fi
  kubectl_latency explain "$NODE" | sed 's/^/  /' || true
  k get latencynode "$NODE" -o jsonpath='{range .status.findings[?(@.type=="NoisyNeighbor")]}{"  finding NoisyNeighbor: "}{.message}{"\n"}{end}' || true
}
