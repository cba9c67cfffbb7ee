# load.sh: field note 004's load and the rollout's evidence, shared by
# hack/e2e.sh and hack/demo.sh (sourced after hack/demo/lib.sh, before they
# set their own traps: hack/bench/lib.sh installs traps of its own).
#
# The load is hack/bench's autogroup scenario (hack/bench/autogroup.sh): the
# multi-threaded server of hack/bench/workload.c in one session and a gzip
# hog (hack/bench/lib.sh start_hog) in another, on the host, so the agent's
# node-wide run-queue histogram sees it. It runs until stop_load.

LOAD_OUT="$(mktemp -d /tmp/latencytier-load.XXXXXX)"
OUT="$LOAD_OUT"
source "$ROOT/hack/bench/lib.sh"
trap - EXIT INT TERM # the caller's traps decide; stop_load undoes the hog
AUTOGROUP=/proc/sys/kernel/sched_autogroup_enabled
LOAD_PID=""

# start_load starts the hog (two gzip loops per CPU, one session) and the
# server (16 workers, 1200 requests/s of 1 ms each: 60 % of a 2-CPU node,
# the field note's gateway) in a session of its own, for at most 15 min.
start_load() {
  [[ -x "$LOAD_OUT/workload" ]] ||
    gcc -O2 -Wall -pthread -o "$LOAD_OUT/workload" "$ROOT/hack/bench/workload.c" -lm
  start_hog "$((2 * $(nproc)))"
  setsid "$LOAD_OUT/workload" -n 1080000 -r 1200 -s 1000 -w 16 -T 900 -l rollout \
    >"$LOAD_OUT/workload.out" 2>&1 &
  LOAD_PID=$!
}

# stop_load stops both; safe to call when nothing runs.
stop_load() {
  # wait says 143 (killed by TERM): not an error under the callers' set -e.
  [[ -n "$LOAD_PID" ]] && { kill "$LOAD_PID" 2>/dev/null; wait "$LOAD_PID" 2>/dev/null || true; LOAD_PID=""; }
  undo_all # the hog
  true
}
end_load() { stop_load; rm -rf "$LOAD_OUT"; }

# rollout_phase NAME prints the profile's status.rollout.phase.
rollout_phase() { k get latencyprofile "$1" -o jsonpath='{.status.rollout.phase}' 2>/dev/null; }
rollout_phase_is() { [[ "$(rollout_phase "$1")" == "$2" ]]; }

# show_evidence NAME prints what the operator recorded: the node's baseline
# and current p99 and verdict (kubectl get ln -o wide), the profile's row and
# its rollout status.
show_evidence() {
  echo "  \$ kubectl get ln -o wide"
  k get latencynodes -o wide | sed 's/^/    /'
  echo "  \$ kubectl get lp $1 -o wide"
  k get latencyprofile "$1" -o wide | sed 's/^/    /'
  k get latencynode "$NODE" -o jsonpath='{"    baseline: p99 "}{.status.baseline.runQueue.p99}{" over "}{.status.baseline.runQueue.samples}{" wakeups ("}{.status.baseline.action}{" "}{.status.baseline.revision}{")\n    current:  p99 "}{.status.current.runQueue.p99}{" over "}{.status.current.runQueue.samples}{" wakeups ("}{.status.current.action}{" "}{.status.current.revision}{")\n    verdict:  "}{.status.verdict.reason}{": "}{.status.verdict.message}{"\n"}' 2>/dev/null || true
  k get latencyprofile "$1" -o jsonpath='{"    rollout:  "}{.status.rollout.phase}{" revision "}{.status.rollout.revision}{": "}{.status.rollout.message}{"\n"}'
}
