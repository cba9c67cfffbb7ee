# shellcheck shell=bash disable=SC2154
# Sourced by test.sh (CLUSTER_SCENARIOS): a regression on the canary rolls it back;
# its helpers and NODES, SYSCTL and LABEL come from there.

say "Rollback: a regression on the canary rolls it back, and the other node is never touched"
# The same sysctl, judged after a 40s verification window. As soon as a
# guest's kernel reads 10 (the canary moved), that guest starts a CPU hog
# (guest-node.sh: busy loops, 2 per vCPU and more, for at most 240s, in a
# unit of their own at CPUWeight 10000 so cgroup v2 lets them take the CPUs), so
# the windows judged after the move wait behind it: the node-wide run-queue
# p99 rises past maxP99Regression, the same 4 as above (which the first
# scenario's idle windows stay under), the canary is Regressed and reverted
# (the profile's first revision: no tuning to go back to), and the other
# node must read 60 in every row, also for ROLLBACK_WATCH seconds after.
HOGS=${ROLLBACK_HOGS:-6}
for n in "${NODES[@]}"; do
  check "$n: vm.swappiness is 60 before (guest kernel)" [ "$(ask "$n" $SYSCTL)" = 60 ]
  k label node "$n" "$LABEL=" --overwrite >/dev/null   # (scenario-rollout's too, when it ran)
done
t=$SECONDS
canary_profile cluster-rollback 40s >"$STATE/cluster-rollback.yaml"
must "apply cluster-rollback (canary 1, verificationWindow 40s)" k apply -f "$STATE/cluster-rollback.yaml"
timeline="$STATE/rollback-timeline.txt"; : >"$timeline"
canary=none other=none hog_s=- back_s=- watch_until=
# row: s since apply at the kernel reads, node-6-1, node-6-12, s at the
# status read, phase, regressed verdicts, rolledBack, event
while ((SECONDS - t < ${ROLLOUT_TIMEOUT:-900})); do
  tk=$((SECONDS - t))
  ask node-6-1 $SYSCTL >"$STATE/a.1" & ask node-6-12 $SYSCTL >"$STATE/a.2" & wait
  a=$(cat "$STATE/a.1") b=$(cat "$STATE/a.2"); a=${a:-?} b=${b:-?}   # ? : no answer (a row keeps its columns)
  ts=$((SECONDS - t))
  st=$(k get latencyprofile cluster-rollback -o jsonpath='{.status.rollout.phase} {.status.rollout.regressed} {.status.rollout.rolledBack}' 2>/dev/null || true)
  read -r phase re rb <<<"$st"
  ev=
  if [[ $canary == none && ($a == 10 || $b == 10) ]]; then
    if [[ $a == 10 && $b == 10 ]]; then canary=both
    elif [[ $a == 10 ]]; then canary=node-6-1 other=node-6-12
    else canary=node-6-12 other=node-6-1; fi
    if [[ $canary != both ]]; then ev="hog:$(ask "$canary" "hog $HOGS 240")"; hog_s=$((SECONDS - t)); fi
  fi
  if [[ $hog_s != - && ${re:-0} -gt 0 && $hog_s != *-* ]]; then
    ev="hog-stop:$(ask "$canary" "hog stop")"; hog_s="$hog_s-$((SECONDS - t))"
  fi
  echo "$tk $a $b $ts ${phase:--} ${re:-0} ${rb:-0} $ev" >>"$timeline"
  [[ $canary == both ]] && break
  [[ $phase == Complete || $phase == Paused || $phase == Failed ]] && break
  if [[ $phase == RolledBack && $canary != none && -z $watch_until ]]; then
    [[ $(if [[ $canary == node-6-1 ]]; then echo "$a"; else echo "$b"; fi) == 60 ]] &&
      { back_s=$tk; watch_until=$((SECONDS + ${ROLLBACK_WATCH:-30})); }
  fi
  [[ -n $watch_until ]] && ((SECONDS >= watch_until)) && break
  sleep 1
done
[[ $canary != none && $canary != both ]] && ask "$canary" "hog stop" >/dev/null
figure rollback_s $((SECONDS - t))
echo "  timeline (kernel read s, node-6-1, node-6-12, status read s, phase, regressed, rolledBack, hog):"
sed 's/^/    /' "$timeline"
check "a node's kernel moved to 10 (the canary)" [ "$canary" != none ]
check "the canary moved alone (the other still 60)" [ "$canary" != both ]
if [[ $canary == node-6-1 || $canary == node-6-12 ]]; then
  col=3; [[ $canary == node-6-12 ]] && col=2
  tc=$(awk -v c="$((5 - col))" '$c == 10 {print $1; exit}' "$timeline")
  figure rollback_canary_moved_s "${tc:-?}"; figure rollback_hog_s "$hog_s"; figure rollback_canary_back_s "$back_s"
  rows=$(wc -l <"$timeline")
  check "$other read 60 in all $rows rows, until ${ROLLBACK_WATCH:-30}s after the canary was back (guest kernel)" \
    awk -v c="$col" '$c != 60 {exit 1}' "$timeline"
  phase=$(k get latencyprofile cluster-rollback -o jsonpath='{.status.rollout.phase}')
  verdict=$(k get latencyprofile cluster-rollback -o jsonpath='{.status.rollout.verdicts[?(@.node=="'"$canary"'")].verdict}')
  msg=$(k get latencyprofile cluster-rollback -o jsonpath='{.status.rollout.verdicts[?(@.node=="'"$canary"'")].message}')
  echo "  ($canary's verdict: ${verdict:-none}: ${msg:-})"
  check "rollout RolledBack (phase $phase: $(k get latencyprofile cluster-rollback -o jsonpath='{.status.rollout.message}'))" [ "$phase" = RolledBack ]
  regressed_over_4() { [[ $verdict == Regressed && $msg == *"×"*" > 4×"* ]]; }
  check "$canary's verdict is Regressed, on a p99 ratio over 4×" regressed_over_4
  check "$other has no verdict (never moved, never judged)" \
    [ -z "$(k get latencyprofile cluster-rollback -o jsonpath='{.status.rollout.verdicts[?(@.node=="'"$other"'")].verdict}')" ]
  check "$canary: vm.swappiness back to 60 after the rollback (guest kernel)" [ "$(ask "$canary" $SYSCTL)" = 60 ]
  check "$other: vm.swappiness still 60 (guest kernel)" [ "$(ask "$other" $SYSCTL)" = 60 ]
fi
k get latencyprofile cluster-rollback -o wide || true
k get ln -o wide || true
# Last: a profile deleted with a node still on Baseline (the other node,
# never moved) is released only when the manager retires that node's
# LatencyNode too (the first scenario's deletion, both nodes applied, took
# 6s).
if ! k delete latencyprofile cluster-rollback --timeout=${ROLLBACK_DELETE_TIMEOUT:-120}s >/dev/null; then
  fail "delete cluster-rollback: still there after ${ROLLBACK_DELETE_TIMEOUT:-120}s ($(k get latencyprofile cluster-rollback -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}'); LatencyNodes: $(k get ln -o jsonpath='{range .items[*]}{.metadata.name}={.spec.action} {end}'))"
fi
for n in "${NODES[@]}"; do
  check "$n: vm.swappiness 60 after cluster-rollback's deletion (guest kernel)" wait_until 300 bash -c "[ \"\$('$C' ask $n $SYSCTL)\" = 60 ]"
done
