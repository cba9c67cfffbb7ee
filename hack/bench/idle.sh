#!/usr/bin/env bash
# idle.sh: issue 15's idle-state exit-latency limit. cyclictest (rt-tests)
# wakes one SCHED_FIFO thread per CPU every IDLE_INTERVAL_US and records how
# late each wakeup is: the cost of leaving an idle state lands there. Before:
# the machine's default (pm_qos_resume_latency_us "0" = no constraint, every
# cpuidle state enabled). After: the profile "idle" with
# power.all.maxIdleExitLatency 0us applied through the agent (per-CPU PM QoS
# "n/a" = no exit latency tolerated, so the governor keeps the CPU polling),
# or, while the agent does not know tuning.power yet, the same per-CPU PM QoS
# written here (agent_path=fallback). No extra load: an idle limit matters
# when the CPU is idle. Floor: the same as "before", once more.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

SECS=${IDLE_SECONDS:-10}
INTERVAL=${IDLE_INTERVAL_US:-1000}
PRIO=${IDLE_PRIO:-95}
HIST_US=${IDLE_HIST_US:-20000}
CPUS=/sys/devices/system/cpu
args=(-m -q -D "$SECS" -t -a -p "$PRIO" -i "$INTERVAL" -h "$HIST_US")

command -v cyclictest >/dev/null || { log "cyclictest missing (rt-tests, see hack/apt-packages.txt): skipping"; exit 0; }

# cyclictest_line LABEL FILE: p50/p99 from cyclictest's per-µs histogram
# (all threads summed; overflows count as above the range), max from its
# "Max Latencies" line, as one results line.
cyclictest_line() {
	awk -v label="$1" -v range="$HIST_US" '
		/^[0-9]+ / { for (i = 2; i <= NF; i++) c[$1 + 0] += $i; next }
		/^# Histogram Overflows:/ { for (i = 4; i <= NF; i++) over += $i }
		/^# Max Latencies:/ { for (i = 4; i <= NF; i++) if ($i + 0 > max) max = $i + 0 }
		END { tot = over; for (k in c) tot += c[k]
			if (!tot) { printf "label=%s samples=0\n", label; exit }
			s = 0; p50 = p99 = ">range"
			for (k = 0; k < range; k++) { s += c[k]
				if (p50 == ">range" && s >= 0.5 * tot) p50 = k
				if (p99 == ">range" && s >= 0.99 * tot) { p99 = k; break } }
			printf "label=%s samples=%d wake_p50_us=%s wake_p99_us=%s wake_max_us=%d overflows=%d\n",
				label, tot, p50, p99, max, over }' "$2"
}

# idle_state: what the kernel's idle path may do right now, as key=value.
idle_state() {
	local q s names=""
	q=$(cat $CPUS/cpu[0-9]*/power/pm_qos_resume_latency_us | paste -sd, -)
	for s in $CPUS/cpu0/cpuidle/state*; do
		[ -e "$s/name" ] && names+="$(cat "$s/name"):$(cat "$s/latency")us:disable=$(cat "$s/disable"),"
	done
	echo "pm_qos=$q cpuidle_driver=$(cat $CPUS/cpuidle/current_driver 2>/dev/null || echo none) cpuidle_states=${names:-none}"
}

bench_run() {
	local out=$OUT/logs/$2.cyclictest line
	cyclictest "${args[@]}" >"$out" 2>&1 || log "cyclictest $2 exited $? (see $out)"
	line="$(cyclictest_line "$2" "$out") $(idle_state)"
	echo "$line" >>"$OUT/results.txt"
	echo "$line"
}
bench_load() { :; }

# pm_qos "n/a" is the strictest value (0 µs tolerated); "0" means none.
all_cpus_polling() { ! grep -vqx 'n/a' $CPUS/cpu[0-9]*/power/pm_qos_resume_latency_us; }
write_pm_qos() {
	local f
	for f in $CPUS/cpu[0-9]*/power/pm_qos_resume_latency_us; do fix_set "$f" n/a; done
}
bench_fix() {
	agent_fix idle '{"action":"Apply","profile":"idle","tuning":{"power":{"all":{"maxIdleExitLatency":"0us"}}}}' \
		all_cpus_polling write_pm_qos
	log "applied idle profile via $AGENT_PATH: $(idle_state)"
}
bench_unfix() { agent_unfix; }

# Restore every PM QoS value and cpuidle disable flag as found, whatever
# path changed them (a safety net behind agent revert and fix_undo).
kernel_lock
for f in $CPUS/cpu[0-9]*/power/pm_qos_resume_latency_us $CPUS/cpu[0-9]*/cpuidle/state*/disable; do
	[ -e "$f" ] && undo_push "echo '$(cat "$f")' > '$f'"
done
run_pairs idle
echo "scenario=idle agent_path=$AGENT_PATH cmd=cyclictest_$(IFS=_; echo "${args[*]}") $(idle_state)" >>"$OUT/results.txt"
