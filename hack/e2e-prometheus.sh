#!/usr/bin/env bash
# e2e-prometheus.sh: a real Prometheus (Debian's package, listening on
# 127.0.0.1 only) scrapes the agent's metrics endpoint on the local cluster
# the way a cluster's Prometheus would (HTTPS, bearer token of a service
# account bound to latencytier-metrics-reader, the self-signed certificate not
# verified), loads config/prometheus/latencytier.rules.yaml, and a query for
# the run-queue p99 returns a number. It scrapes the manager too, and
# dashboard_checks runs every query of the Grafana dashboard
# (config/grafana/latencytier.json) against it and requires data for each.
#
# hack/e2e.sh sources this file, calls prometheus_checks once the agent
# measures (Prometheus keeps running, scraping) and dashboard_checks once a
# rollout and the attribution step have made every series the dashboard
# reads; its exit trap calls prom_stop. Run alone against a cluster that is
# already up with a profile applied and measuring (E2E_KEEP=1 make
# test-e2e, or make demo); with no rollout done, the rollout panels are
# empty and dashboard_checks says so:
#
#   hack/e2e-prometheus.sh
#
#   E2E_PROM_PORT   Prometheus' port on 127.0.0.1 (default 19090)
#   E2E_PROM_KEEP=1 leave Prometheus running (its directory is printed)
#   AGENT_METRICS_PORT the agent's metrics port (default 9849, the chart's
#                   agent.metricsPort)
#   MANAGER_METRICS_PORT the manager's (default 9847, the chart's
#                   metrics.port; the local cluster runs it on the host
#                   network)

PROM_PORT="${E2E_PROM_PORT:-19090}"
AGENT_METRICS_PORT="${AGENT_METRICS_PORT:-9849}"
MANAGER_METRICS_PORT="${MANAGER_METRICS_PORT:-9847}"
PROM_SA=latencytier-e2e-scraper
PROM_DIR=
PROM_PID=
PROM_T0=

# prom_config TOKEN_FILE RULES_FILE NODE: the scrape configuration, two
# static targets: this node's agent, labelled with the node as the
# PodMonitor's relabeling does (the alert rules join on it), and the
# manager, labelled component only: its per-node series carry their own
# node label.
prom_config() {
  cat <<EOF
global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files:
- $2
scrape_configs:
- job_name: latencytier-agent
  scheme: https
  authorization:
    type: Bearer
    credentials_file: $1
  tls_config:
    # controller-runtime's secure metrics server serves a self-signed
    # certificate (as the PodMonitor's insecureSkipVerify says).
    insecure_skip_verify: true
  static_configs:
  - targets: ['127.0.0.1:$AGENT_METRICS_PORT']
    labels:
      node: $3
      component: agent
  - targets: ['127.0.0.1:$MANAGER_METRICS_PORT']
    labels:
      component: manager
EOF
}

# prom_query EXPR prints the value of the first sample of an instant query
# ("" when there is none).
prom_query() {
  curl -fsS "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1" 2>/dev/null |
    sed -n 's/.*"value":\[[^,]*,"\([^"]*\)"\].*/\1/p'
}

# prom_number EXPR: the query returns a finite number.
prom_number() {
  local v
  v=$(prom_query "$1")
  [[ "$v" =~ ^[0-9.eE+-]+$ ]]
}

# scraper_token: a service account bound to latencytier-metrics-reader (what
# config/prometheus binds its scraper to) and a short-lived token for it.
scraper_token() {
  k -n latencytier-system create serviceaccount "$PROM_SA" --dry-run=client -o yaml | k apply -f - >/dev/null &&
    k create clusterrolebinding "$PROM_SA" --clusterrole=latencytier-metrics-reader \
      --serviceaccount="latencytier-system:$PROM_SA" --dry-run=client -o yaml | k apply -f - >/dev/null &&
    k -n latencytier-system create token "$PROM_SA" --duration=1h
}

# agent_scrape TOKEN prints the HTTP status of a scrape of the agent.
agent_scrape() {
  local auth=()
  [[ -n "$1" ]] && auth=(-H "Authorization: Bearer $1")
  curl -ks -o "$PROM_DIR/scrape.txt" -w '%{http_code}' "${auth[@]}" "https://127.0.0.1:$AGENT_METRICS_PORT/metrics"
}

# promtool_check checks the scrape config and the rule files it loads,
# printing promtool's output only when it fails.
promtool_check() {
  promtool check config "$PROM_DIR/prometheus.yml" >"$PROM_DIR/promtool.txt" 2>&1 ||
    { sed 's/^/    /' "$PROM_DIR/promtool.txt" >&2; return 1; }
}

prom_start() {
  prometheus --config.file="$PROM_DIR/prometheus.yml" --storage.tsdb.path="$PROM_DIR/data" \
    --web.listen-address="127.0.0.1:$PROM_PORT" >"$PROM_DIR/prometheus.log" 2>&1 &
  PROM_PID=$!
  PROM_T0=$SECONDS
}

# prom_stop stops the Prometheus this script started (by its PID) and
# removes its directory and the scraper's service account and binding.
prom_stop() {
  if [[ -n "$PROM_PID" ]]; then
    kill "$PROM_PID" 2>/dev/null && wait "$PROM_PID" 2>/dev/null || true
    PROM_PID=
  fi
  [[ -n "$PROM_DIR" ]] || return 0 # prometheus_checks did not start
  k delete clusterrolebinding "$PROM_SA" --ignore-not-found >/dev/null 2>&1 || true
  k -n latencytier-system delete serviceaccount "$PROM_SA" --ignore-not-found >/dev/null 2>&1 || true
  rm -rf "$PROM_DIR"
  PROM_DIR=
}

