#!/usr/bin/env bash
# test-kernels.sh: runs the agent's kernel-dependent tests on real Debian
# kernels with real systemd, one emulated VM per matrix row, and prints one
# summary line per row (with the failing tests' output on failure).
#
#   hack/vm/test-kernels.sh                 # every row
#   VM_ROWS=6.12-cgroup2 hack/vm/test-kernels.sh
#   VM_PKGS="./agent/vmtest" VM_RUN=TestSystemd hack/vm/test-kernels.sh   # packages, -test.run
#   VM_RUN_DIR=/tmp/vmrun-x hack/vm/test-kernels.sh   # a run of its own (logs, shares)
#
# Nothing on the host changes: kernels are unpacked (never installed) into
# the cache, the VMs have no network (-nic none), the root disk is opened
# with -snapshot, and the only host path the guest sees is the run's share.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# name | suite series | extra kernel arguments | reboot (1: the row runs the
# journal-across-reboot test; boot ids and the journal do not depend on the
# kernel, so one row reboots and the others save a boot) | vCPUs (the 6.12
# row has 4: its partition tests isolate 2 CPUs beside 2 housekeeping ones)
# | loader (direct: qemu loads the kernel; grub: OVMF and real GRUB from the
# disk, so a bootloader change takes effect across the guest's reboots, and
# the row runs the boot-argument tests only: GRUB_ROW_TESTS selects them for
# boot 1, and agent/vmtest's grubBoots says which run in which of its five
# boots, the package's own and then the agent's). A row named *-ext-* is a
# sched_ext row: its kernel must be built with sched_ext and BTF (kernel.sh
# checks the package's config) and agent/vmtest's sched_ext tests run in it.
# Its series is pinned: sched_ext's kfuncs change prototype between 7.x
# releases, and backports keeps several (7.0-7.3 in 2026-12).
#
# The -ext- row runs beside the row after it (the GRUB row, ~6 min of
# boot-argument tests with no timing in them), not before it: each VM
# emulates its vCPUs on one host thread, so on a 2-core machine the pair
# takes the GRUB row's time and the sched_ext row adds ~0 s of wall clock
# (it took 97-118 s alone). It runs only its own tests (EXT_ROW_TESTS):
# run-queue attribution, which failed once beside another VM, has its rows.
ROWS=(
  "6.1-cgroup2|bookworm 6.1||1|2|direct"
  "6.1-cgroup1|bookworm 6.1|systemd.unified_cgroup_hierarchy=0|0|2|direct"
  "6.12-cgroup2|trixie 6.12||0|4|direct"
  "7.3-ext-cgroup2|trixie-backports 7.3||0|2|direct"
  "6.12-grub-cgroup2|trixie 6.12||0|2|grub"
)
EXT_CONFIG=(CONFIG_SCHED_CLASS_EXT=y CONFIG_DEBUG_INFO_BTF=y)   # what an -ext- row's kernel needs
GRUB_ROW_TESTS='^(TestRowIsWhatItSays$|TestHostToolThroughSystemd$|TestBootArgsGRUB|TestBootAgentGRUB)'
EXT_ROW_TESTS='^(TestRowIsWhatItSays$|TestSchedExt|TestFactsReportSchedExt|TestTier)'
OVMF_CODE=/usr/share/OVMF/OVMF_CODE.fd OVMF_VARS=/usr/share/OVMF/OVMF_VARS.fd
VM_ACCEL="${VM_ACCEL:-tcg,thread=single}"   # see the comment in the row loop
VM_TIMEOUT="${VM_TIMEOUT:-600}"   # per VM, both boots: rows take 20-130 s (idle to load 8); CI must end
start=$SECONDS

rootfs="$("$ROOT/hack/vm/rootfs.sh")"

# Static test binaries, built once for all rows: agent/vmtest, the tests
# written for these rows. The other packages' privileged tests are written
# for the host they run on (cgroup v1, its IRQs, envtest binaries) and fail
# by design where a prerequisite is missing (internal/privtest), so in a row
# they fail for the row's layout, not for a defect; VM_PKGS can name them.
# VM_RUN_DIR lets two runs share the image cache without sharing a run.
run="${VM_RUN_DIR:-$VM_CACHE/run}"; rm -rf "$run"; mkdir -p "$run/bin"
VM_PKGS="${VM_PKGS:-./agent/vmtest}"
# shellcheck disable=SC2086
mapfile -t pkgs < <(cd "$ROOT" && go list -tags privileged -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}|{{.Dir}}{{end}}' $VM_PKGS)
log "building ${#pkgs[@]} test binaries"
for p in "${pkgs[@]}"; do
  ip="${p%%|*}" dir="${p#*|}" name="${ip#*/latencytier/}"; name="${name//\//_}"
  mkdir -p "$run/bin/$name"
  (cd "$ROOT" && CGO_ENABLED=0 go test -c -tags privileged -o "$run/bin/$name/test" "$ip")
  [[ -d "$dir/testdata" ]] && cp -r "$dir/testdata" "$run/bin/$name/"
done

