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
