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
# irqbalance is installed for agent/irq's privileged tests, which start
# their own and refuse to run beside another. Its package starts the
# daemon (systemd unit, or init.d script through invoke-rc.d); a daemon
# this script installed is stopped and kept from starting again, so it
# neither moves the host's IRQs under the tests nor fails them.
if [[ " ${missing[*]} " == *" irqbalance "* ]]; then
  if [[ -d /run/systemd/system ]]; then
    $SUDO systemctl disable --now irqbalance >&2 || true
  else
    $SUDO /etc/init.d/irqbalance stop >&2 || true
    $SUDO update-rc.d irqbalance disable >&2 2>/dev/null || true
  fi
  if pgrep -x irqbalance >/dev/null; then
    echo "install-deps: irqbalance still runs after it was installed and stopped (pid $(pgrep -x irqbalance | tr '\n' ' ')): stop it; agent/irq's tests start their own" >&2
    exit 1
  fi
fi
