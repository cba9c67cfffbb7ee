#!/usr/bin/env bash
# kernel.sh SUITE SERIES: downloads (never installs) the newest Debian
# linux-image-SERIES.*-amd64 of SUITE and unpacks it into the cache; prints
# the kernel's directory (vmlinuz, lib/modules/<release> with modules.dep,
# release).
#
#   hack/vm/kernel.sh bookworm 6.1     # CFS
#   hack/vm/kernel.sh trixie 6.12      # EEVDF
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cache_lock
suite="$1" series="$2"
dir="$VM_CACHE/kernels/$suite-$series"
if [[ -f "$dir/release" ]]; then echo "$dir"; exit 0; fi

tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
opts="$(private_apt "$suite" "$tmp/apt")"
log "apt-get update ($suite, private lists)"
# shellcheck disable=SC2086
apt-get $opts update -qq >&2
re="^linux-image-${series//./\\.}\\.[0-9]+\\+deb[0-9]+-amd64\$"   # trixie: 6.12.48+deb13-amd64
[[ "$series" == 6.1 ]] && re='^linux-image-6\.1\.0-[0-9]+-amd64$'   # bookworm: 6.1.0-50-amd64
# shellcheck disable=SC2086
pkg="$(apt-cache $opts search --names-only "$re" | awk '{print $1}' | sort -V | tail -1 || true)"
[[ -n "$pkg" ]] || die "no package matching $re in $suite"
log "downloading $pkg"
# shellcheck disable=SC2086
(cd "$tmp" && apt-get $opts download "$pkg" >&2)
mkdir -p "$tmp/x"
dpkg-deb -x "$tmp"/"$pkg"_*.deb "$tmp/x"
rel="$(ls "$tmp/x/lib/modules" 2>/dev/null || ls "$tmp/x/usr/lib/modules")"
mods="$tmp/x/lib/modules/$rel"; [[ -d "$mods" ]] || mods="$tmp/x/usr/lib/modules/$rel"
rm -rf "$dir.new"; mkdir -p "$dir.new/lib/modules/$rel"
cp "$tmp/x/boot/vmlinuz-$rel" "$dir.new/vmlinuz"
cp -a "$mods/." "$dir.new/lib/modules/$rel/"
depmod -b "$dir.new" "$rel"   # the package's postinst would; modules.dep orders the initramfs
echo "$rel" >"$dir.new/release"; echo "$pkg" >"$dir.new/package"
rm -rf "$dir"; mv "$dir.new" "$dir"
echo "$dir"
