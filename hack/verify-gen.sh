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
# Build outputs never belong in git: a tracked ELF executable or shared
# object (e_type 2 or 3) fails; relocatable objects (e_type 1, the BPF
# objects bpf2go generates from committed C) are generated files and stay.
built=$(git ls-files -z | while IFS= read -r -d '' f; do
  [[ -f "$f" && "$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')" == 7f454c46 ]] || continue
  case "$(od -An -j16 -N2 -tu2 "$f" | tr -d ' ')" in 2|3) echo "$f" ;; esac
done)
if [[ -n "$built" ]]; then
  echo "verify-gen: build outputs are committed (remove them; bin/ is ignored):" >&2; echo "$built" >&2; exit 1
fi
# Nothing tracked over 1 MB but test data and the generated vmlinux.h
# (bpftool's BTF dump the BPF C includes): a committed 72 MB binary was
# 98 % of the pack once.
big=$(git ls-files -z | while IFS= read -r -d '' f; do
  [[ -f "$f" ]] || continue
  case "$f" in */testdata/*|testdata/*|agent/measure/bpf/vmlinux.h) continue ;; esac
  if (($(stat -c %s "$f") > 1048576)); then echo "$f ($(stat -c %s "$f") bytes)"; fi
done)
if [[ -n "$big" ]]; then
  echo "verify-gen: tracked files over 1 MB (keep them out of git, or under testdata/):" >&2; echo "$big" >&2; exit 1
fi
if ! go mod tidy -diff >/dev/null; then
  echo "verify-gen: go.mod/go.sum are not tidy; run 'go mod tidy' and commit" >&2
  exit 1
fi
echo "verify-gen: generated files match their sources; go.mod is tidy"
