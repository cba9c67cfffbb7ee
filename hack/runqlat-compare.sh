#!/usr/bin/env bash
# runqlat-compare.sh: the agent's BPF run-queue latency against libbpf-tools
# runqlat over the same window of the same load (stress-ng --cpu), printing
# both histograms and asserting p50 and p99 fall in the same log2 slot.
# Needs root and runqlat (libbpf-tools); skips when runqlat is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
go test ./agent/measure/ -run '^TestAgainstRunqlat$' -count=1 -v
