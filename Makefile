# podsync Makefile. Run `make help` for the targets.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
.SUFFIXES:
MAKEFLAGS += --warn-undefined-variables --no-builtin-rules
.DEFAULT_GOAL := all

# Pinned tool versions, installed from the Go module proxy into .tmp/bin.
BUF_VERSION                ?= v1.75.0
PROTOC_GEN_GO_VERSION      ?= v1.36.12
PROTOC_GEN_GO_GRPC_VERSION ?= v1.6.2
# The OpenAPI document of the REST routes (openapi/), from grpc-gateway.
PROTOC_GEN_OPENAPIV2_VERSION ?= v2.34.0
GOLANGCI_LINT_VERSION      ?= v2.15.0
CRICTL_VERSION             ?= v1.37.0
# grpcurl drives podsyncd in test/integration/daemon. v1.9.4, not v1.9.3:
# v1.9.2 and v1.9.3 broke -unix with a bare socket path
# (fullstorydev/grpcurl#496, #546), which the docs and tests use.
GRPCURL_VERSION            ?= v1.9.4

TMP    := $(CURDIR)/.tmp
BIN    := $(TMP)/bin
STAMPS := $(TMP)/stamps
export PATH := $(BIN):$(PATH):/usr/local/go/bin
export GOBIN := $(BIN)

GO          ?= go
GO_TEST     ?= $(GO) test
# Packages with tests that need no runtime (everything but test/integration).
UNIT_PKGS   := ./...
# test/integration/cluster and test/integration/hollow run on a Kubernetes
# control plane whose first build takes 15-30 minutes on 2 cores: make
# test-cluster, after make test.
# test/integration/clients needs the generated clients: make test-clients.
INTEG_PKGS  := $(shell $(GO) list -tags integration ./test/integration/... 2>/dev/null | grep -v -e '/test/integration/cluster$$' -e '/test/integration/hollow$$' -e '/test/integration/clients$$')
CLUSTER_FLAGS ?= -count=1 -timeout 60m
INTEG_FLAGS ?= -count=1 -timeout 20m
# How long each fuzz target runs in `make fuzz`, and how many inputs it
# tries in `make test-unit` (seven targets: about 10 s of fuzzing, 30 s with
# the builds). A count, not a duration: Go 1.26's fuzzing coordinator can
# fail a run at its own deadline (golang/go#75804; see hack/fuzz.sh).
FUZZTIME      ?= 60s
FUZZTIME_UNIT ?= 3000x

BUF           := $(BIN)/buf
GOLANGCI_LINT := $(BIN)/golangci-lint
GRPCURL       := $(BIN)/grpcurl

.PHONY: help
help: ## Describe the targets
	@awk 'BEGIN {FS = ":.*##"; printf "Targets:\n"} /^[a-zA-Z0-9_-]+:.*##/ { printf "  %-18s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

.PHONY: all
all: generate lint check-deps build test-unit ## Generate, lint, check dependencies, build and run unit tests

.PHONY: tools
tools: $(STAMPS)/buf-$(BUF_VERSION) $(STAMPS)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION) $(STAMPS)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION) $(STAMPS)/protoc-gen-openapiv2-$(PROTOC_GEN_OPENAPIV2_VERSION) $(STAMPS)/golangci-lint-$(GOLANGCI_LINT_VERSION) $(STAMPS)/grpcurl-$(GRPCURL_VERSION) ## Install the pinned tools into .tmp/bin

$(STAMPS)/buf-%:
	$(GO) install github.com/bufbuild/buf/cmd/buf@$*
	@mkdir -p $(@D) && touch $@
