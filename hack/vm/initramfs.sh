#!/usr/bin/env bash
# initramfs.sh KERNEL_DIR: builds (once, cached) a busybox-static initramfs
# for a kernel of kernel.sh. Debian builds virtio, virtio_blk, ext4 and 9p
# as modules, so its /init loads their dependency chain (ordered from
# modules.dep), mounts /dev/vda and switch_roots to systemd. The modules
# stay loaded, so the root disk needs no /lib/modules of its own.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cache_lock
kdir="$1"
rel="$(cat "$kdir/release")"
stamp="$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-12)"
out="$kdir/initramfs-$stamp.cpio.gz"
if [[ -f "$out" ]]; then echo "$out"; exit 0; fi
busybox=/bin/busybox
file -L "$busybox" 2>/dev/null | grep -q 'statically linked' || busybox=/usr/bin/busybox
[[ -x "$busybox" ]] || die "busybox-static is not installed"

want=(virtio_pci virtio_blk crc32c_generic crc32c-intel ext4 9pnet_virtio 9p)
moddir="$kdir/lib/modules/$rel"
# order prints the modules.dep paths to load for module $1, dependencies
# first (modules.dep lists them so that the last one loads first).
order() {
  awk -v m="$1" -F': *' '{ n = $1; sub(/.*\//, "", n); sub(/\.ko.*/, "", n); gsub(/-/, "_", n)
      mm = m; gsub(/-/, "_", mm)
      if (n == mm) { k = split($2, d, / +/); for (i = k; i >= 1; i--) if (d[i] != "") print d[i]; print $1; exit } }' \
    "$moddir/modules.dep"
}

tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"/{bin,dev,proc,sys,newroot,modules}
cp "$busybox" "$tmp/bin/busybox"
for a in sh mount umount insmod sleep switch_root mkdir cat echo; do ln -s busybox "$tmp/bin/$a"; done
: >"$tmp/modules/order"
for m in "${want[@]}"; do
  for p in $(order "$m"); do   # an unlisted module is built in
    f="$(basename "$p")"; f="${f%%.ko*}.ko"
    grep -qx "$f" "$tmp/modules/order" && continue
    case "$p" in   # busybox insmod takes plain .ko files
      *.xz) xz -dc "$moddir/$p" >"$tmp/modules/$f" ;;
      *.zst) zstd -qdc "$moddir/$p" >"$tmp/modules/$f" ;;
      *.gz) gzip -dc "$moddir/$p" >"$tmp/modules/$f" ;;
      *) cp "$moddir/$p" "$tmp/modules/$f" ;;
    esac
    echo "$f" >>"$tmp/modules/order"
  done
done
cat >"$tmp/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /modules/order); do insmod /modules/$m || echo "initramfs: insmod $m failed"; done
i=0
while [ ! -b /dev/vda ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
if ! mount -t ext4 -o rw /dev/vda /newroot; then
  echo "initramfs: cannot mount /dev/vda"; sleep 2; echo o >/proc/sysrq-trigger
fi
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /sbin/init
INIT
chmod 755 "$tmp/init"
(cd "$tmp" && find . | cpio -o -H newc --quiet | gzip -1) >"$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
