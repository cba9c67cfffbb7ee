#!/usr/bin/env bash
# verify-gen.sh regenerates every generated file (CRDs, RBAC, deepcopy, and the
# BPF objects when clang and bpftool are present) and fails if any differs
# from what is committed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
make -s generate manifests
# The BPF objects are checked against the committed C source and vmlinux.h;
# the header itself is a snapshot (CO-RE makes it portable), so a CI machine
# with another kernel must not regenerate it.
if [[ -x hack/generate-bpf.sh ]]; then
  SKIP_VMLINUX=1 hack/generate-bpf.sh
fi
if ! git diff --exit-code --stat -- api config agent; then
  echo "verify-gen: generated files are stale; run 'make generate manifests generate-bpf' and commit" >&2
  exit 1
fi
untracked=$(git ls-files --others --exclude-standard -- api config agent)
if [[ -n "$untracked" ]]; then
  echo "verify-gen: generated files not committed:" >&2; echo "$untracked" >&2; exit 1
fi
# The chart README's values table is generated from values.yaml by its test.
if ! go test -count=1 -run '^TestChartReadmeValuesTable$' ./charts >/dev/null; then
  echo "verify-gen: charts/latencytier/README.md's values table is stale; run 'go test ./charts -run TestChartReadmeValuesTable -update' and commit" >&2
  exit 1
fi
# What the repository may track at all (no ELF executable, nothing over 1 MB
# but test data and vmlinux.h) is a Go test, internal/repofiles, that
# `make test` runs.
if ! go mod tidy -diff >/dev/null; then
  echo "verify-gen: go.mod/go.sum are not tidy; run 'go mod tidy' and commit" >&2
  exit 1
fi
echo "verify-gen: generated files match their sources; go.mod is tidy"
