#!/usr/bin/env bash
# install-deps.sh installs the Debian packages listed in hack/apt-packages.txt
# (or the list given as $1) that are missing, so a fresh machine can run the tests and the demo.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LIST="${1:-$ROOT/hack/apt-packages.txt}"
mapfile -t pkgs < <(grep -v '^\s*#' "$LIST" | awk 'NF{print $1}' | sort -u)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
echo "install-deps: installing ${missing[*]}" >&2
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
$SUDO apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
