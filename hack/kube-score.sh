#!/usr/bin/env bash
# hack/kube-score.sh: kube-score (pinned in hack/tools/kube-score/go.mod,
# its own module because it needs k8s.io/api packages ours no longer has)
# over the chart as rendered by default and with networkPolicy.enabled.
# Every CRITICAL finding must have its one-line justification in
# docs/kube-score.md ("| message | Kind/name, ... | why |"); the script fails on one
# that has none, and on a justification no finding uses any more.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DOC="$ROOT/docs/kube-score.md"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
cd "$ROOT"
go tool helm template latencytier charts/latencytier --namespace latencytier-system >"$TMP/default.yaml"
go tool helm template latencytier charts/latencytier --namespace latencytier-system \
  --set networkPolicy.enabled=true >"$TMP/networkpolicy.yaml"
score() {
  # kube-score exits 1 when it finds anything CRITICAL: that is judged below.
  (cd "$ROOT/hack/tools/kube-score" && go tool kube-score score --kubernetes-version v1.37 \
    --output-format ci "$1") || true
}
# "[CRITICAL] latencytier-agent/latencytier-system apps/v1/DaemonSet: (agent) CPU limit is not set"
# -> "CPU limit is not set|DaemonSet/latencytier-agent"
findings() {
  sed -n 's#^\[CRITICAL\] \([^/]*\)/[^ ]* [^ ]*/\([A-Za-z]*\): \(([^)]*) \)\{0,1\}\(.*\)$#\4|\2/\1#p'
}
{ score "$TMP/default.yaml"; score "$TMP/networkpolicy.yaml"; } | findings | sort -u >"$TMP/found"
[[ -s "$TMP/found" ]] || { echo "kube-score printed no CRITICAL line: has its output format changed?" >&2; score "$TMP/default.yaml" | head -5 >&2; exit 1; }
# The doc's rows: "| message | Kind/name | why |" (header and rule skipped).
# The objects column lists "Kind/name" separated by ", ".
awk -F'|' '/^\| / && $2 !~ /^ *(finding|-+) *$/ {
  gsub(/`/, "", $2); gsub(/`/, "", $3); gsub(/^ +| +$/, "", $2)
  n = split($3, objs, ",")
  for (i = 1; i <= n; i++) { gsub(/^ +| +$/, "", objs[i]); print $2 "|" objs[i] } }' "$DOC" | sort -u >"$TMP/justified"
rc=0
while IFS= read -r f; do
  grep -qxF "$f" "$TMP/justified" || { echo "kube-score CRITICAL without a justification in docs/kube-score.md: ${f%%|*} (${f#*|})" >&2; rc=1; }
done <"$TMP/found"
while IFS= read -r j; do
  grep -qxF "$j" "$TMP/found" || { echo "docs/kube-score.md justifies a finding kube-score no longer reports: ${j%%|*} (${j#*|})" >&2; rc=1; }
done <"$TMP/justified"
(( rc == 0 )) && echo "kube-score: $(wc -l <"$TMP/found") CRITICAL finding(s), each justified in docs/kube-score.md"
exit "$rc"
