#!/usr/bin/env bash
# krew/dist.sh (make dist-plugin): the release archives of kubectl-latency
# and its krew manifest. For each platform it builds the plugin
# (CGO-free, stripped, -X main.version), packs it with
# kubectl_complete-latency (and LICENSE, if the repository has one) into
# dist/plugin/kubectl-latency_<version>_<os>_<arch>.tar.gz (reproducible:
# sorted, owner 0, mtime 0, gzip -n), and writes dist/plugin/latency.yaml
# from krew/latency.yaml with each archive's URI and sha256 filled in.
#
#   VERSION      the plugin's version (make passes git describe); krew wants
#                semver with a leading v, so anything else becomes
#                v0.0.0-<VERSION> in the manifest
#   RELEASE_URL  where the archives will be downloaded from, e.g. your
#                repository's release page for <version> (required: the
#                project publishes at no address of its own, so there is
#                no default to guess)
#   HOMEPAGE     the plugin's homepage in the manifest, e.g. your
#                repository's URL (required, for the same reason)
#   DIST_DIR     output directory (default dist/plugin; never committed)
#   PLATFORMS    os/arch list (default: every platform in krew/latency.yaml)
#   PREBUILT     a directory holding <os>_<arch>/kubectl-latency: package
#                those instead of building the platforms it has
#                (krew_test.go's fake set)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TEMPLATE="$ROOT/krew/latency.yaml"
VERSION="${VERSION:?VERSION is required (make dist-plugin sets it)}"
if [[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  KREW_VERSION=$VERSION
else
  KREW_VERSION="v0.0.0-$(tr -c '0-9A-Za-z.\n-' '-' <<<"$VERSION")"
fi
RELEASE_URL="${RELEASE_URL:?RELEASE_URL is required: where the archives will be downloaded from (e.g. https://github.com/<you>/latencytier/releases/download/$KREW_VERSION)}"
RELEASE_URL="${RELEASE_URL%/}"
HOMEPAGE="${HOMEPAGE:?HOMEPAGE is required: the homepage the krew manifest names (e.g. https://github.com/<you>/latencytier)}"
DIST_DIR="${DIST_DIR:-$ROOT/dist/plugin}"
PLATFORMS="${PLATFORMS:-$(sed -n 's/.*"@URI_\([a-z0-9]*\)_\([a-z0-9]*\)@".*/\1\/\2/p' "$TEMPLATE" | tr '\n' ' ')}"
PREBUILT="${PREBUILT:-}"

mkdir -p "$DIST_DIR"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
manifest=$(grep -v '^#' "$TEMPLATE" | sed -e "s|@VERSION@|$KREW_VERSION|" -e "s|@HOMEPAGE@|$HOMEPAGE|")
for p in $PLATFORMS; do
  os=${p%/*} arch=${p#*/}
  dir="$stage/${os}_$arch"
  mkdir -p "$dir"
  if [[ -n "$PREBUILT" && -f "$PREBUILT/${os}_$arch/kubectl-latency" ]]; then
    install -m 0755 "$PREBUILT/${os}_$arch/kubectl-latency" "$dir/kubectl-latency"
  else
    (cd "$ROOT" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath \
      -ldflags "-s -w -X main.version=$VERSION" -o "$dir/kubectl-latency" ./cmd/kubectl-latency)
  fi
  install -m 0755 "$ROOT/krew/kubectl_complete-latency" "$dir/"
  for f in "$ROOT"/LICENSE*; do [[ -f "$f" ]] && install -m 0644 "$f" "$dir/"; done
  archive="kubectl-latency_${KREW_VERSION}_${os}_$arch.tar.gz"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$dir" -cf - . | gzip -n >"$DIST_DIR/$archive"
  sum=$(sha256sum "$DIST_DIR/$archive" | cut -d' ' -f1)
  manifest=$(sed -e "s|@URI_${os}_$arch@|$RELEASE_URL/$archive|" -e "s|@SHA256_${os}_$arch@|$sum|" <<<"$manifest")
  echo "$DIST_DIR/$archive $sum"
done
if grep -q '@[A-Z0-9_a-z]*@' <<<"$manifest"; then
  echo "krew/dist.sh: unfilled in the manifest (a platform not built?): $(grep -o '@[A-Z0-9_a-z]*@' <<<"$manifest" | tr '\n' ' ')" >&2
  exit 1
fi
printf '%s\n' "$manifest" >"$DIST_DIR/latency.yaml"
echo "$DIST_DIR/latency.yaml"
