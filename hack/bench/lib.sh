# lib.sh: shared helpers for the benchmark scenarios (sourced, not run).
#
# Every scenario: takes the host-wide kernel lock (the same flock file as
# internal/kernellock) before it changes kernel state, registers an undo for
# every value or cgroup it touches (run in reverse order on EXIT), runs the
# workload under the same load before and after the fix, and appends one
# "key=value ..." line per run to $OUT/results.txt.

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
undo_all() {
	local i
	for ((i = ${#UNDO[@]} - 1; i >= 0; i--)); do
		eval "${UNDO[i]}" || log "undo failed: ${UNDO[i]}"
	done
	UNDO=()
}
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
	grep -oE 'p99 [0-9.]+(ns|µs|us|ms|s)' "$1" | head -1 | awk '{
		v=$2; u=v; sub(/^[0-9.]+/, "", u); sub(/[a-zµ]+$/, "", v)
		m = (u=="ns") ? 0.001 : (u=="ms") ? 1000 : (u=="s") ? 1000000 : 1
		printf "%.0f", v*m }'
}

# --- workload ---------------------------------------------------------------
# run_workload LABEL WORKLOAD_ARGS...: runs the workload in a new session
# (its own autogroup), in cgroup directory $WORKLOAD_CGROUP when set, traced
# by runqlat -p for its whole life and by "latencytier agent measure" when
# that exists. Appends one line to $OUT/results.txt and prints it.
run_workload() {
	local label=$1; shift
	local pidf=$OUT/logs/$label.pid gof=$OUT/logs/$label.start
	rm -f "$pidf" "$gof"
	# sh writes its PID, waits for the go file, then becomes the workload
	# (same PID), so runqlat can attach before the first request.
	CG=${WORKLOAD_CGROUP:-} setsid sh -c 'if [ -n "$CG" ]; then echo $$ > "$CG/cgroup.procs" || exit 1; fi
		echo $$ > "$1"; while [ ! -e "$2" ]; do sleep 0.02; done; shift 2; exec "$@"' \
		sh "$pidf" "$gof" "$WORKLOAD" -l "$label" -o "$OUT/samples/$label.txt" "$@" \
		>"$OUT/logs/$label.out" 2>&1 &
	local wpid=$!
	while [ ! -s "$pidf" ]; do sleep 0.02; done
	local pid; pid=$(cat "$pidf")
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
	kill -INT "$rqpid" 2>/dev/null; wait "$rqpid" 2>/dev/null
	[ -n "$mpid" ] && { kill -INT "$mpid" 2>/dev/null; wait "$mpid" 2>/dev/null; }
	local line
	line="$(grep '^label=' "$OUT/logs/$label.out") runqlat_p99_us=$(runqlat_p99 "$rq")"
	if [ -n "$mpid" ]; then
		line+=" agent_p99_us=$(agent_p99 "$OUT/logs/$label.measure")"
	else
		line+=" agent_p99_us=n/a"
	fi
	echo "$line" >>"$OUT/results.txt"
	echo "$line"
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
