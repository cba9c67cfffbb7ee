# lib.sh: shared settings for the hack/vm scripts (sourced, not run).
# Everything they download or build lives under $CACHE/vm, outside the repo,
# like the Kubernetes binaries of hack/k8s-binaries.sh.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${LATENCYTIER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/latencytier}"
VM_CACHE="$CACHE/vm"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

log() { echo "vm: $*" >&2; }
die() { echo "vm: $*" >&2; exit 1; }

# mirror prints the Debian mirror the host's own apt sources use for the
# main archive (the URI serving bookworm), whatever format the sources are in.
mirror() {
  local m
  m="$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null |
    awk '$2 == "bookworm" { print $1; exit }')"
  [[ -n "$m" ]] || die "no bookworm entry in the host's apt sources (apt-get indextargets); run apt-get update"
  echo "${m%/}"
}

# private_apt SUITE DIR writes an apt configuration under DIR that reads
# only DIR's own sources, lists and cache, so the host's sources, lists and
# package state are never touched; it prints the apt-get options using it.
private_apt() {
  local suite="$1" dir="$2"
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/parts" "$dir/prefs"
  echo "deb [signed-by=$KEYRING] $(mirror) $suite main" >"$dir/sources.list"
  printf '%s\n' \
    "Dir::Etc::SourceList \"$dir/sources.list\";" \
    "Dir::Etc::SourceParts \"$dir/parts\";" \
    "Dir::Etc::PreferencesParts \"$dir/prefs\";" \
    "Dir::State::Lists \"$dir/lists\";" \
    "Dir::Cache \"$dir/cache\";" \
    "APT::Architecture \"amd64\";" \
    "APT::Sandbox::User \"root\";" >"$dir/apt.conf"
  echo "-c $dir/apt.conf"
}

# cache_lock: one builder of $VM_CACHE at a time, held until the calling
# script exits. make test-kernels and make test-node-stack run side by side
# in .ci/run and build some of the same files (the trixie kernel, its
# initramfs, the GRUB disk); the second waits and then finds them built. A
# builder that runs another (boot-disk.sh and the kernel scripts) holds it
# for both: the flag in the environment says it is held.
cache_lock() {
  [[ -z "${LATENCYTIER_VM_CACHE_LOCKED:-}" ]] || return 0
  mkdir -p "$VM_CACHE"
  exec 8>"$VM_CACHE/.lock"
  flock 8
  export LATENCYTIER_VM_CACHE_LOCKED=1
}