$(STAMPS)/protoc-gen-go-%:
	$(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$*
	@mkdir -p $(@D) && touch $@
$(STAMPS)/protoc-gen-go-grpc-%:
	$(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$*
	@mkdir -p $(@D) && touch $@
$(STAMPS)/protoc-gen-openapiv2-%:
	$(GO) install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-openapiv2@$*
	@mkdir -p $(@D) && touch $@
$(STAMPS)/golangci-lint-%:
	$(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$*
	@mkdir -p $(@D) && touch $@
$(STAMPS)/crictl-%:
	$(GO) install sigs.k8s.io/cri-tools/cmd/crictl@$*
	@mkdir -p $(@D) && touch $@
$(STAMPS)/grpcurl-%:
	$(GO) install github.com/fullstorydev/grpcurl/cmd/grpcurl@$*
	@mkdir -p $(@D) && touch $@

.PHONY: generate
generate: $(STAMPS)/buf-$(BUF_VERSION) $(STAMPS)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION) $(STAMPS)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION) $(STAMPS)/protoc-gen-openapiv2-$(PROTOC_GEN_OPENAPIV2_VERSION) ## Regenerate api/ and openapi/ from proto/
	$(BUF) format -w
	$(BUF) generate

.PHONY: check-generate
check-generate: generate ## Fail when generated code, the OpenAPI document or formatting differs from what is committed
	@if [ -n "$$(git status --porcelain -- api proto openapi)" ]; then \
		git status --porcelain -- api proto openapi; git diff --stat -- api proto openapi; \
		echo "check-generate: regenerated code differs: run 'make generate' and commit" >&2; exit 1; fi

.PHONY: lint
lint: $(STAMPS)/buf-$(BUF_VERSION) $(STAMPS)/golangci-lint-$(GOLANGCI_LINT_VERSION) ## gofmt, go vet, golangci-lint, buf lint/format/breaking
	@out="$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go' | grep -v '^api/'))"; \
		if [ -n "$$out" ]; then echo "gofmt would change:" >&2; echo "$$out" >&2; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags integration ./test/...
	$(GO) vet -tags robustness ./test/robustness
	$(GOLANGCI_LINT) run ./...
	$(BUF) lint
	$(BUF) format -d --exit-code
	@$(MAKE) --no-print-directory breaking

.PHONY: lint-fix
lint-fix: $(STAMPS)/buf-$(BUF_VERSION) $(STAMPS)/golangci-lint-$(GOLANGCI_LINT_VERSION) ## Fix what the linters can fix
	gofmt -w $$(git ls-files --cached --others --exclude-standard '*.go' | grep -v '^api/')
	$(GOLANGCI_LINT) run --fix ./...
	$(BUF) format -w

.PHONY: breaking
breaking: $(STAMPS)/buf-$(BUF_VERSION) ## buf breaking against the latest v* tag, once one exists
	@tag="$$(git describe --tags --abbrev=0 --match 'v*' 2>/dev/null || true)"; \
	if [ -z "$$tag" ]; then echo "breaking: no v* tag yet, nothing to compare against"; \
	else echo "breaking: against $$tag"; $(BUF) breaking --against ".git#tag=$$tag"; fi

.PHONY: check-deps
check-deps: ## Enforce the package boundaries of STYLE.md
	hack/check-deps.sh

.PHONY: build
build: ## Build every package and command
	$(GO) build ./...

.PHONY: test
test: ## All tests: unit (-race), then integration on containerd 2.x, the robustness history (2.x), integration on 1.6
	@start=$$(date +%s); $(MAKE) --no-print-directory test-unit; \
		echo "stage unit: $$(( $$(date +%s) - start ))s"
	@start=$$(date +%s); PODSYNC_CONTAINERD=2 $(MAKE) --no-print-directory test-integration; \
		echo "stage integration (containerd 2.x): $$(( $$(date +%s) - start ))s"
	@start=$$(date +%s); PODSYNC_CONTAINERD=2 $(MAKE) --no-print-directory test-robustness; \
		echo "stage robustness (containerd 2.x): $$(( $$(date +%s) - start ))s"
	@start=$$(date +%s); PODSYNC_CONTAINERD=1.6 $(MAKE) --no-print-directory test-integration; \
		echo "stage integration (containerd 1.6): $$(( $$(date +%s) - start ))s"

.PHONY: test-unit
test-unit: ## Unit tests with -race (no runtime needed), then each fuzz target for FUZZTIME_UNIT
	@mkdir -p $(TMP)/logs
	$(GO_TEST) -race -count=1 $(UNIT_PKGS) 2>&1 | tee $(TMP)/logs/test-unit.log \
		|| { hack/test-summary.sh $(TMP)/logs/test-unit.log; exit 1; }
	FUZZTIME=$(FUZZTIME_UNIT) GO=$(GO) hack/fuzz.sh

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 60s); FUZZ_TARGETS=regexp selects
	FUZZTIME=$(FUZZTIME) GO=$(GO) hack/fuzz.sh

.PHONY: test-short
test-short: ## The quick loop: unit tests in -short mode
	$(GO_TEST) -short $(UNIT_PKGS)

