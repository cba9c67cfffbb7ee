#!/usr/bin/env bash
# summarize.sh SHARE ROW QEMU_RC SECONDS: prints the row's summary line and
# writes what failed (each failing test's own output, or the end of the
# console log if the VM never ran the tests) to SHARE/failures. Exits 1
# when the row failed.
set -uo pipefail
share="$1" row="$2" qrc="$3" secs="$4"
R="$share/results" F="$share/failures"
: >"$F"
if [[ ! -f "$R/env" ]]; then
  { echo "--- $row: the VM did not run the tests (qemu exit $qrc); end of $share/console.log:"
    tail -40 "$share/console.log"; } >"$F"
  printf '%-13s FAIL  no results (qemu exit %s, %d s)\n' "$row" "$qrc" "$secs"; exit 1
fi
kernel="$(awk '$1=="kernel"{print $2}' "$R/env")"
cg="$(awk '$1=="cgroup"{print $2}' "$R/env")"
init="$(awk '$1=="init"{print $2, $3, $4}' "$R/env")"
pass=0 fail=0 skip=0 bad=()
for d in "$share"/pkg/*/; do
  n="$(basename "$d")"
  if [[ ! -f "$R/$n.rc" ]]; then
    bad+=("$n:unfinished")
    { echo "--- $row $n: did not finish (VM timeout?); end of its output:"; tail -40 "$R/$n.out" 2>/dev/null; } >>"$F"
    continue
  fi
  for out in "$R/$n.systemd.out" "$R/$n.out" "$R/$n".boot*.out; do
    [[ -f "$out" ]] || continue
    rc="$(cat "${out%.out}.rc" 2>/dev/null || echo missing)"
    pass=$((pass + $(grep -c '^--- PASS' "$out"))); skip=$((skip + $(grep -c '^--- SKIP' "$out")))
    f="$(grep -c '^--- FAIL' "$out")"; fail=$((fail + f))
    [[ "$rc" == 0 ]] && continue
    bad+=("$n")
    if [[ "$f" -gt 0 ]]; then
      # each failing top-level test from its RUN line to its FAIL line
      for t in $(awk '/^--- FAIL: /{print $3}' "$out"); do
        echo "--- $row $n: $t" >>"$F"
        awk -v t="$t" '$0 == "=== RUN   " t {on=1} on {print} on && $0 ~ "^--- FAIL: " t " " {exit}' "$out" >>"$F"
      done
    else
      # a panic or timeout: its message, and the project's frames of the stacks
      { echo "--- $row $n: exit $rc without a failing test (panic, timeout?); from $out:"
        grep -m1 -A3 '^panic:' "$out" || tail -20 "$out"
        grep -A1 '^latencytier.io/' "$out" | grep -v '^--$' | head -24; } >>"$F"
    fi
  done
done
[[ "$qrc" == 0 ]] || bad+=("qemu-exit-$qrc$([[ $qrc == 124 ]] && echo '(VM_TIMEOUT)')")
# where the row's time went, from the guest's uptime stamps (guest.sh)
split=""
if [[ -f "$R/timing" ]]; then
  split="$(awk -v total="$secs" '{ t[$1] = $2 }
    END { b = t["boot1-start"]
      if (!("boot1-tests-done" in t)) { printf "boot %d s, tests unfinished", b; exit }
      d = t["boot1-tests-done"]
      printf "boot %d s, tests %d s (systemd %d s)", b, d - b, t["systemd-tests-done"] - b
      up = d   # each boot starts its uptime at 0: the boots add up
      for (k = 2; k <= 5; k++) if (("boot" k "-start") in t) {
        printf ", boot %d %d s, its tests %d s", k, t["boot" k "-start"], t["boot" k "-done"] - t["boot" k "-start"]
        up += t["boot" k "-done"] }
      printf ", firmware+shutdowns %d s", total - up }' "$R/timing")"
fi
verdict=PASS; [[ ${#bad[@]} -eq 0 ]] || verdict=FAIL
printf '%-13s %s  %-16s %-9s %-20s %3d passed %3d skipped %2d failed  %3d s%s%s\n' "$row" "$verdict" "$kernel" "$cg" "$init" \
  "$pass" "$skip" "$fail" "$secs" "${split:+ ($split)}" "${bad:+  failing: ${bad[*]}}"
[[ $verdict == PASS ]]
