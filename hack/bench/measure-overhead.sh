#!/usr/bin/env bash
# measure-overhead.sh: the CPU cost of the agent's run-queue latency BPF
# programs against libbpf-tools runqlat's on the same events (both attached
# at once under stress-ng --switch, BPF run-time stats on while it runs) as a
# ratio (goal <= 1.0), and the idle agent's CPU use; then the cost per
# scheduler event with noisy-neighbour attribution against without
# (BenchmarkAttributionCost: interleaved pairs, goal median <= 1.3x) with
# runqlat's in the same windows. Needs root, runqlat (libbpf-tools),
# stress-ng and gcc.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
go test -tags privileged ./agent/measure/ -run '^$' -bench '^Benchmark(OverheadVsRunqlat|AttributionCost)$' -benchtime 1x -count "${COUNT:-1}" -v 2>&1 |
  grep -Ev '^\s+[0-9]+ -> |"msg"'
