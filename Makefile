# latencytier — see README.md. Targets run as root on the project's VMs.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMG ?= latencytier:$(VERSION)
BIN := bin/latencytier
GO_LDFLAGS := -s -w -X main.version=$(VERSION)
CONTROLLER_GEN := go tool controller-gen

.PHONY: all
all: build

##@ Development

.PHONY: deps
deps: ## Install the Debian packages the tests and demo need (hack/apt-packages.txt).
	hack/install-deps.sh

.PHONY: envtest
envtest: ## Build (once, cached outside the repo) the etcd + kube-apiserver envtest uses.
	hack/k8s-binaries.sh >/dev/null

.PHONY: manifests
manifests: ## Generate CRDs and RBAC from the Go markers.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=latencytier-manager paths=./controllers/... output:rbac:artifacts:config=config/rbac
	cp config/crd/bases/*.yaml charts/latencytier/crds/

.PHONY: generate
generate: ## Generate deepcopy functions.
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: generate-bpf
generate-bpf: ## Regenerate vmlinux.h and the bpf2go objects (needs clang, bpftool).
	hack/generate-bpf.sh

.PHONY: verify-gen
verify-gen: ## Fail if generated files (CRDs, RBAC, deepcopy, BPF) differ from their sources.
	hack/verify-gen.sh

.PHONY: fmt
fmt:
	gofmt -w $$(git ls-files '*.go')

.PHONY: lint
lint: ## gofmt + go vet + staticcheck (a Go tool pinned in go.mod).
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	go tool staticcheck ./...

.PHONY: test
test: deps envtest ## Unit, real-kernel (-tags privileged) and envtest tests (as root).
	@test "$$(id -u)" = 0 || { echo "make test runs the privileged real-kernel tests: run it as root" >&2; exit 1; }
	KUBEBUILDER_ASSETS="$$(hack/k8s-binaries.sh --print-dir)" LATENCYTIER_REQUIRE_PROMTOOL=1 go test -tags privileged -count=1 -timeout 30m ./...

.PHONY: test-kernels
test-kernels: deps ## The agent's kernel tests in emulated VMs: Debian 6.1 (cgroup v2, v1), 6.12 and 7.3 (sched_ext built in), real systemd; 6.12 booted by real GRUB for the boot parameters.
	hack/install-deps.sh hack/vm/apt-packages.txt
	hack/vm/test-kernels.sh

.PHONY: test-cluster
test-cluster: deps ## Multi-node end-to-end: a control plane in a netns and kubelets in Debian 6.1 and 6.12 VMs (hack/cluster; slow, not in make test or CI: docs/development.md).
	hack/install-deps.sh hack/vm/apt-packages.txt
	hack/cluster/test.sh

.PHONY: test-node-stack
test-node-stack: deps ## CI's cgroup v2 node row: one Debian 6.12 guest (systemd, containerd 2 with NRI, systemd cgroup driver) joined to a control plane in a netns; tuning asserted on the guest's kernel (hack/cluster/scenario-node-stack.sh).
	hack/install-deps.sh hack/vm/apt-packages.txt
	LATENCYTIER_CLUSTER_STATE=/var/lib/latencytier-node-stack LATENCYTIER_CLUSTER_NETNS=latencytier-node-stack \
	  CLUSTER_NODES=node-6-12 CLUSTER_SCENARIOS=node-stack CLUSTER_CPU_MANAGER=static VM_SMP=4 \
	  timeout --kill-after=60 $${NODE_STACK_TIMEOUT:-1800} hack/cluster/test.sh

.PHONY: test-e2e
test-e2e: build ## End-to-end on a real single-node cluster on this machine.
	hack/e2e.sh

.PHONY: test-holdout
test-holdout: build ## Contention holdout on the local cluster: an idle pinned pod raises nothing for 10 min, a hog beside it raises both (~20 min; not in make test or .ci/run).
	hack/holdout.sh

.PHONY: bench
bench: build ## Reproduce the run-queue incidents (autogroup, CFS throttling, IRQs, idle exit) before and after the agent's fix; writes docs/benchmarks.md.
	hack/bench/run.sh

BENCH_SCALE_NODES ?= 1000,1000,3000,5000
BENCH_SCALE_HEARTBEATS ?= interval,5m,5m,5m
BENCH_SCALE_ARGS ?=

.PHONY: bench-scale
bench-scale: build envtest ## Simulated fleets (real API server, manager, agent loops) at BENCH_SCALE_NODES; writes docs/scale.md.
	go run ./hack/scale -nodes $(BENCH_SCALE_NODES) -heartbeat $(BENCH_SCALE_HEARTBEATS) -manager $(BIN) -assets "$$(hack/k8s-binaries.sh --print-dir)" $(BENCH_SCALE_ARGS)

##@ Build and run

.PHONY: build
build: ## Build the single latencytier binary (static, CGO-free).
	CGO_ENABLED=0 go build -trimpath -ldflags '$(GO_LDFLAGS)' -o $(BIN) .

.PHONY: kubectl-latency
kubectl-latency: ## Build the kubectl plugin (bin/kubectl-latency; put bin/ on PATH for "kubectl latency").
	CGO_ENABLED=0 go build -trimpath -ldflags '$(GO_LDFLAGS)' -o bin/kubectl-latency ./cmd/kubectl-latency

.PHONY: dist-plugin krew
dist-plugin: ## Release archives of kubectl-latency (linux, darwin; amd64, arm64) and the krew manifest with their sha256, in dist/plugin/ (RELEASE_URL: where they will be published, HOMEPAGE: the manifest's homepage; both required).
	VERSION=$(VERSION) krew/dist.sh
krew: dist-plugin ## Alias of dist-plugin: dist/plugin/latency.yaml is the krew manifest.

.PHONY: release
release: ## One release in dist/release/$(VERSION) (VERSION=vX.Y.Z; RELEASE_URL, HOMEPAGE for the krew manifest): the image for linux/amd64 and arm64 as OCI archives and their index, the chart, the plugin archives and krew manifest, an SBOM and SHA256SUMS, checked against each other (docs/release.md).
	VERSION=$(VERSION) hack/release/release.sh

IMAGE_VERSION ?= v0.0.0-dev
.PHONY: image
image: ## The linux/amd64 image as make release builds it, in dist/image (OCI archive and index, IMAGE_VERSION), its binary run from the archive (version, agent --help).
	VERSION=$(IMAGE_VERSION) IMAGE_ONLY=1 ARCHES=amd64 RELEASE_DIR=dist/image hack/release/release.sh

.PHONY: run
run: ## Run the manager against the current kubeconfig.
	go run . manager

.PHONY: demo
demo: build ## Bring up a local cluster, apply a profile, show it working; Ctrl-C reverts and tears down.
	hack/demo.sh

.PHONY: docker-build
docker-build: ## Build the image with a Docker engine (none runs on the CI VMs; make image builds the same image without one).
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

.PHONY: chart
chart: ## Lint the Helm chart; check it renders what config/default does, its values schema, and every rendered object against the 1.37.2 API offline (charts/).
	go tool helm lint --strict charts/latencytier
	go tool helm lint --strict --kube-version 1.37.2 charts/latencytier
	go test -count=1 ./charts/

.PHONY: kube-score
kube-score: ## kube-score (pinned, hack/tools/kube-score) over the rendered chart; every CRITICAL finding justified in docs/kube-score.md.
	hack/kube-score.sh

.PHONY: test-rules
test-rules: ## Check and unit-test the Prometheus alert rules with promtool.
	promtool check rules config/prometheus/latencytier.rules.yaml
	cd config/prometheus && promtool test rules rules.test.yaml

.PHONY: deploy
deploy: ## Install CRDs, RBAC, admission policy and the manager into the current cluster.
	kubectl apply -k config/default

.PHONY: undeploy
undeploy: build ## Revert every node (latencytier uninstall), then remove the operator, CRDs included.
	$(BIN) uninstall --timeout=15m
	kubectl delete -k config/default --ignore-not-found

.PHONY: help
help:
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
