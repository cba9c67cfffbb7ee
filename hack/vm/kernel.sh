#!/usr/bin/env bash
# kernel.sh SUITE SERIES [CONFIG_X=y ...]: downloads (never installs) the
# newest Debian linux-image-SERIES.*-amd64 of SUITE and unpacks it into the
# cache; prints the kernel's directory (vmlinuz, lib/modules/<release> with
# modules.dep, release, and config when the package ships one). Each
# CONFIG_X=y given must be a line of that config, or it fails (also when
# the kernel is already cached): a row that needs a kernel feature says so.
#
#   hack/vm/kernel.sh bookworm 6.1     # CFS
#   hack/vm/kernel.sh trixie 6.12      # EEVDF
#   hack/vm/kernel.sh trixie-backports 7.3 CONFIG_SCHED_CLASS_EXT=y   # sched_ext
#
# Up to 6.x linux-image-<abi> holds the kernel (/boot/vmlinuz-<rel>,
# /boot/config-<rel>) and its modules. From 7.x it is a metapackage: the
# image is in linux-binary-<abi> (/usr/lib/modules/<rel>/vmlinuz), the
# modules in linux-modules-<abi> and the config in linux-base-<abi>
# (/usr/lib/modules/<rel>/config); all of them are unpacked then.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cache_lock
suite="$1" series="$2"; shift 2
dir="$VM_CACHE/kernels/$suite-$series"

# require DIR: each of the arguments is a line of DIR's config.
require() {
  local c
  (( $# > 1 )) || return 0
  [[ -f "$1/config" ]] || die "$(cat "$1/package"): no kernel config shipped, cannot check ${*:2}"
  for c in "${@:2}"; do
    grep -qxF "$c" "$1/config" ||
      die "$(cat "$1/package"): the row needs $c; its config has: $(grep -E "^(# )?${c%%=*}[= ]" "$1/config" || echo "no ${c%%=*}")"
  done
}
if [[ -f "$dir/release" ]]; then require "$dir" "$@"; echo "$dir"; exit 0; fi

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
abi="${pkg#linux-image-}" parts=("$pkg")
# shellcheck disable=SC2086
if apt-cache $opts show "linux-binary-$abi" >/dev/null 2>&1; then
  parts+=("linux-binary-$abi" "linux-modules-$abi" "linux-base-$abi")
fi
log "downloading ${parts[*]}"
# shellcheck disable=SC2086
(cd "$tmp" && apt-get $opts download "${parts[@]}" >&2)
mkdir -p "$tmp/x"
for p in "${parts[@]}"; do
  debs=("$tmp/${p}_"*.deb)   # name_version_arch.deb: not the -dbg or another flavour's
  [[ ${#debs[@]} == 1 && -f "${debs[0]}" ]] || die "want one ${p}_*.deb, got: ${debs[*]}"
  dpkg-deb -x "${debs[0]}" "$tmp/x"
done
rel="$(ls "$tmp/x/lib/modules" 2>/dev/null || ls "$tmp/x/usr/lib/modules")"
mods="$tmp/x/lib/modules/$rel"; [[ -d "$mods" ]] || mods="$tmp/x/usr/lib/modules/$rel"
# first of: 6.x's /boot, 7.x's beside the modules
first() { local f; for f; do [[ -f "$f" ]] && { echo "$f"; return; }; done; }
vmlinuz="$(first "$tmp/x/boot/vmlinuz-$rel" "$mods/vmlinuz")"
config="$(first "$tmp/x/boot/config-$rel" "$mods/config")"
[[ -n "$vmlinuz" ]] || die "$pkg: no vmlinuz in ${parts[*]}"
rm -rf "$dir.new"; mkdir -p "$dir.new/lib/modules/$rel"
cp "$vmlinuz" "$dir.new/vmlinuz"
[[ -z "$config" ]] || cp "$config" "$dir.new/config"
cp -a "$mods/." "$dir.new/lib/modules/$rel/"
rm -f "$dir.new/lib/modules/$rel/vmlinuz"   # 7.x: copied above, 14 MB
depmod -b "$dir.new" "$rel"   # the package's postinst would; modules.dep orders the initramfs
echo "$rel" >"$dir.new/release"; echo "$pkg" >"$dir.new/package"
require "$dir.new" "$@"
rm -rf "$dir"; mv "$dir.new" "$dir"
echo "$dir"
