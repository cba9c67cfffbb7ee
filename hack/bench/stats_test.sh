#!/usr/bin/env bash
# stats_test.sh: checks the pair statistics report.sh prints (stats.sh) on a
# fixed results file. No root, no kernel: run it after changing stats.sh.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
field() { grep -oE "(^| )$2=[^ ]*" <<<"$1" | head -1 | cut -d= -f2 || true; }
source "$BENCH_DIR/stats.sh"
R=$(mktemp)
trap 'rm -f "$R"' EXIT
fail=0
check() { # check NAME GOT WANT
	if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1: got '$2', want '$3'"; fail=1; fi
}

# Per-pair ratios 10, 2 and 4 (first pair first: the median must count it).
cat >"$R" <<'EOF'
loadavg=3.10 run=s-floor
label=s-floor e2e_p99_us=50
label=s-before-1 e2e_p99_us=1000
label=s-after-1 e2e_p99_us=100
label=s-before-2 e2e_p99_us=400
label=s-after-2 e2e_p99_us=200
label=s-before-3 e2e_p99_us=600
label=s-after-3 e2e_p99_us=150
label=t-floor e2e_p99_us=n/a
label=t-before-1 e2e_p99_us=300
label=t-after-1 e2e_p99_us=n/a
label=t-before-2 e2e_p99_us=300
label=t-after-2 e2e_p99_us=100
EOF
check "median, min, max of per-pair ratios; medians; floor; after/floor" \
	"$(pairstat s e2e_p99_us)" "600 150 4 2 10 3 50 3"
check "a pair with a missing value is left out, a missing floor is n/a" \
	"$(pairstat t e2e_p99_us)" "300 100 3 3 3 1 n/a n/a"
check "no runs" "$(pairstat u e2e_p99_us)" "n/a n/a n/a n/a n/a 0 n/a n/a"
check "ratio cell" "$(ratio_cell s e2e_p99_us)" "4.0× (2.0×–10.0×, 3 pairs)"
check "pair table keeps run order and load" "$(pair_table s e2e_p99_us ms | sed -n 3,4p | tr '\n' ' ')" \
	"| s-floor | 0.05 | 3.10 |  | | s-before-1 | 1.00 |  |  | "

# A pair whose "before" failed its precondition is never counted: pairs 1
# and 3 (ratios 10 and 4) are valid, pair 2 (ratio 1, the incident did not
# happen) is not; pair 4 (ratio 6) is valid.
cat >"$R" <<'EOF'
label=v-floor e2e_p99_us=50
label=v-before-1 e2e_p99_us=1000
precondition run=v-before-1 valid=1 hog_cpus=0.98 reason=
label=v-after-1 e2e_p99_us=100
label=v-before-2 e2e_p99_us=100
precondition run=v-before-2 valid=0 hog_cpus=0.60 reason=the_hog's_session_held_0.60_CPUs
label=v-after-2 e2e_p99_us=100
label=v-before-3 e2e_p99_us=800
precondition run=v-before-3 valid=1 hog_cpus=1.00 reason=
label=v-after-3 e2e_p99_us=200
label=v-before-4 e2e_p99_us=600
precondition run=v-before-4 valid=1 hog_cpus=1.00 reason=
label=v-after-4 e2e_p99_us=100
EOF
check "an invalid pair is left out of the medians and ratios" \
	"$(pairstat v e2e_p99_us)" "800 100 6 4 10 3 50 2"
check "invalid pairs are counted" "$(invalid_pairs v)" "1"
check "the pair table says why a pair was left out" \
	"$(pair_table v e2e_p99_us ms | grep -F '| v-before-2 |')" \
	"| v-before-2 | 0.10 |  | **not held: pair left out**: hog cpus=0.60 the hog's session held 0.60 CPUs |"
exit $fail