# boot ACCEL runs the row's VM until it powers off; it returns qemu's
# status, 124 after VM_TIMEOUT, and 125 when the guest kernel panicked
# (qemu is stopped then, instead of waiting out the timeout).
#
# A direct row reboots inside qemu (-snapshot keeps the disk). A grub row
# cannot: OVMF's reset hung under TCG for the whole VM_TIMEOUT after the
# guest's "reboot: Restarting system", so its qemu runs with -no-reboot on
# a copy of the boot disk and is started again on the same copy, as a
# power cycle, at most five times (guest.sh's limit on boots).
boot() {
  local firmware=(-kernel "$kdir/vmlinuz" -initrd "$initrd"
    -append "console=ttyS0 root=/dev/vda rw quiet systemd.show_status=0 $extra")
  local disks=(-drive "file=$rootfs,if=virtio,format=raw,snapshot=on") once=()
  if [[ $loader == grub ]]; then
    cp --sparse=always "$bootimg" "$share/disk.img"
    firmware=(-drive "if=pflash,format=raw,readonly=on,file=$OVMF_CODE" -drive "if=pflash,format=raw,file=$share/vars.fd")
    disks=(-drive "file=$share/disk.img,if=virtio,format=raw" -drive "file=fat:$esp,if=virtio,format=raw,readonly=on")
    once=(-no-reboot)
  fi
  : >"$share/console.log"
  local starts=1 rc
  while :; do
    rc=0; qemu_run "$1" || rc=$?
    if [[ $rc == 0 && ${#once[@]} -gt 0 && $starts -lt 5 ]] &&
      tail -n 3 "$share/console.log" | grep -q "reboot: Restarting system"; then
      starts=$((starts + 1)); continue
    fi
    rm -f "$share/disk.img"
    return "$rc"
  done
}

qemu_run() {
  qemu-system-x86_64 -accel "$1" -cpu max -machine q35 -smp "$smp" -m 1G \
    -nographic -nic none "${once[@]}" "${firmware[@]}" "${disks[@]}" \
    -virtfs "local,path=$share,mount_tag=share,security_model=none,id=share" \
    </dev/null >>"$share/console.log" 2>&1 &
  local pid=$! waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if grep -q "Kernel panic - not syncing" "$share/console.log" 2>/dev/null; then
      kill "$pid"; wait "$pid" 2>/dev/null || true; return 125
    fi
    if (( waited >= VM_TIMEOUT )); then
      kill "$pid"; wait "$pid" 2>/dev/null || true; return 124
    fi
    sleep 1; waited=$((waited + 1))
  done
  wait "$pid"
}

# run_row ROW: boots ROW's VM, runs its tests and writes its summary line
# to $run/NAME.summary; fails when the row did.
run_row() {
  local name kernel extra reboot smp loader need kdir initrd share filter bootimg esp t0 qrc
  IFS='|' read -r name kernel extra reboot smp loader <<<"$1"
  need=(); [[ $name == *-ext-* ]] && need=("${EXT_CONFIG[@]}")
  # shellcheck disable=SC2086
  kdir="$("$ROOT/hack/vm/kernel.sh" $kernel "${need[@]}")" || return 1
  initrd="$("$ROOT/hack/vm/initramfs.sh" "$kdir")" || return 1
  share="$run/$name"; mkdir -p "$share/results"
  cp -al "$run/bin" "$share/pkg"
  cp "$ROOT/hack/vm/guest.sh" "$share/guest.sh"; echo "$name" >"$share/row"; echo "$reboot" >"$share/reboot"
  filter="${VM_RUN:-.}"
  [[ $name == *-ext-* ]] && filter="${VM_RUN:-$EXT_ROW_TESTS}"
  if [[ $loader == grub ]]; then
    read -r bootimg esp < <("$ROOT/hack/vm/boot-disk.sh" "$kdir" "$initrd") && [[ -n "$esp" ]] || return 1
    cp "$OVMF_VARS" "$share/vars.fd"
    filter="${VM_RUN:-$GRUB_ROW_TESTS}"
  fi
  echo "$filter" >"$share/filter"; echo "${VM_TEST_TIMEOUT:-10m}" >"$share/timeout"
  log "$name: booting $(cat "$kdir/release")"
  t0=$SECONDS
  # Multi-threaded TCG is faster but not safe for these tests. Twice the
  # 6.12 guest oopsed on an int3 in __set_next_task_fair as the quota test
  # turned CFS bandwidth on (a static key patched by text_poke_bp while the
  # other vCPU ran it), once it panicked in enqueue_task_fair, and once the
  # 6.1 guest hung in the quota test without a word until VM_TIMEOUT. One
  # thread runs the vCPUs in turn, so no vCPU runs code another is patching.
  qrc=0
  boot "$VM_ACCEL" || qrc=$?
  if [[ $qrc == 125 ]]; then
    log "$name: the guest kernel panicked under $VM_ACCEL (end of the console log below)"
    tail -n 25 "$share/console.log" >&2
  fi
  "$ROOT/hack/vm/summarize.sh" "$share" "$name" "$qrc" $((SECONDS - t0)) >"$run/$name.summary"
}

names=() bg=() failed=0
for row in "${ROWS[@]}"; do
  name="${row%%|*}"
  [[ -z "${VM_ROWS:-}" || " $VM_ROWS " == *" $name "* ]] || continue
  names+=("$name")
  if [[ $name == *-ext-* ]]; then
    run_row "$row" & bg+=($!)
  else
    run_row "$row" || failed=1
  fi
done
for pid in "${bg[@]}"; do wait "$pid" || failed=1; done
summary=()
for name in "${names[@]}"; do
  if [[ -s "$run/$name.summary" ]]; then summary+=("$(cat "$run/$name.summary")")
  else summary+=("$(printf '%-13s FAIL  no summary (the row stopped before its VM: see the log above)' "$name")"); failed=1; fi
done

echo "== test-kernels ($((SECONDS - start)) s; logs under $run)"
printf '%s\n' "${summary[@]}"
for f in "$run"/*/failures; do [[ -s "$f" ]] && cat "$f"; done
exit $failed