.PHONY: test-integration
test-integration: $(STAMPS)/grpcurl-$(GRPCURL_VERSION) ## Integration tests against a private containerd (PODSYNC_CONTAINERD=2|1.6)
	@mkdir -p $(TMP)/logs
	log=$(TMP)/logs/test-integration-$${PODSYNC_CONTAINERD:-2}.log; \
	PODSYNC_GRPCURL=$(GRPCURL) $(GO_TEST) -race -tags integration $(INTEG_FLAGS) $(INTEG_PKGS) 2>&1 | tee "$$log" \
		|| { hack/test-summary.sh "$$log"; exit 1; }

# How long test/robustness runs its faulted load (podsyncd killed every
# 30 s or so, connections cut, commits delayed); CI's is 2m15s.
ROBUSTNESS_DURATION ?= 2m15s

.PHONY: test-robustness
test-robustness: ## The checked history under faults (test/robustness, porcupine) on a private containerd 2.x
	@mkdir -p $(TMP)/logs
	log=$(TMP)/logs/test-robustness.log; \
	PODSYNC_ROBUSTNESS_DURATION=$(ROBUSTNESS_DURATION) PODSYNC_CONTAINERD=$${PODSYNC_CONTAINERD:-2} \
	$(GO_TEST) -race -tags robustness -count=1 -timeout 20m -v ./test/robustness 2>&1 | tee "$$log" \
		|| { hack/test-summary.sh "$$log"; exit 1; }

.PHONY: clients
clients: $(STAMPS)/buf-$(BUF_VERSION) ## Install the clients' toolchains (Debian, npm), generate clients/*/gen and build the TypeScript client
	hack/clients/install.sh
	$(BUF) generate --template buf.gen.clients.yaml
	cd clients/typescript && node_modules/.bin/tsc -p .

.PHONY: test-clients
test-clients: clients ## The Python and TypeScript clients against podsyncd on a private containerd 2.x (a restart of podsyncd included)
	@mkdir -p $(TMP)/logs
	log=$(TMP)/logs/test-clients.log; \
	PODSYNC_CONTAINERD=$${PODSYNC_CONTAINERD:-2} $(GO_TEST) -race -tags integration -count=1 -timeout 10m ./test/integration/clients 2>&1 | tee "$$log" \
		|| { hack/test-summary.sh "$$log"; exit 1; }

.PHONY: test-cluster
test-cluster: ## podsync-vk on a real control plane, with podsync nodes and with hollow ones (builds the Kubernetes binaries and metrics-server into .tmp/kube once, about 25 min)
	@mkdir -p $(TMP)/logs
	hack/kube/build.sh etcd kube-apiserver kube-scheduler kube-controller-manager kubectl metrics-server
	log=$(TMP)/logs/test-cluster-$${PODSYNC_CONTAINERD:-2}.log; \
	$(GO_TEST) -race -tags integration -p 1 $(CLUSTER_FLAGS) ./test/integration/cluster ./test/integration/hollow 2>&1 | tee "$$log" \
		|| { hack/test-summary.sh "$$log"; exit 1; }

# Arguments of make test-conformance, e.g. CONFORMANCE_ARGS='--focus Probing' or
# CONFORMANCE_ARGS=--subset=ci (the bounded subset CI runs).
CONFORMANCE_ARGS ?=

.PHONY: test-conformance
test-conformance: ## Kubernetes' node-conformance e2e tests on podsync nodes (root; builds e2e.test and its images into .tmp once); results in .tmp/conformance
	$(GO) build -o $(BIN)/podsync-conformance ./hack/conformance
	$(BIN)/podsync-conformance $(CONFORMANCE_ARGS)

# Flavours and timeout of make soak.
SOAK_FLAVOURS ?= 2 1.6
SOAK_TIMEOUT  ?= 90m

.PHONY: soak
soak: ## Long fault runs: podsyncd killed at random (PODSYNC_SOAK=1) on containerd 2.x and 1.6; PODSYNC_FAULTS_SEED=N replays
	@for f in $(SOAK_FLAVOURS); do \
		start=$$(date +%s); \
		PODSYNC_SOAK=1 PODSYNC_CONTAINERD=$$f $(GO_TEST) -race -tags integration -count=1 -timeout $(SOAK_TIMEOUT) \
			-run 'TestRandomKills' -v ./test/integration/faults/; \
		echo "soak (containerd $$f): $$(( $$(date +%s) - start ))s"; \
	done

