#!/usr/bin/env bash
# k8s-binaries.sh builds the Kubernetes control-plane (and, with "all", node)
# binaries from the Go module proxy and caches them outside the repository.
#
#   hack/k8s-binaries.sh            # etcd + kube-apiserver (envtest) + kubectl
#   hack/k8s-binaries.sh all        # + kube-controller-manager, kube-scheduler, kubelet
#   hack/k8s-binaries.sh --print-dir
#
# The Kubernetes version follows go.mod's k8s.io/api (v0.X.Y -> v1.X.Y), so the
# API server the tests talk to is the one our client libraries were built for.
# k8s.io/kubernetes cannot be `go install`ed (its go.mod replaces the staging
# modules with ./staging paths), so we build it through a throwaway module that
# replaces every staging module with its published v0.X.Y release.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
API_VERSION="$(cd "$ROOT" && go list -m -f '{{.Version}}' k8s.io/api)"   # v0.37.2
K8S_VERSION="v1.${API_VERSION#v0.}"                                       # v1.37.2
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
CACHE="${LATENCYTIER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/latencytier}"
BIN_DIR="$CACHE/k8s/$K8S_VERSION"

if [[ "${1:-}" == "--print-dir" ]]; then echo "$BIN_DIR"; exit 0; fi

want=(etcd kube-apiserver kubectl)
if [[ "${1:-}" == "all" ]]; then
  want+=(kube-controller-manager kube-scheduler kubelet)
fi

missing=()
for b in "${want[@]}"; do [[ -x "$BIN_DIR/$b" ]] || missing+=("$b"); done
if [[ ${#missing[@]} -eq 0 ]]; then echo "$BIN_DIR"; exit 0; fi

mkdir -p "$BIN_DIR"
log() { echo "k8s-binaries: $*" >&2; }

build_etcd() {
  local src="$CACHE/k8s/src/etcd-$ETCD_VERSION"
  mkdir -p "$src"
  cat >"$src/main.go" <<'GO'
// Command etcd is etcd's own server main, built from the module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  if [[ ! -f "$src/go.mod" ]]; then
    (cd "$src" && go mod init latencytier.local/etcd >/dev/null 2>&1 &&
      go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2 && go mod tidy >&2)
  fi
  log "building etcd $ETCD_VERSION"
  (cd "$src" && CGO_ENABLED=0 go build -trimpath -o "$BIN_DIR/etcd.tmp" . && mv "$BIN_DIR/etcd.tmp" "$BIN_DIR/etcd")
}

build_k8s() {
  local src="$CACHE/k8s/src/kubernetes-$K8S_VERSION"
  mkdir -p "$src"
  if [[ ! -f "$src/.ready" ]]; then
    log "preparing throwaway module for k8s.io/kubernetes $K8S_VERSION"
    rm -f "$src/go.mod" "$src/go.sum"
    (cd "$src" && go mod init latencytier.local/kubernetes >/dev/null 2>&1)
    (cd "$src" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" >/dev/null)
    local kmod
    kmod="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$K8S_VERSION.mod"
    {
      echo "require k8s.io/kubernetes $K8S_VERSION"
      echo "replace ("
      sed -n '/^replace (/,/^)/p' "$kmod" | grep '=> ./staging/src/' |
        awk -v v="$API_VERSION" '{print "\t" $1 " => " $1 " " v}'
      echo ")"
    } >>"$src/go.mod"
    cat >"$src/tools.go" <<'GO'
//go:build tools

// Package tools pins the Kubernetes commands this module builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
    (cd "$src" && go mod tidy -e >&2)
    touch "$src/.ready"
  fi
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  local pkg=k8s.io/component-base/version
  local ldflags="-s -w -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  for b in "$@"; do
    log "building $b $K8S_VERSION (a cold kube-apiserver build takes ~8 min on 2 cores)"
    (cd "$src" && CGO_ENABLED=0 go build -tags tools -trimpath -ldflags "$ldflags" -o "$BIN_DIR/$b.tmp" "k8s.io/kubernetes/cmd/$b" &&
      mv "$BIN_DIR/$b.tmp" "$BIN_DIR/$b")
  done
}

k8s=()
for b in "${missing[@]}"; do
  case "$b" in
    etcd) build_etcd ;;
    *) k8s+=("$b") ;;
  esac
done
[[ ${#k8s[@]} -gt 0 ]] && build_k8s "${k8s[@]}"
echo "$BIN_DIR"
