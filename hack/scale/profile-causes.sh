#!/usr/bin/env bash
# profile-causes.sh PROFILE... : the API server's CPU by cause, as shares of
# each CPU profile's samples, one column per profile, as a Markdown table
# (docs/fleet-scale.md). The profiles are bench-scale's
# -apiserver-cpuprofile ones (<prefix>-N-create.pprof, -change.pprof).
# Each row is `go tool pprof -focus` (and -ignore) on function names of
# kube-apiserver 1.37; the GC assist row is inside the rows above it.
set -euo pipefail
[[ $# -gt 0 ]] || { echo "usage: $0 PROFILE..." >&2; exit 2; }
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

# share FILE FOCUS [IGNORE]: the focused samples' share of the profile.
share() {
  local out
  out=$(go tool pprof -top -nodecount=100000 -nodefraction=0 -focus="$2" ${3:+-ignore="$3"} "$1" 2>/dev/null)
  grep -o 'accounting for [^,]*, [0-9.]*%' <<<"$out" | sed -n 1p | grep -o '[0-9.]*%$' || echo 0%
}
rows=(
  "agents' status writes (CR /status update)|customresource.\(\*StatusREST\).Update|"
  "other updates and patches (manager: Node, LatencyNode spec)|patcher\).patchResource|StatusREST"
  "creates (LatencyNode)|registry.\(\*Store\).create|"
  "watch ingest (decoding etcd's events)|etcd3.\(\*watchChan\)|"
  "watch dispatch (encoding to each watcher)|cacher.\(\*Cacher\).dispatch|cacheWatcher|serveWatch|WatchServer|"
  "reads (get, list)|getResourceHandler|ListResource|serveWatch|WatchServer"
  "GC (background mark)|runtime.gcBgMarkWorker|"
  "GC assist (inside the rows above)|runtime.gcAssistAlloc|"
  "GC stack scan (every goroutine, each cycle)|runtime.scanstack|"
)
printf '| cause |'; for f in "$@"; do printf ' %s |' "$(basename "$f" .pprof)"; done; echo
printf '|---|'; for _ in "$@"; do printf -- '---:|'; done; echo
for r in "${rows[@]}"; do
  name=${r%%|*} rest=${r#*|}
  ign=${rest##*|} foc=${rest%|*}
  printf '| %s |' "$name"
  for f in "$@"; do printf ' %s |' "$(share "$f" "$foc" "$ign")"; done
  echo
done
printf '| profile (s of CPU over 15 s) |'
for f in "$@"; do
  printf ' %s |' "$(go tool pprof -top -nodecount=1 "$f" 2>/dev/null | sed -n 's/.*Total samples = \([0-9.]*m\{0,1\}s\).*/\1/p')"
done
echo
