#!/usr/bin/env bash
# node-runtime.sh builds the container runtime our clusters run pods on from
# the Go module proxy and caches it outside the repository, next to the
# Kubernetes binaries of hack/k8s-binaries.sh:
#
#   containerd, containerd-shim-runc-v2, ctr   github.com/containerd/containerd/v2
#   runc                                       github.com/opencontainers/runc (cgo, static libseccomp)
#   crictl                                     sigs.k8s.io/cri-tools
#
#   hack/node-runtime.sh              # build what is missing, print the directory
#   hack/node-runtime.sh --print-dir  # print the directory only
#   hack/node-runtime.sh --versions   # print the pinned versions (for docs and logs)
#
# Why these pins: Kubernetes 1.35 was the last release to support containerd
# 1.x (Debian bookworm ships 1.6.20, end of life); NRI can set a container's
# scheduling policy from containerd 2.2.1 (NRI 0.11) with runc 1.2 or later.
# The binaries are what a node of ours runs: hack/local-cluster (make demo,
# make test-e2e) starts this containerd, and hack/cluster copies it into its
# guests. None of them has a replace directive, so `go install mod@version`
# builds each one straight from the proxy.
set -euo pipefail

CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.4.2}"
RUNC_VERSION="${RUNC_VERSION:-v1.5.3}"
CRICTL_VERSION="${CRICTL_VERSION:-v1.37.0}"
CACHE="${LATENCYTIER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/latencytier}"
BIN_DIR="$CACHE/runtime/containerd-$CONTAINERD_VERSION-runc-$RUNC_VERSION-crictl-$CRICTL_VERSION"

case "${1:-}" in
  --print-dir) echo "$BIN_DIR"; exit 0 ;;
  --versions) echo "containerd $CONTAINERD_VERSION, runc $RUNC_VERSION, crictl $CRICTL_VERSION"; exit 0 ;;
esac

log() { echo "node-runtime: $*" >&2; }

# install BIN PKG@VERSION CGO LDFLAGS: go install into a temp GOBIN, then move
# into place, so an interrupted build never leaves a half-written binary.
install_one() {
  local bin=$1 pkg=$2 cgo=$3 ldflags=$4 tags=${5:-} tmp
  [[ -x "$BIN_DIR/$bin" ]] && return 0
  log "building $bin from $pkg"
  tmp="$(mktemp -d)"
  GOBIN="$tmp" CGO_ENABLED="$cgo" GOFLAGS=-mod=mod go install -trimpath -tags "$tags" -ldflags "$ldflags" "$pkg"
  mv "$tmp/$bin" "$BIN_DIR/$bin"
  rm -rf "$tmp"
}

mkdir -p "$BIN_DIR"
# A runc cached by an earlier version of this script was built without
# seccomp: it fails every container whose pod asks for the RuntimeDefault
# seccomp profile (the chart's pods all do). Rebuild it.
if [[ -x "$BIN_DIR/runc" ]] && ! "$BIN_DIR/runc" --version | grep -q '^libseccomp:'; then
  log "cached runc lacks seccomp: rebuilding it"
  rm -f "$BIN_DIR/runc"
fi
ctrd=github.com/containerd/containerd/v2
ctrd_ldflags="-s -w -X $ctrd/version.Version=$CONTAINERD_VERSION -X $ctrd/version.Revision=module-proxy"
# Static Go binaries: the guests of hack/cluster run them on their own userland.
install_one containerd "$ctrd/cmd/containerd@$CONTAINERD_VERSION" 0 "$ctrd_ldflags"
install_one containerd-shim-runc-v2 "$ctrd/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" 0 "$ctrd_ldflags"
install_one ctr "$ctrd/cmd/ctr@$CONTAINERD_VERSION" 0 "$ctrd_ldflags"
install_one crictl "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION" 0 \
  "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION"
# runc needs cgo (its nsenter is C) and libseccomp: containerd's CRI puts the
# RuntimeDefault seccomp profile into the spec whenever the kernel has
# seccomp, and a runc built without the seccomp tag refuses any such spec.
# Linked statically against libseccomp.a (Debian's libseccomp-dev, with Go's
# own user and DNS lookups, as runc's own static build does) so that any
# guest userland runs it.
if [[ ! -x "$BIN_DIR/runc" ]] && ! pkg-config --exists libseccomp 2>/dev/null; then
  log "building runc needs libseccomp's static library and pkg-config: apt-get install libseccomp-dev pkg-config"
  exit 1
fi
install_one runc "github.com/opencontainers/runc@$RUNC_VERSION" 1 \
  "-s -w -X main.version=${RUNC_VERSION#v} -extldflags=-static" "seccomp osusergo netgo"
echo "$BIN_DIR"