# Flags of hack/bench, e.g. BENCH_FLAGS=-quick or BENCH_FLAGS='-profile .tmp/bench/profiles'.
BENCH_FLAGS ?=
# The kubelet the bench runs beside podsync; when empty the bench builds v1.37.2 with
# hack/kube/build.sh kubelet (kept in .tmp/kube once built), and a failed build fails it, with the reason in the report.
BENCH_KUBELET ?=

.PHONY: bench
bench: ## Benchmarks on a private containerd, the kubelet beside podsync (root, about 2 h on 2 cores); writes BENCHMARKS.md (BENCH_FLAGS=-quick: a few min)
	$(GO) build -o $(TMP)/bench/podsyncd ./cmd/podsyncd
	$(GO) build -o $(TMP)/bench/bench ./hack/bench
	$(TMP)/bench/bench -podsyncd $(TMP)/bench/podsyncd $(if $(BENCH_KUBELET),-kubelet $(BENCH_KUBELET)) $(BENCH_FLAGS)

# Flags of hack/bench -scale, e.g. BENCH_SCALE_FLAGS='-scale-nodes 5 -scale-pods 10' or '-scale-vks 4'.
BENCH_SCALE_FLAGS ?=
# The kwok the scale benchmark compares with, built from the Go module proxy into .tmp/kwok
# (a kwok that cannot be built fails the benchmark, with the reason in the report).
KWOK_VERSION ?= v0.8.0

.PHONY: bench-scale
bench-scale: ## Hollow podsync nodes behind podsync-vk against kwok on a real control plane, 25/50/100 nodes × 30 pods (no root); writes BENCHMARKS-scale.md
	hack/kube/build.sh etcd kube-apiserver kube-scheduler kube-controller-manager kubectl
	$(GO) build -o $(TMP)/bench/bench ./hack/bench
	$(TMP)/bench/bench -scale -kwok-version $(KWOK_VERSION) $(BENCH_SCALE_FLAGS)

# Flags of hack/bench -cluster, e.g. BENCH_CLUSTER_FLAGS='-cluster-rounds 7' or '-cluster-n 10 -cluster-rounds 1'.
BENCH_CLUSTER_FLAGS ?=

.PHONY: bench-cluster
bench-cluster: ## A podsync node and a kubelet node in one cluster, Deployments 0 → 30 and 100, 3 rounds (root, ~30 min); writes BENCHMARKS-cluster.md
	hack/kube/build.sh etcd kube-apiserver kube-scheduler kube-controller-manager kubectl
	$(GO) build -o $(TMP)/bench/bench ./hack/bench
	$(TMP)/bench/bench -cluster $(if $(BENCH_KUBELET),-kubelet $(BENCH_KUBELET)) $(BENCH_CLUSTER_FLAGS)

# Arguments of `make run`, such as RUN_ARGS=--once.
RUN_ARGS ?=

.PHONY: run
run: $(STAMPS)/grpcurl-$(GRPCURL_VERSION) $(STAMPS)/crictl-$(CRICTL_VERSION) ## Build, start a private containerd and podsyncd, run examples/; up until ^C (RUN_ARGS=--once: clean up and exit)
	@# grpcurl and crictl: the hints it prints use them, from .tmp/bin.
	@# Built, not go run: go run exits 1 after a ^C however its child ends.
	$(GO) build -o $(BIN)/podsync-run ./hack/run
	$(BIN)/podsync-run $(RUN_ARGS)

.PHONY: run-cluster
run-cluster: ## A control plane, two podsync nodes and podsync-vk; prints KUBECONFIG; up until ^C (RUN_ARGS=--once: check and exit)
	$(GO) build -o $(BIN)/podsync-run-cluster ./hack/run-cluster
	$(BIN)/podsync-run-cluster $(RUN_ARGS)

.PHONY: runtime-up
runtime-up: ## Start a private containerd, registry and images; print the CRI socket and a crictl line
	$(GO) run ./hack/localcri up

.PHONY: runtime-down
runtime-down: ## Stop what runtime-up started
	$(GO) run ./hack/localcri down

.PHONY: clean
clean: ## Remove build outputs and the tools dir (keeps the Go caches)
	rm -rf $(TMP)
