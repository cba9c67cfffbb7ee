#!/usr/bin/env bash
# hack/release/release.sh (make release VERSION=vX.Y.Z): one release in one
# directory, dist/release/<version>/ (never committed), with no network and
# no container engine (docs/release.md):
#   latencytier_<v>_linux_<arch>.oci.tar  the image per architecture (OCI
#                                         archive; hack/image, the
#                                         Dockerfile's final stage)
#   latencytier_<v>.oci.tar               both under one OCI image index
#   latencytier-<semver>.tgz              the chart, version <semver>,
#                                         appVersion <v> (the image tag)
#   kubectl-latency_<v>_<os>_<arch>.tar.gz, latency.yaml
#                                         the plugin and its krew manifest
#                                         (krew/dist.sh)
#   latencytier_<v>.spdx.json             the SBOM (hack/release sbom)
#   SHA256SUMS                            sha256 of every other file
# and then checks that they agree (hack/release check -exec).
#
#   VERSION      vMAJOR.MINOR.PATCH[-PRERELEASE] (required)
#   RELEASE_URL, HOMEPAGE   the krew manifest's (required: krew/dist.sh)
#   IMAGE_REPO   the image's repository in its tag (default latencytier,
#                as the chart's image.repository; push the archives where
#                you like, e.g. skopeo copy oci-archive:FILE docker://REPO:TAG)
#   ARCHES       the image's architectures (default "amd64 arm64")
#   RELEASE_DIR  output directory (default dist/release/<version>)
#   IMAGE_ONLY   1: only the image archives and their index, checked
#                (make image, what CI can afford: docs/release.md)
#   PREBUILT     a directory holding linux_<arch>/latencytier (and
#                <os>_<arch>/kubectl-latency, krew/dist.sh's): package those
#                instead of building (hack/release's test, with fakes)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VERSION="${VERSION:?VERSION is required, e.g. make release VERSION=v0.1.0}"
if ! [[ "$VERSION" =~ ^v([0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?)$ ]]; then
  echo "release: VERSION=$VERSION is not vMAJOR.MINOR.PATCH[-PRERELEASE]" >&2
  exit 1
fi
SEMVER="${BASH_REMATCH[1]}"
IMAGE_ONLY="${IMAGE_ONLY:-}"
[[ -n "$IMAGE_ONLY" ]] || : "${RELEASE_URL:?RELEASE_URL is required: where the plugin archives will be downloaded from (krew/dist.sh)}"
[[ -n "$IMAGE_ONLY" ]] || : "${HOMEPAGE:?HOMEPAGE is required: the homepage the krew manifest names (krew/dist.sh)}"
IMAGE_REPO="${IMAGE_REPO:-latencytier}"
ARCHES="${ARCHES:-amd64 arm64}"
OUT="${RELEASE_DIR:-$ROOT/dist/release/$VERSION}"
PREBUILT="${PREBUILT:-}"

cd "$ROOT"
rm -rf "$OUT"
mkdir -p "$OUT"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
go build -o "$stage/image" ./hack/image
go build -o "$stage/release" ./hack/release

# The image: the static binary per architecture (the BPF object is
# embedded by bpf2go; runqlat_bpfel.go builds for both), in the image the
# Dockerfile's final stage describes (TestDockerfileMatchesRelease).
archives=()
for arch in $ARCHES; do
  bin="$stage/linux_$arch/latencytier"
  mkdir -p "${bin%/*}"
  if [[ -n "$PREBUILT" && -f "$PREBUILT/linux_$arch/latencytier" ]]; then
    install -m 0755 "$PREBUILT/linux_$arch/latencytier" "$bin"
  else
    CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "-s -w -X main.version=$VERSION" -o "$bin" .
  fi
  archive="$OUT/latencytier_${VERSION}_linux_$arch.oci.tar"
  "$stage/image" -format oci -arch "$arch" -o "$archive" -tag "$IMAGE_REPO:$VERSION" \
    -file "$bin=/latencytier" -user 65532:65532 -entrypoint /latencytier -cmd manager \
    -label org.opencontainers.image.title=latencytier \
    -label "org.opencontainers.image.version=$VERSION" \
    -label org.opencontainers.image.licenses=Apache-2.0
  archives+=("$archive")
  echo "$archive"
done
"$stage/release" index -o "$OUT/latencytier_$VERSION.oci.tar" -tag "$IMAGE_REPO:$VERSION" "${archives[@]}"
echo "$OUT/latencytier_$VERSION.oci.tar"
if [[ -n "$IMAGE_ONLY" ]]; then
  "$stage/release" check -images-only -version "$VERSION" -arches "${ARCHES// /,}" \
    -bpf-object agent/measure/bpf/runqlat_bpfel.o -exec "$OUT"
  exit 0
fi

# Every timestamp a release holds is the commit's, so two runs give the
# same bytes (hack/release's TestReleaseIsReproducible).
created=$(git log -1 --format=%ct 2>/dev/null || echo 0)

# The chart, its version the release's and its default image tag too;
# repacked as helm packages it but with sorted names, owner 0 and every
# mtime the commit's (helm stamps the time it ran).
go tool helm package charts/latencytier --version "$SEMVER" --app-version "$VERSION" -d "$stage" >/dev/null
mkdir "$stage/chart"
tar -xzmf "$stage/latencytier-$SEMVER.tgz" -C "$stage/chart"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@"$created" -C "$stage/chart" -cf - latencytier |
  gzip -n >"$OUT/latencytier-$SEMVER.tgz"
echo "$OUT/latencytier-$SEMVER.tgz"

# The plugin archives and the krew manifest.
VERSION=$VERSION DIST_DIR="$OUT" PREBUILT="$PREBUILT" krew/dist.sh

# The SBOM.
"$stage/release" sbom -version "$VERSION" -created "$created" "$OUT"
echo "$OUT/latencytier_$VERSION.spdx.json"

(cd "$OUT" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
echo "$OUT/SHA256SUMS"

"$stage/release" check -version "$VERSION" -arches "${ARCHES// /,}" -bpf-object agent/measure/bpf/runqlat_bpfel.o \
  -exec "$OUT"
