# stats.sh: pair statistics over $OUT/results.txt for report.sh (sourced).
# Every scenario's runs are labelled S-floor, S-before-I, S-after-I (see
# run_pairs in lib.sh); values are µs unless the key says otherwise.

# vals S PHASE KEY: KEY of every PHASE run of scenario S, in pair order,
# leaving out both halves of a pair whose "before" run failed its
# precondition ("precondition run=S-before-I valid=0", see run_pairs).
vals() {
	local l i
	grep -E "^label=$1-$2(-[0-9]+)? " "$R" | while read -r l; do
		i=$(field "$l" label | sed -nE 's/.*-([0-9]+)$/\1/p')
		[ -n "$i" ] && grep -qE "^precondition run=$1-before-$i valid=0( |$)" "$R" && continue
		field "$l" "$3"
	done
}

# invalid_pairs S: how many pairs of S were left out for their precondition.
invalid_pairs() { grep -cE "^precondition run=$1-before-[0-9]+ valid=0( |$)" "$R" || true; }

# pairstat S KEY: "before after ratio min max pairs floor after/floor":
# the medians of the before and after values, the median, min and max of
# the per-pair ratios before/after, the number of complete pairs, the floor
# run's value and the median after as a multiple of the floor.
# Missing values are "n/a".
pairstat() {
	paste -d' ' <(vals "$1" before "$2") <(vals "$1" after "$2") | awk -v fl="$(vals "$1" floor "$2" | head -1)" '
		function sort(x, n,   i, j, t) { for (i = 1; i < n; i++) for (j = i; j > 0 && x[j - 1] > x[j]; j--) { t = x[j]; x[j] = x[j - 1]; x[j - 1] = t } }
		function med(x, n) { if (!n) return "n/a"; sort(x, n); return n % 2 ? x[int(n / 2)] : (x[n / 2 - 1] + x[n / 2]) / 2 }
		BEGIN { n = m = 0 }
		function num(v) { return v ~ /^[0-9.]+$/ }
		num($1) && num($2) { b[n] = $1; a[n] = $2; if ($2 > 0) r[m++] = $1 / $2; n++ }
		END { mb = med(b, n); ma = med(a, n); mr = med(r, m); sort(r, m)
			printf "%s %s %s %s %s %d %s %s\n", mb, ma, mr, m ? r[0] : "n/a", m ? r[m - 1] : "n/a", m,
				num(fl) ? fl : "n/a", (num(fl) && fl > 0 && ma != "n/a") ? ma / fl : "n/a" }'
}

# fmt UNIT V: a µs value shown in ms (UNIT ms), µs (us) or as it is (-).
fmt() {
	awk -v u="$1" -v v="$2" 'BEGIN { if (v !~ /^[0-9.]+$/) print "n/a"
		else if (u == "ms") printf "%.2f", v / 1000; else if (u == "us") printf "%.0f", v; else printf "%g", v }'
}
# x V: a ratio shown as "3.4×".
x() { awk -v v="$1" 'BEGIN { if (v !~ /^[0-9.e+-]+$/) print "n/a"; else printf (v < 0.0095 ? "%.3f×" : v < 0.095 ? "%.2f×" : "%.1f×"), v }'; }


# ratio_cell S KEY: "median× (min–max, N pairs)".
ratio_cell() {
	local st; st=($(pairstat "$1" "$2"))
	echo "$(x "${st[2]}") ($(x "${st[3]}")–$(x "${st[4]}"), ${st[5]} pairs)"
}

# metric_row S KEY UNIT TITLE: floor, median before, median after, ratio, after/floor.
metric_row() {
	local st; st=($(pairstat "$1" "$2"))
	echo "| $4 | $(fmt "$3" "${st[6]}") | $(fmt "$3" "${st[0]}") | $(fmt "$3" "${st[1]}") | $(x "${st[2]}") ($(x "${st[3]}")–$(x "${st[4]}")) | $(x "${st[7]}") |"
}

# pair_table S KEY UNIT: every run of S with KEY and the 1-min load average
# when it started, in the order they ran; a "before" run whose scenario
# checked its precondition says whether it held (see run_pairs).
pair_table() {
	local l label pre cell
	echo "| run | $2 ($3) | load avg (1 min) at start | precondition |"
	echo "|---|---|---|---|"
	grep -E "^label=$1-(floor|before-[0-9]+|after-[0-9]+) " "$R" | while read -r l; do
		label=$(field "$l" label)
		pre=$(grep -E "^precondition run=$label " "$R" | tail -1 || true)
		cell=""
		if [ -n "$pre" ]; then
			if [ "$(field "$pre" valid)" = 1 ]; then cell="held"; else cell="**not held: pair left out**"; fi
			cell+=": $(sed -E 's/^precondition run=[^ ]* valid=[01] ?//; s/reason=//; s/_/ /g' <<<"$pre")"
		fi
		echo "| $label | $(fmt "$3" "$(field "$l" "$2")") | $(grep -E "^loadavg=[^ ]* run=$label\$" "$R" | tail -1 | sed 's/ .*//; s/loadavg=//') | $cell |"
	done
}
