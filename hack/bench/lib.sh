# lib.sh: shared helpers for the benchmark scenarios (sourced, not run).
#
# Every scenario: takes the host-wide kernel lock (the same flock file as
# internal/kernellock) before it changes kernel state, registers an undo for
# every value or cgroup it touches (run in reverse order on EXIT), and hands
# its runs to run_pairs (one undisturbed floor run, then interleaved
# before/after pairs under the same load), which appends one "key=value ..."
# line per run to $OUT/results.txt.

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/../.." && pwd)
OUT=${OUT:-$BENCH_DIR/out}
LT=$OUT/latencytier
WORKLOAD=$OUT/workload
LOCK_FILE=/run/latencytier-kernel-test.lock
mkdir -p "$OUT/samples" "$OUT/logs"

log() { printf '%s %s\n' "$(date +%T)" "$*" >&2; }

# --- undo stack -----------------------------------------------------------
UNDO=()
undo_push() { UNDO+=("$1"); }
# FIX holds the undos of what a fallback fix wrote by hand (fix_set): taken
# back after every "after" run by fix_undo, and at exit.
FIX=()
unwind() {
	local -n stack=$1
	local i
	for ((i = ${#stack[@]} - 1; i >= 0; i--)); do
		eval "${stack[i]}" || log "undo failed: ${stack[i]}"
	done
	stack=()
}
fix_undo() { unwind FIX; }
undo_all() { unwind FIX; unwind UNDO; }
trap 'undo_all' EXIT
trap 'exit 130' INT TERM

# kernel_lock blocks until this shell holds the host-wide kernel lock; it is
# released when the scenario's process exits (after the EXIT trap restored
# everything, because the fd closes last).
kernel_lock() {
	exec {LOCK_FD}>"$LOCK_FILE"
	log "waiting for $LOCK_FILE"
	local t0=$SECONDS
	flock "$LOCK_FD"
	log "holding $LOCK_FILE"
	echo "lock_wait_s=$((SECONDS - t0)) scenario=$(basename "$0" .sh)" >>"$OUT/results.txt"
}

# set_value FILE VALUE: write VALUE, remembering the original for undo.
set_value() {
	local f=$1 v=$2 old
	old=$(cat "$f")
	undo_push "echo '$old' > '$f'"
	echo "$v" >"$f"
}

# fix_set FILE VALUE: like set_value, for a fallback fix: undone by fix_undo.
# A write the kernel refuses returns non-zero and records nothing.
fix_set() {
	local f=$1 v=$2 old
	old=$(cat "$f")
	echo "$v" 2>/dev/null >"$f" || return 1
	FIX+=("echo '$old' > '$f'")
}

# --- agent ----------------------------------------------------------------
# agent_has SUBCOMMAND: true if the built binary implements
# "latencytier agent SUBCOMMAND" (the placeholder answers "not implemented").
agent_has() {
	[ -x "$LT" ] || return 1
	local msg
	msg=$("$LT" agent "$1" -h 2>&1)
	! grep -qiE 'not implemented|unknown|flag provided but not defined: -node-spec' <<<"$msg" &&
		grep -q -- "${2:--}" <<<"$msg"
}

# agent_fix NAME SPEC_JSON CHECK FALLBACK: applies SPEC_JSON through
# "latencytier agent apply --node-spec" when the built binary has it and the
# command CHECK confirms the kernel now holds the profile's values; otherwise
# reverts whatever the agent did, runs FALLBACK (which writes the same values
# with fix_set) and logs it. Sets AGENT_PATH=agent|fallback, which every
# scenario records in its results. The apply's exit status alone does not
# decide: a profile with immovable IRQs applies the rest and exits non-zero.
agent_fix() {
	local name=$1 json=$2 check=$3 fallback=$4 spec=$OUT/$1-spec.json
	AGENT_LOG=$OUT/logs/$1-agent.log
	echo "$json" >"$spec"
	if agent_has apply node-spec; then
		[ -n "${AGENT_UNDO:-}" ] || { undo_push "agent_revert"; AGENT_UNDO=1; }
		"$LT" agent apply --node-spec "$spec" >>"$AGENT_LOG" 2>&1 || log "agent apply exited $? (see $AGENT_LOG)"
		if $check; then
			AGENT_PATH=agent
			return
		fi
		agent_revert
	fi
	log "AGENT PATH NOT AVAILABLE for $name (see $AGENT_LOG): writing the values directly"
	$fallback
	AGENT_PATH=fallback
}
agent_revert() { "$LT" agent revert >>"$AGENT_LOG" 2>&1 || log "agent revert exited $? (see $AGENT_LOG)"; }
# agent_unfix takes back what agent_fix did, by the same path.
agent_unfix() { if [ "$AGENT_PATH" = agent ]; then agent_revert; else fix_undo; fi; }

# --- pair runner -----------------------------------------------------------
# run_pairs NAME: the one protocol every scenario follows, so that a ratio
# holds still on a shared, noisy machine:
#   NAME-floor     one undisturbed run: no load, no fix, the machine's own
#                  tuning: the floor this machine can reach now;
#   bench_load     then the disturbance starts (hog, quota, disk reader);
#   NAME-before-i, NAME-after-i for i = 1..BENCH_PAIRS (at least 3):
#                  before, bench_fix, after, bench_unfix, interleaved so that
#                  a drift in other people's load hits both sides of a pair.
# The report takes the median of the per-pair ratios, with min and max.
# The scenario defines: bench_run PHASE LABEL (PHASE floor|before|after; one
# measured run that appends its line to results.txt), bench_load, bench_fix
# (sets AGENT_PATH) and bench_unfix.
#
# A scenario that can check its own precondition (the incident really
# happened in a "before" run) also defines bench_valid LABEL: it appends
#   precondition run=LABEL valid=1|0 reason=... (figures)
# to results.txt and returns non-zero for an invalid run. Such a pair is
# never counted (stats.sh leaves it out), and run_pairs goes on until
# BENCH_PAIRS valid pairs ran or BENCH_MAX_PAIRS pairs in all (default
# twice BENCH_PAIRS).
run_pairs() {
	local s=$1 i pairs=${BENCH_PAIRS:-3} valid=0
	[ "$pairs" -ge 3 ] || { log "BENCH_PAIRS=$pairs: running 3, a median needs at least 3 pairs"; pairs=3; }
	local max=${BENCH_MAX_PAIRS:-$((2 * pairs))}
	declare -F bench_valid >/dev/null || max=$pairs
	log "$s: floor run"
	pair_run floor "$s-floor"
	bench_load
	for ((i = 1; i <= max && valid < pairs; i++)); do
		log "$s: pair $i ($valid of $pairs valid so far, at most $max)"
		pair_run before "$s-before-$i"
		if ! declare -F bench_valid >/dev/null || bench_valid "$s-before-$i"; then
			valid=$((valid + 1))
		else
			log "$s: before-$i is invalid: $(grep "^precondition run=$s-before-$i " "$OUT/results.txt" | tail -1)"
		fi
		bench_fix
		pair_run after "$s-after-$i"
		bench_unfix
	done
	echo "scenario=$s pairs=$((i - 1)) valid_pairs=$valid" >>"$OUT/results.txt"
}

# pair_run PHASE LABEL: bench_run, with the load average it started under.
pair_run() {
	echo "loadavg=$(cut -d' ' -f1 /proc/loadavg) run=$2" >>"$OUT/results.txt"
	bench_run "$1" "$2"
}

# --- runqlat ----------------------------------------------------------------
# runqlat_p99 FILE: p99 of a libbpf-tools runqlat log2 histogram, reported as
# the upper bound of the bucket that holds the 99th percentile (µs).
runqlat_p99() {
	awk 'BEGIN { n=0; tot=0 } /->/ { hi[n]=$3; c[n]=$5; tot+=$5; n++ }
	     END { if (!tot) { print "n/a"; exit } s=0
	           for (i=0;i<n;i++) { s+=c[i]; if (s >= 0.99*tot) { print hi[i]; exit } } }' "$1"
}

# agent_p99 FILE: the first "p99 <duration>" of "latencytier agent measure"
# output, in µs.
agent_p99() {
	{ grep -oE 'p99 [0-9.]+(ns|µs|us|ms|s)' "$1" || true; } | head -1 | awk '{
		v=$2; u=v; sub(/^[0-9.]+/, "", u); sub(/[a-zµ]+$/, "", v)
		m = (u=="ns") ? 0.001 : (u=="ms") ? 1000 : (u=="s") ? 1000000 : 1
		printf "%.0f", v*m }'
}

# --- workload ---------------------------------------------------------------
# run_workload LABEL WORKLOAD_ARGS...: runs the workload in a new session
# (its own autogroup), in cgroup directory $WORKLOAD_CGROUP when set, traced
# by runqlat for its whole life and by "latencytier agent measure" when
# that exists. When $COUNTERS names a function that prints cumulative
# "key=count ..." pairs (cpu.stat, /proc/interrupts), the run's deltas are
# added. Appends one line to $OUT/results.txt and prints it.
run_workload() {
	local label=$1; shift
	local pidf=$OUT/logs/$label.pid gof=$OUT/logs/$label.start c0=""
	rm -f "$pidf" "$gof"
	[ -z "${COUNTERS:-}" ] || c0=$($COUNTERS)
	# sh writes its PID, waits for the go file, then becomes the workload
	# (same PID), so runqlat can attach before the first request.
	CG=${WORKLOAD_CGROUP:-} setsid sh -c 'if [ -n "$CG" ]; then echo $$ > "$CG/cgroup.procs" || exit 1; fi
		echo $$ > "$1"; while [ ! -e "$2" ]; do sleep 0.02; done; shift 2; exec "$@"' \
		sh "$pidf" "$gof" "$WORKLOAD" -l "$label" -o "$OUT/samples/$label.txt" "$@" \
		>"$OUT/logs/$label.out" 2>&1 &
	local wpid=$!
	while [ ! -s "$pidf" ]; do sleep 0.02; done
	# Node-wide run-queue latency, the way the agent measures it: runqlat
	# without a PID filter, and "latencytier agent measure" side by side.
	local rq=$OUT/logs/$label.runqlat
	runqlat >"$rq" 2>&1 &
	local rqpid=$!
	for _ in $(seq 100); do grep -q Tracing "$rq" && break; sleep 0.05; done
	local mpid=""
	if agent_has measure duration; then
		"$LT" agent measure -duration "${DURATION_S:-60}s" >"$OUT/logs/$label.measure" 2>&1 &
		mpid=$!
		for _ in $(seq 100); do grep -q Tracing "$OUT/logs/$label.measure" && break; sleep 0.05; done
	fi
	touch "$gof"
	wait "$wpid" || log "workload $label exited $? (see its .out)"
	# The tracers' exit status (130 on SIGINT) says nothing about the run.
	kill -INT "$rqpid" 2>/dev/null || true; wait "$rqpid" 2>/dev/null || true
	if [ -n "$mpid" ]; then kill -INT "$mpid" 2>/dev/null || true; wait "$mpid" 2>/dev/null || true; fi
	local line
	line="$(grep '^label=' "$OUT/logs/$label.out") runqlat_p99_us=$(runqlat_p99 "$rq")"
	[ -z "${COUNTERS:-}" ] || line+=" $(counter_delta "$c0" "$($COUNTERS)")"
	if [ -n "$mpid" ]; then
		line+=" agent_p99_us=$(agent_p99 "$OUT/logs/$label.measure")"
	else
		line+=" agent_p99_us=n/a"
	fi
	echo "$line" >>"$OUT/results.txt"
	echo "$line"
}

# counter_delta "k=v ..." "k=v ...": the same keys with after - before.
counter_delta() {
	awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x, " "); split(b, y, " ")
		for (i = 1; i <= n; i++) { split(x[i], p, "="); split(y[i], q, "=")
			printf "%s%s=%d", (i > 1 ? " " : ""), p[1], q[2] - p[2] } }'
}

