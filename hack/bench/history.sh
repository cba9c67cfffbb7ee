#!/usr/bin/env bash
# history.sh RESULTS [WHEN]: one row of docs/benchmarks.md's table of
# autogroup runs on record, from one run's results.txt: when it ran, the
# load, how many pairs held the precondition, the medians and the ratio over
# those, and the precondition's own figures (the hog's session's CPUs, the
# server's against what it used alone). run.sh appends the row to
# hack/bench/autogroup-runs.md after every run that included autogroup, so
# that a headline is judged against every run, not only the last.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
field() { grep -oE "(^| )$2=[^ ]*" <<<"$1" | head -1 | cut -d= -f2 || true; }
source "$BENCH_DIR/stats.sh"
R=$1
WHEN=${2:-$(date -u -r "$R" '+%Y-%m-%d %H:%M UTC')}
grep -q '^label=autogroup-after-' "$R" || exit 0
summary=$(grep '^scenario=autogroup pairs=' "$R" | tail -1 || true)
st=($(pairstat autogroup e2e_p99_us))
range() { # KEY VALID(1|0): min–max of KEY over precondition lines with valid=VALID
	grep -E "^precondition run=autogroup-before-[0-9]+ valid=$2 " "$R" | while read -r l; do field "$l" "$1"; done |
		sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { if (NR) printf (lo == hi ? "%s" : "%s–%s"), lo, hi; else printf "–" }'
}
start=$(grep '^scenario=autogroup phase=start ' "$R" | tail -1 | sed 's/.*loadavg=//' || true)
end=$(grep '^scenario=autogroup phase=end ' "$R" | tail -1 | sed 's/.*loadavg=//' || true)
alone=$(field "$(grep '^precondition run=autogroup-before-' "$R" | tail -1)" server_alone_cpus)
if [ "${st[5]}" -ge 3 ]; then
	verdict="$(x "${st[2]}") ($(x "${st[3]}")–$(x "${st[4]}")); $(fmt ms "${st[0]}") → $(fmt ms "${st[1]}") ms"
else
	verdict="**invalid**: no ratio"
fi
invalid=$(invalid_pairs autogroup)
reasons="–"
if [ "$invalid" -gt 0 ]; then
	# The reasons without their figures (those are in the ranges), each once.
	why=$(grep -E '^precondition run=autogroup-before-[0-9]+ valid=0 ' "$R" | sed 's/.*reason=//' | tr ';' '\n' |
		sed -E 's/[0-9]+(\.[0-9]+)?/#/g; s/_/ /g' | sort -u | paste -sd ';' | sed 's/;/; /g')
	reasons="$invalid: hog $(range hog_cpus 0) CPUs, server $(range server_cpus 0); $why"
fi
echo "| $WHEN | $start / $end | $(field "$summary" valid_pairs) of $(field "$summary" pairs) | $verdict | $(range hog_cpus 1) | $(range server_cpus 1) of ${alone:-?} alone | $reasons |"