# prometheus_checks: the Prometheus part of the e2e. Uses check/must/k/say
# from hack/e2e.sh (or the standalone definitions below).
prometheus_checks() {
  local token p99 q
  say "Prometheus scrapes the agent"
  PROM_DIR=$(mktemp -d /tmp/latencytier-e2e-prom.XXXXXX)
  if token=$(scraper_token); then pass "scraper service account and token"; else
    fail "scraper service account and token"; exit 1
  fi
  printf '%s' "$token" >"$PROM_DIR/token"
  check "agent metrics without a token: 401" test "$(agent_scrape '')" = 401
  check "agent metrics with the scraper's token: 200" test "$(agent_scrape "$token")" = 200
  check "scrape has the run-queue histogram (class node)" \
    grep -q '^latencytier_node_runqueue_latency_seconds_bucket{class="node",le="+Inf"}' "$PROM_DIR/scrape.txt"
  check "scrape has the journal size" grep -q '^latencytier_journal_entries ' "$PROM_DIR/scrape.txt"
  prom_config "$PROM_DIR/token" "$ROOT/config/prometheus/latencytier.rules.yaml" "$NODE" >"$PROM_DIR/prometheus.yml"
  must "promtool check config (scrape config and config/prometheus rules)" promtool_check
  prom_start
  check "Prometheus target up" wait_until 60 "up == 1" prom_is 'up{job="latencytier-agent",component="agent"}' 1
  check "Prometheus scrapes the manager" wait_until 60 "manager up == 1" prom_is 'up{job="latencytier-agent",component="manager"}' 1
  q='histogram_quantile(0.99, sum by (le) (rate(latencytier_node_runqueue_latency_seconds_bucket{job="latencytier-agent",class="node"}[1m])))'
  check "run-queue p99 query returns a number" wait_until 90 "a p99" prom_number "$q"
  p99=$(prom_query "$q") || true
  echo "  \$ curl -s http://127.0.0.1:$PROM_PORT/api/v1/query --data-urlencode 'query=$q'"
  echo "  run-queue p99 on $NODE: ${p99:-none} s"
  check "recording rule node:latencytier_runqueue_latency_seconds:p99_5m{node=\"$NODE\"}" \
    wait_until 30 "the recording rule" prom_number "node:latencytier_runqueue_latency_seconds:p99_5m{node=\"$NODE\"}"
  check "drift re-asserts counted (after the drift step)" prom_number "latencytier_drift_reasserts_total{setting=\"scheduler/autogroup\"} >= 1"
  echo "  (selected series:)"
  grep -E '^latencytier_(node_runqueue_latency_seconds_(bucket\{class="node",le="(1.6e-05|3.2e-05|6.4e-05|0.000128|\+Inf)"|count)|setting_state\{setting="scheduler/autogroup"|drift_reasserts_total|journal_entries|pod_)' \
    "$PROM_DIR/scrape.txt" | sed 's/^/    /' || true
  # Prometheus keeps scraping: dashboard_checks reads what it collects
  # through the rest of the run.
}

# dashboard_checks: every query of the Grafana dashboard, with each
# variable at All, as a range query over the time since Prometheus
# started, returns data (config/grafana/check; docs/metrics.md). Then
# Prometheus stops, unless E2E_PROM_KEEP=1.
dashboard_checks() {
  say "Grafana dashboard: every query has data in the real Prometheus"
  if [[ -z "$PROM_PID" ]]; then
    fail "dashboard queries: no Prometheus (prometheus_checks did not run)"
    return
  fi
  must "build config/grafana/check" dashboard_build
  check "every dashboard query returns data" dashboard_query_data
  sed 's/^/    /' "$PROM_DIR/dashboard.txt"
  if [[ "${E2E_PROM_KEEP:-}" == 1 ]]; then
    echo "  Prometheus left running (pid $PROM_PID, http://127.0.0.1:$PROM_PORT, $PROM_DIR)"
    PROM_PID=
    return 0
  fi
  prom_stop
}

dashboard_build() { (cd "$ROOT" && go build -o "$PROM_DIR/dashboard-check" ./config/grafana/check); }

# dashboard_query_data runs the check, its report in dashboard.txt: range
# queries back to Prometheus' start, $__rate_interval 1m (12 scrapes),
# waiting up to 90 s for the last series to arrive.
dashboard_query_data() {
  "$PROM_DIR/dashboard-check" -prometheus "http://127.0.0.1:$PROM_PORT" \
    -dashboard "$ROOT/config/grafana/latencytier.json" -range "$((SECONDS - PROM_T0 + 60))s" \
    -rate-interval 1m -step 15s -wait 90s >"$PROM_DIR/dashboard.txt" 2>&1
}

# prom_is EXPR VALUE: the query's value is VALUE.
prom_is() { [[ "$(prom_query "$1")" == "$2" ]]; }

# Run alone: against the cluster hack/local-cluster already runs.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  source "$ROOT/hack/demo/lib.sh"
  failures=()
  pass() { printf '  \033[32mPASS\033[0m %s\n' "$*"; }
  fail() { printf '  \033[31mFAIL\033[0m %s\n' "$*"; failures+=("$*"); }
  check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
  must() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; exit 1; fi; }
  trap 'prom_stop' EXIT
  prometheus_checks
  dashboard_checks
  if ((${#failures[@]})); then
    printf 'e2e-prometheus: %d failure(s):\n' "${#failures[@]}"
    printf '  - %s\n' "${failures[@]}"
    exit 1
  fi
  echo "e2e-prometheus: all checks passed"
fi