# field LINE KEY: the value of KEY in a key=value line.
field() { grep -oE "(^| )$2=[^ ]*" <<<"$1" | head -1 | cut -d= -f2 || true; }

# --- CPU hog ---------------------------------------------------------------
# start_hog N: N gzip loops over generated log-like data in ONE new session
# (one autogroup), like a cron "tar -czf" started outside the service's
# session. Stopped on EXIT.
start_hog() {
	local n=$1 data=$OUT/hog-log.txt
	# ~58 MB of access-log lines with random fields: gzip -6 (tar -z's level)
	# takes about a second per pass, so each loop stays runnable.
	[ -s "$data" ] || awk 'BEGIN { srand(1); for (i = 0; i < 600000; i++)
		printf "2026-11-30T08:%02d:%02d.%06d GET /api/v1/item/%d status=%d dur=%.3fms trace=%08x%08x\n",
			int(i / 36000) % 60, int(i / 600) % 60, int(rand() * 1e6), int(rand() * 1e6),
			(rand() < 0.98) ? 200 : 503, rand() * 20, int(rand() * 2^31), int(rand() * 2^31) }' >"$data"
	setsid sh -c 'for i in $(seq "$1"); do (while :; do gzip -6c "$2" >/dev/null; done) & done; wait' \
		sh "$n" "$data" >/dev/null 2>&1 &
	HOG_PID=$!
	undo_push "kill -- -$HOG_PID 2>/dev/null; wait $HOG_PID 2>/dev/null; true"
	sleep 1
}
stop_hog() { kill -- -"$HOG_PID" 2>/dev/null; wait "$HOG_PID" 2>/dev/null || true; }
