# load.sh: the rollout's measured workload and its evidence, shared by
# hack/e2e.sh and hack/demo.sh (sourced after hack/demo/lib.sh).
#
# The load is hack/demo/server.yaml: hack/bench's server workload in a pod
# with a 500m CPU limit it needs 0.7 CPU under, so the CFS quota throttles
# it every period and freezes it until the next. The rollout profiles measure it by
# label (measurement.podSelector app=rollout-server), so each verdict can
# rest on the pod's own run delay, not only on the node-wide histogram that
# everything else on a shared 2-CPU VM moves.

SERVER_POD=rollout-server

# start_load creates the server pod and waits until it runs.
start_load() {
  k apply -f "$ROOT/hack/demo/server.yaml" >/dev/null
  k wait --for=condition=Ready "pod/$SERVER_POD" --timeout=120s >/dev/null
}

# stop_load deletes it; safe to call when it does not exist.
stop_load() {
  k delete pod "$SERVER_POD" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1 || true
}
end_load() { stop_load; }

# rollout_phase NAME prints the profile's status.rollout.phase.
rollout_phase() { k get latencyprofile "$1" -o jsonpath='{.status.rollout.phase}' 2>/dev/null; }
rollout_phase_is() { [[ "$(rollout_phase "$1")" == "$2" ]]; }

# evidence_p99 WHICH KIND prints status.WHICH (baseline, current).KIND
# (pods, runQueue).p99 of the node's LatencyNode.
evidence_p99() { k get latencynode "$NODE" -o jsonpath="{.status.$1.$2.p99}" 2>/dev/null; }

# show_evidence NAME prints what the operator recorded: the node's baseline
# and current p99 (node-wide and the measured pod's), the throttled ratio
# (kubectl get ln -o wide), the profile's row, its rollout and the node's verdict there.
show_evidence() {
  echo "  \$ kubectl get ln -o wide"
  k get latencynodes -o wide | sed 's/^/    /'
  echo "  \$ kubectl get lp $1 -o wide"
  k get latencyprofile "$1" -o wide | sed 's/^/    /'
  # Go templates, not jsonpath: jsonpath prints a missing figure as
  # nothing ("pod p99  ( wakeups)"); these print "-" instead.
  local w
  for w in baseline current; do
    k get latencynode "$NODE" -o go-template="{{\"    $w: \"}}{{with .status.$w}}{{.action}} {{or .revision \"-\"}}: run queue p99 {{with .runQueue}}{{or .p99 \"-\"}} ({{or .samples 0}} wakeups){{else}}-{{end}}, pod p99 {{with .pods}}{{or .p99 \"-\"}} ({{or .samples 0}} wakeups){{else}}-{{end}}, pod throttled ratio {{or .throttledRatio \"-\"}}{{else}}-{{end}}
" 2>/dev/null || true
  done
  # The verdict is the profile's (listed when not Improved/Unchanged).
  k get latencyprofile "$1" -o go-template='{{"    verdict:  "}}{{with .status.rollout}}{{$v := "-"}}{{range .verdicts}}{{if eq .node "'"$NODE"'"}}{{$v = printf "%s: %s" .verdict (or .message "-")}}{{end}}{{end}}{{$v}} (improved {{or .improved 0}}, unchanged {{or .unchanged 0}}){{else}}- (no rollout){{end}}
' 2>/dev/null || true
  k get latencyprofile "$1" -o go-template='{{"    rollout:  "}}{{with .status.rollout}}{{or .phase "-"}} revision {{or .revision "-"}}: {{or .message "-"}}{{else}}-{{end}}
'
}
