#!/usr/bin/env bash
# boot-disk.sh KERNEL_DIR INITRD [PACKAGES]: builds (once, cached) what a
# guest needs to boot through a real bootloader instead of qemu's direct
# kernel boot (which keeps its command line across reboots, so it cannot
# test a bootloader change): a root disk like rootfs.sh's plus GRUB's tools
# (update-grub) and the kernel and initramfs in /boot, and an EFI system
# partition directory holding a standalone GRUB EFI image that loads the
# root disk's /boot/grub/grub.cfg. OVMF boots it from qemu's virtual FAT
# drive. PACKAGES (comma-separated) are installed too: make test-kernels'
# GRUB row and hack/cluster's nodes need none (the nodes' runtime comes
# through their share), so both boot the same image; each set is an image
# of its own in the cache.
# Prints "<root image> <esp dir>".
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cache_lock
kdir="$1" initrd="$2" extra="${3:-}"
[[ "$extra" =~ ^[a-z0-9.+,-]*$ ]] || die "packages $extra: want a comma-separated list of package names"
rel="$(cat "$kdir/release")"
# The image's name says its package set (none: "grub"), so the GRUB row's
# and the cluster's images are cached side by side.
set_name="grub${extra:+-${extra//,/-}}"
here="$(dirname "${BASH_SOURCE[0]}")"   # rebuilt when these, the packages or the kernel change:
stamp="$( (cat "$here/boot-disk.sh" "$here/guest-boot.sh" "$here/latencytier-vmtest.service" "$initrd"; echo "$extra") | sha256sum | cut -c1-12)"
img="$VM_CACHE/bootdisk-$rel-$set_name-$stamp.img" esp="$VM_CACHE/esp-$rel-$set_name-$stamp"
if [[ -f "$img" && -d "$esp" ]]; then echo "$img $esp"; exit 0; fi
command -v grub-mkstandalone >/dev/null || die "grub-mkstandalone missing (apt-get install grub-efi-amd64-bin)"

tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
# The distribution's GRUB defaults, as a node would have them; root=/dev/vda
# because the initramfs mounts it by name (no UUIDs).
cat >"$tmp/grub" <<'GRUB'
GRUB_DEFAULT=0
GRUB_TIMEOUT=0
GRUB_DISTRIBUTOR=Debian
GRUB_CMDLINE_LINUX_DEFAULT="quiet systemd.show_status=0"
GRUB_CMDLINE_LINUX="console=ttyS0 rw"
GRUB_DISABLE_LINUX_UUID=true
GRUB_DISABLE_RECOVERY=true
GRUB_DISABLE_OS_PROBER=true
GRUB_TERMINAL=console
GRUB
# The first boot's configuration, until update-grub writes its own.
cat >"$tmp/grub.cfg" <<CFG
set timeout=0
menuentry 'Debian GNU/Linux' {
  linux /boot/vmlinuz-$rel root=/dev/vda ro console=ttyS0 rw quiet systemd.show_status=0
  initrd /boot/initrd.img-$rel
}
CFG
log "mmdebstrap bookworm with GRUB's tools${extra:+ and $extra} from $(mirror)"
mmdebstrap --mode=root --variant=minbase --quiet \
  --include=systemd,systemd-sysv,udev,dbus,iproute2,kmod,procps,grub2-common,grub-efi-amd64-bin${extra:+,$extra} \
  --customize-hook='echo vm >"$1/etc/hostname"' \
  --customize-hook='echo "/dev/vda / ext4 rw,errors=remount-ro 0 1" >"$1/etc/fstab"' \
  --customize-hook='chroot "$1" passwd -d root >/dev/null' \
  --customize-hook='mkdir -p "$1/mnt/share" "$1/usr/local/sbin" "$1/boot/grub" "$1/etc/default/grub.d"' \
  --customize-hook='upload '"$tmp"'/grub /etc/default/grub' \
  --customize-hook='upload '"$tmp"'/grub.cfg /boot/grub/grub.cfg' \
  --customize-hook='upload '"$kdir"'/vmlinuz /boot/vmlinuz-'"$rel" \
  --customize-hook='upload '"$initrd"' /boot/initrd.img-'"$rel" \
  --customize-hook='upload '"$ROOT"'/hack/vm/guest-boot.sh /usr/local/sbin/latencytier-vmtest' \
  --customize-hook='upload '"$ROOT"'/hack/vm/latencytier-vmtest.service /etc/systemd/system/latencytier-vmtest.service' \
  --customize-hook='chmod 755 "$1/usr/local/sbin/latencytier-vmtest"' \
  --customize-hook='chroot "$1" systemctl enable latencytier-vmtest.service' \
  --customize-hook='chroot "$1" systemctl mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer systemd-tmpfiles-clean.timer' \
  bookworm "$tmp/root" "$(mirror)" >&2
mkdir -p "$VM_CACHE"
mkfs.ext4 -q -F -L root -d "$tmp/root" "$img.tmp" 2G >&2
# GRUB's EFI image finds the root disk by its label (not by the file it
# loads: the image's own memdisk holds a /boot/grub/grub.cfg, this one).
cat >"$tmp/early.cfg" <<'EARLY'
insmod ext2
search --no-floppy --label --set=root root
configfile ($root)/boot/grub/grub.cfg
EARLY
mkdir -p "$tmp/esp/EFI/BOOT"
grub-mkstandalone -O x86_64-efi -o "$tmp/esp/EFI/BOOT/BOOTX64.EFI" \
  --modules="ext2 part_msdos part_gpt search search_label configfile linux normal echo" \
  "boot/grub/grub.cfg=$tmp/early.cfg" >&2
# (a stamp is 12 characters: "grub-*" would take the other sets' images too)
rm -rf "$VM_CACHE"/bootdisk-"$rel-$set_name"-????????????.img "$VM_CACHE"/esp-"$rel-$set_name"-????????????
mv "$img.tmp" "$img"; cp -r "$tmp/esp" "$esp"
echo "$img $esp"
