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
	"| s-floor | 0.05 | 3.10 | | s-before-1 | 1.00 |  | "
exit $fail
