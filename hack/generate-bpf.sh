#!/usr/bin/env bash
# generate-bpf.sh regenerates the BPF objects committed in the repository: the
# run-queue latency tracer under agent/measure/bpf (vmlinux.h from the running
# kernel's BTF (bpftool), then the bpf2go loader (.go) and object (.o) compiled
# with Debian's clang) and the tier scheduler under agent/tiersched/bpf (the
# same vmlinux.h plus its own sched_ext.h: no sched_ext kernel is needed to
# build it). The programs are CO-RE, so the header from one kernel serves
# every kernel; set SKIP_VMLINUX=1 to keep the committed header (e.g. on a
# machine without BTF).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/agent/measure/bpf"
BTF="${BTF:-/sys/kernel/btf/vmlinux}"

for bin in clang llvm-strip bpftool; do
  command -v "$bin" >/dev/null || { echo "generate-bpf: $bin not found (apt-get install clang llvm bpftool libbpf-dev)" >&2; exit 1; }
done
[[ -f /usr/include/bpf/bpf_helpers.h ]] || { echo "generate-bpf: libbpf headers missing (apt-get install libbpf-dev)" >&2; exit 1; }

if [[ "${SKIP_VMLINUX:-0}" != 1 ]]; then
  [[ -r "$BTF" ]] || { echo "generate-bpf: $BTF not readable; rerun with SKIP_VMLINUX=1" >&2; exit 1; }
  bpftool btf dump file "$BTF" format c > "$DIR/vmlinux.h.tmp"
  mv "$DIR/vmlinux.h.tmp" "$DIR/vmlinux.h"
fi

cd "$DIR"
GOPACKAGE=bpf go tool bpf2go -cc clang -strip llvm-strip -target bpfel \
  -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86 -I$DIR" \
  runqlat runqlat.bpf.c

# -no-global-types: bpf2go cannot write Go types for struct sched_ext_ops (its
# members are function pointers); agent/tiersched/bpf declares the few it reads.
# Built twice: tier calls scx_bpf_dsq_insert (6.13-6.18), tierV2
# scx_bpf_dsq_insert___v2 (6.19+); the loader picks by the kernel's BTF.
cd "$ROOT/agent/tiersched/bpf"
GOPACKAGE=bpf go tool bpf2go -no-global-types -cc clang -strip llvm-strip -target bpfel \
  -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86 -I$DIR -I$ROOT/agent/tiersched/bpf" \
  tier tier.bpf.c
GOPACKAGE=bpf go tool bpf2go -no-global-types -cc clang -strip llvm-strip -target bpfel \
  -cflags "-O2 -g -Wall -Werror -D__TARGET_ARCH_x86 -DTIER_INSERT_V2 -I$DIR -I$ROOT/agent/tiersched/bpf" \
  tierV2 tier.bpf.c
echo "generate-bpf: regenerated $(cd "$ROOT" && ls agent/measure/bpf/runqlat_bpfel.* agent/tiersched/bpf/tier_bpfel.* agent/tiersched/bpf/tierv2_bpfel.* | tr '\n' ' ')"
