#!/bin/sh
# guest.sh runs inside the VM as root (from latencytier-vmtest.service) out
# of the 9p share /mnt/share that test-kernels.sh filled: pkg/<name>/ holds
# a static test binary (and its testdata), row names the matrix row.
# Results go back to results/<name>.{out,rc} and results/env. Boot 1 runs
# every binary; if a test left /var/lib/latencytier-vmtest/reboot (the
# journal-across-reboot test, in the rows whose share has reboot = 1), the
# VM reboots (qemu -snapshot keeps the disk) and boot 2 runs that package's
# *AfterReboot tests, or the -test.run pattern the marker names after the
# package ("agent_vmtest ^TestX$"); a test of boot N may leave the marker
# again for boot N+1 (the bootloader row boots five times), at most 5
# boots. Then power off. The reboot itself is `systemctl reboot`, unless a
# test also left reboot-by ("agent_vmtest ^TestX$"): then that test reboots
# the VM (the agent's own way) as results/<name>.bootN-reboot; it never
# returns when the reboot comes, so the next boot records its exit 0, and
# if it does return its exit is kept and systemctl reboots instead.
S=/mnt/share
R=$S/results
mkdir -p "$R"
# LATENCYTIER_VM_REBOOT=1: this row runs the journal-across-reboot test
export LATENCYTIER_VM=1 LATENCYTIER_VM_ROW="$(cat $S/row)" LATENCYTIER_VM_REBOOT="$(cat $S/reboot)" \
  PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
marker=/var/lib/latencytier-vmtest/reboot boots=/var/lib/latencytier-vmtest/boots by=/var/lib/latencytier-vmtest/reboot-by
# stamp NAME: guest uptime (s) at NAME, for the row's time split
stamp() { echo "$1 $(cut -d' ' -f1 /proc/uptime)" >>"$R/timing"; }
run() { # name phase args...
  n=$1; p=$2; shift 2
  # -test.v output also goes to the console, so a hang shows where it is
  (cd "$S/pkg/$n" && LATENCYTIER_VM_PHASE=$p ./test -test.v -test.timeout "$(cat $S/timeout)" "$@" 2>&1) |
    tee "$R/$n$p.out" >/dev/console
  tail -1 "$R/$n$p.out" | grep -q '^ok\|^PASS$' && echo 0 >"$R/$n$p.rc" || echo 1 >"$R/$n$p.rc"
  echo "latencytier-vmtest: $n (boot $p) exit $(cat "$R/$n$p.rc")" >/dev/console
}
# reboot_if_asked reboots when a test left the marker and boots remain.
reboot_if_asked() {
  b="$(cat "$boots" 2>/dev/null || echo 1)"
  if [ -f "$marker" ] && [ "$b" -lt 5 ]; then
    sync
    if [ -f "$by" ]; then
      n="$(cut -d' ' -f1 "$by")"; sel="$(cut -s -d' ' -f2- "$by")"; rm -f "$by"; sync
      echo "latencytier-vmtest: $n $sel reboots for $(cat "$marker")" >/dev/console
      stamp "boot$b-reboot"
      run "$n" ".boot$b-reboot" -test.run "$sel"
      echo "latencytier-vmtest: $n $sel returned without a reboot; systemctl reboots" >/dev/console
    fi
    echo "latencytier-vmtest: rebooting for $(cat "$marker")" >/dev/console
    exec systemctl reboot
  fi
}
if [ -f "$marker" ]; then
  n="$(cut -d' ' -f1 "$marker")"; sel="$(cut -s -d' ' -f2- "$marker")"; rm -f "$marker"
  b=$(( $(cat "$boots" 2>/dev/null || echo 1) + 1 )); echo "$b" >"$boots"
  stamp "boot$b-start"
  # a reboot-by test the reboot stopped: it did what it was run for
  for f in "$R"/*.boot$((b - 1))-reboot.out; do
    [ -f "$f" ] && [ ! -f "${f%.out}.rc" ] && echo 0 >"${f%.out}.rc"
  done
  run "$n" ".boot$b" -test.run "${sel:-AfterReboot\$}"
  stamp "boot$b-done"
  reboot_if_asked
else
  stamp boot1-start
  {
    echo "kernel $(uname -r)"
    echo "cgroup $(stat -fc %T /sys/fs/cgroup)"
    echo "init $(cat /proc/1/comm) $(systemctl --version | head -1)"
    echo "cmdline $(cat /proc/cmdline)"
  } >"$R/env"
  # The real-systemd tests first and in their own process with a short
  # timeout: should systemd stop answering (as it did before agent/systemd
  # authenticated like sd-bus), they fail without holding the engine's lock
  # for the rest; their journal is dropped so the other tests start clean.
  for d in "$S"/pkg/*/; do
    n="$(basename "$d")"
    # the systemd tests the filter selects, as one anchored -test.run
    sel="$("$d/test" -test.list "$(cat $S/filter)" 2>/dev/null | grep '^TestSystemd' | paste -sd'|')"
    [ -n "$sel" ] || continue
    run "$n" .systemd -test.run "^($sel)\$" -test.timeout 2m
    if [ "$(cat "$R/$n.systemd.rc")" != 0 ]; then
      journalctl -b --no-pager -n 80 _PID=1 >"$R/$n.systemd.pid1-journal" 2>&1
      rm -f /var/lib/latencytier/journal.json
    fi
  done
  stamp systemd-tests-done
  for d in "$S"/pkg/*/; do run "$(basename "$d")" "" -test.run "$(cat $S/filter)" -test.skip '^TestSystemd'; done
  stamp boot1-tests-done
  reboot_if_asked
fi
sync
exec systemctl poweroff
