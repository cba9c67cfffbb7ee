#!/usr/bin/env bash
# plot.sh PNG: floor, before and after end-to-end latency distributions of
# every workload scenario that ran (samples in $OUT/samples; the before and
# after curves pool all pairs), as complementary CDFs on log-log axes: the
# tail is where these incidents live.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
trap - EXIT
png=$1

# ccdf DEST SAMPLES...: "latency_ms fraction_slower" points, thinned to ~400.
ccdf() {
	local dest=$1; shift
	cat "$@" | cut -d' ' -f2 | sort -g | awk '{ v[NR] = $1 } END {
		step = int(NR / 400); if (step < 1) step = 1
		for (i = 1; i <= NR; i += step) printf "%.4f %.6g\n", v[i] / 1000, (NR - i + 1) / NR
		printf "%.4f %.6g\n", v[NR] / 1000, 1 / NR }' >"$dest"
}

panels=()
for s in autogroup throttling irq; do
	[ -s "$OUT/samples/$s-before-1.txt" ] && [ -s "$OUT/samples/$s-after-1.txt" ] && [ -s "$OUT/samples/$s-floor.txt" ] || continue
	ccdf "$OUT/logs/$s-floor.ccdf" "$OUT/samples/$s-floor.txt"
	ccdf "$OUT/logs/$s-before.ccdf" "$OUT/samples/$s"-before-[0-9]*.txt
	ccdf "$OUT/logs/$s-after.ccdf" "$OUT/samples/$s"-after-[0-9]*.txt
	panels+=("$s")
done
[ ${#panels[@]} -gt 0 ] || { log "no samples to plot"; exit 0; }

declare -A title=(
	[autogroup]="autogroup: gzip hog in another session"
	[throttling]="CFS quota: pod quota vs. removed"
	[irq]="IRQs: left alone vs. steered off CPU 1"
)
declare -A after=([autogroup]="after: gateway profile (autogroup off)" [throttling]="after: agent removed the pod quota" [irq]="after: movable IRQs steered to CPU 0")
{
	echo "set terminal pngcairo size $((520 * ${#panels[@]})),440 font 'sans,10'"
	echo "set output '$png'"
	echo "set multiplot layout 1,${#panels[@]}"
	echo "set logscale xy; set grid; set key bottom left"
	echo "set xlabel 'end-to-end latency (ms)'; set ylabel 'fraction of requests slower'"
	echo "set yrange [1e-5:1.1]; set format x '%g'; set format y '10^{%L}'"
	for s in "${panels[@]}"; do
		echo "set title '${title[$s]}'"
		echo "plot '$OUT/logs/$s-floor.ccdf' w l lw 1 dt 2 lc rgb '#555555' t 'floor: no disturbance', \\"
		echo "     '$OUT/logs/$s-before.ccdf' w l lw 2 lc rgb '#c0392b' t 'before (all pairs)', \\"
		echo "     '$OUT/logs/$s-after.ccdf' w l lw 2 lc rgb '#2471a3' t '${after[$s]} (all pairs)'"
	done
	echo "unset multiplot"
} | gnuplot
log "wrote $png"
