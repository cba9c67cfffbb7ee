#!/usr/bin/env bash
# rootfs.sh: builds (once, cached) the guests' root disk: a Debian bookworm
# minbase with systemd as init, containerd and runc, from the mirror the
# host's apt sources name, and a unit that runs the share's guest.sh at
# boot. Debian's irqbalance is installed but disabled (it would move IRQs
# under the other tests): the test that needs it, agent/vmtest's
# irqbalance_test.go, starts it and stops it again. Prints the image's
# path. The image is shared by every kernel and only ever booted with
# qemu -snapshot, so runs never change it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cache_lock
here="$(dirname "${BASH_SOURCE[0]}")"   # rebuilt when these change:
stamp="$(cat "$here/rootfs.sh" "$here/guest-boot.sh" "$here/latencytier-vmtest.service" | sha256sum | cut -c1-12)"
img="$VM_CACHE/rootfs-bookworm-$stamp.img"
if [[ -f "$img" ]]; then echo "$img"; exit 0; fi

tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
log "mmdebstrap bookworm from $(mirror)"
mmdebstrap --mode=root --variant=minbase --quiet \
  --include=systemd,systemd-sysv,udev,dbus,iproute2,kmod,procps,containerd,runc,irqbalance \
  --customize-hook='echo vm >"$1/etc/hostname"' \
  --customize-hook='echo "/dev/vda / ext4 rw,errors=remount-ro 0 1" >"$1/etc/fstab"' \
  --customize-hook='chroot "$1" passwd -d root >/dev/null' \
  --customize-hook='mkdir -p "$1/mnt/share" "$1/usr/local/sbin"' \
  --customize-hook='upload '"$ROOT"'/hack/vm/guest-boot.sh /usr/local/sbin/latencytier-vmtest' \
  --customize-hook='upload '"$ROOT"'/hack/vm/latencytier-vmtest.service /etc/systemd/system/latencytier-vmtest.service' \
  --customize-hook='chmod 755 "$1/usr/local/sbin/latencytier-vmtest"' \
  --customize-hook='chroot "$1" systemctl enable latencytier-vmtest.service' \
  --customize-hook='chroot "$1" systemctl disable irqbalance.service' \
  --customize-hook='chroot "$1" systemctl mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer systemd-tmpfiles-clean.timer' \
  bookworm "$tmp/root" "$(mirror)" >&2
mkdir -p "$VM_CACHE"
# stdout is the image path only: mkfs -d names the file it creates there.
mkfs.ext4 -q -F -L root -d "$tmp/root" "$img.tmp" 2G >&2
rm -f "$VM_CACHE"/rootfs-bookworm-*.img
mv "$img.tmp" "$img"
echo "$img"
