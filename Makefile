# make run   serves the hook on 127.0.0.1:8080 (no cluster needed)
# make up    starts the operator on a local control plane on 127.0.0.1, in
#            the background (fake Nodes: no container runs); make down stops it
# make test  runs every test: unit, HTTP, generated files, the integration
#            suite against a real kube-apiserver, real memcached running the
#            Pods the hook answers, and the end-to-end suite behind a real
#            Metacontroller, building what they need once into .cache/

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go
CACHE := $(CURDIR)/.cache
BIN := $(CACHE)/bin
CRD := manifests/base/crd/cache.example.com_memcacheds.yaml
ARGS ?=
# The race detector needs cgo, so a C compiler; without one, tests run
# without it rather than not at all.
RACE := $(shell [ "$$($(GO) env CGO_ENABLED)" = 1 ] && echo -race)
BENCH_COUNT ?= 5

include test/tools/Makefile.inc
# controller-gen is built in test/tools/ext, the module helm and CoreDNS
# share (external.mk).
CONTROLLER_GEN_VERSION := $(call tools_ext_version,sigs.k8s.io/controller-tools)
CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
include test/tools/memcached-lua.mk
include test/tools/coredns.mk
include test/tools/promtool.mk

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

# What the binaries say for --version: the nearest tag (or the commit) and
# the commit, "-dirty" when the tree has changes.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
IMAGE ?= memcached-hook:$(VERSION)

.PHONY: run
run: ## serve the hook on 127.0.0.1:8080 (set ARGS="--listen-address=127.0.0.1:9090 ..." for flags)
	$(GO) run -ldflags '$(LDFLAGS)' ./cmd/memcached-hook --listen-address=127.0.0.1:8080 --log-format=text $(ARGS)

.PHONY: build
build: ## build bin/memcached-hook and bin/memcached-agent
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o bin/memcached-hook ./cmd/memcached-hook
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o bin/memcached-agent ./cmd/memcached-agent

.PHONY: image
image: ## build the image (the hook and the agent) with docker (IMAGE=REGISTRY/memcached-hook:TAG)
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMAGE) .

.PHONY: test
test: ## run every test
	GOGC=$(TOOLS_GOGC) $(MAKE) --no-print-directory -j$(TOOLS_JOBS) --output-sync=target vet verify-generate test-tools
	@rm -f $(TEST_BENCHMARK_LINES)
	@echo "go test -shuffle=$(SHUFFLE): to run the tests in this order again, make test SHUFFLE=$(SHUFFLE)"
	@status=0; $(TEST_TOOLS_ENV) $(E2E_TOOLS_ENV) BENCHMARK_LINES=$(abspath $(TEST_BENCHMARK_LINES)) \
	  $(GO) test $(RACE) -p $(TEST_PACKAGES) -count=1 -shuffle=$(SHUFFLE) $(LONG_SUITES) ./... || status=$$?; \
	if [ $$status -ne 0 ]; then echo; echo "go test failed with -shuffle=$(SHUFFLE): make test SHUFFLE=$(SHUFFLE) runs the same order"; fi; \
	if [ -s $(TEST_BENCHMARK_LINES) ]; then \
	  echo; echo "What the tests measured (figures, not assertions; also in $(TEST_BENCHMARK_LINES)):"; \
	  sort -s -k1,1 $(TEST_BENCHMARK_LINES); \
	fi; \
	exit $$status
	GOGC=$(TOOLS_GOGC) $(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT)

# make test-env prints the environment make test runs go test with (the
# tools' paths), for running one package by hand the way make test does:
#   env $$(make -s test-env) go test -race -count=1 ./test/handoff
.PHONY: test-env
test-env: ## print the environment make test gives go test: env $(make -s test-env) go test ./PKG
	@echo $(TEST_TOOLS_ENV) $(E2E_TOOLS_ENV)

# SHUFFLE is the seed of go test -shuffle: each package runs its tests in
# an order drawn from it, so a test that passes only after another shows on
# some run rather than on a new machine first. make test prints it before
# the tests and again on failure; make test SHUFFLE=SEED (or go test
# -shuffle=SEED ./PKG) replays that order. Drawn once per make run.
ifeq ($(origin SHUFFLE),undefined)
SHUFFLE := $(shell date +%s%N | cut -c1-13)
endif

# TEST_BENCHMARK_LINES collects the benchmark lines the tests print
# (testutil.Benchmark): go test shows a passing package's output only with
# -v, so make test prints them from here once the tests end.
TEST_BENCHMARK_LINES := $(CACHE)/test-benchmarks.txt

# TOOLS_JOBS is how many programs make test builds at once (and vets and
# checks the generated files beside them), so that a download, a link (one
# core) or a configure script leaves no core idle. Measured from empty
# caches, it changed little: one go build alone kept both of CI's cores
# busy nearly all the time (under 1 % idle either way).
TOOLS_JOBS ?= 2

# TOOLS_GOGC is the Go compiler's GOGC while make test builds the tools
# and the packages vet compiles for go test, and while it fuzzes (the tests
# themselves run with Go's default): a cold make test is compiling for
# two thirds of its time, and a compiler that collects garbage less often took a fifth
# less CPU (kwok built with empty caches: 226 s at 100, 171 s at 400, for
# 8 % more memory at its peak, 1.1 GB). TOOLS_GOGC=100 on a machine short
# of memory.
TOOLS_GOGC ?= 400

# LONG_SUITES are the test packages that run longest, named first so that
# go test starts them first rather than after the short ones, whose end
# would leave them running alone. With the tools built the tests leave a
# quarter of two cores idle; from empty caches they are CPU-bound and the
# order changes little.
LONG_SUITES := ./test/handoff ./test/memcached ./test/e2e ./test/integration

# TEST_PACKAGES is how many test packages run at once: the long suites
# (test/handoff, test/e2e, test/memcached, test/integration) wait on
# processes more than they compute, and two at a time (GOMAXPROCS on CI's
# two cores, go test's default) left the cores idle for minutes. Four at
# once loaded two cores enough to starve the hand-off measurements.
TEST_PACKAGES ?= 3

# The fuzz targets, as package:target. go test fuzzes one target per run.
FUZZ_TARGETS := ./sync/memcached:FuzzSync ./cmd/memcached-hook:FuzzHandler \
	./sync/metacontroller:FuzzScan ./sync/metacontroller:FuzzQuickStatus \
	./cmd/memcached-agent/internal/protocol:FuzzTranscript ./cmd/memcached-agent/internal/follow:FuzzDecode \
	./cmd/memcached-agent/internal/handoff:FuzzAnswers \
	./cmd/memcached-agent/internal/handoff:FuzzWatchLine \
	./cmd/memcached-agent/internal/confirm:FuzzWatchLine
# make test fuzzes each target this many inputs (about 3 to 8 s each on
# CI's two cores); make fuzz, FUZZTIME long (FUZZTIME=1h). make test counts
# inputs rather than seconds: with a duration, Go 1.26's fuzz coordinator
# can report its own deadline as the target failing, "context deadline
# exceeded" with no failing input, when a loaded machine keeps a worker
# busy as the time runs out (go.dev/issue/75804, fixed in Go 1.27). It
# failed make test that way once, on FuzzTranscript, with 118,025 inputs
# run and none failing.
FUZZTIME_SHORT ?= 20000x
FUZZTIME ?= 10m

.PHONY: e2e
e2e: test-tools ## only the end-to-end suite: a real control plane, kwok Nodes, Metacontroller and the hook (test/e2e)
	$(TEST_TOOLS_ENV) $(E2E_TOOLS_ENV) $(GO) test $(RACE) -count=1 -v ./test/e2e

# make e2e-repeat runs the end-to-end suite N times in a row, each run on a
# control plane of its own, and says how many passed: a test that fails now
# and then is a bug, and this is how to see one. Each run's output is kept
# in .cache/e2e-repeat/RUN.log.
N ?= 20

.PHONY: e2e-repeat
e2e-repeat: test-tools ## the end-to-end suite N times in a row (N=20), counting the runs that pass
	@mkdir -p $(CACHE)/e2e-repeat; pass=0; fail=0; \
	for i in $$(seq 1 $(N)); do \
	  start=$$(date +%s); \
	  if $(TEST_TOOLS_ENV) $(E2E_TOOLS_ENV) $(GO) test $(RACE) -count=1 -v ./test/e2e > $(CACHE)/e2e-repeat/$$i.log 2>&1; then \
	    pass=$$((pass+1)); echo "e2e run $$i of $(N): ok ($$(( $$(date +%s) - start )) s)"; \
	  else \
	    fail=$$((fail+1)); echo "e2e run $$i of $(N): FAIL ($$(( $$(date +%s) - start )) s): $(CACHE)/e2e-repeat/$$i.log"; \
	    grep -E '^\s*--- FAIL|_test.go:[0-9]+:' $(CACHE)/e2e-repeat/$$i.log | head -20; \
	  fi; \
	done; \
	echo "e2e-repeat: $$pass of $(N) runs passed"; test $$fail -eq 0

# make flake-hunt runs every test package but the long suites
# FLAKE_COUNT times over (-race, one -shuffle seed, as make test runs them)
# while a long suite (FLAKE_LOAD) runs again and again beside them, each of
# its runs counted too, as make test's other packages load CI's two cores:
# a test that passes alone and fails beside other work shows here first.
# Run it after changing a test (test/README.md says how long it takes);
# the logs are in .cache/flake-hunt/.
FLAKE_COUNT ?= 10
FLAKE_LOAD ?= ./test/handoff
FLAKE_LONG := $(LONG_SUITES) ./test/proxy ./test/up
MODULE = $(shell $(GO) list -m)

.PHONY: flake-hunt
flake-hunt: test-tools ## every package but the long suites FLAKE_COUNT=10 times (-race, -shuffle) beside a long suite run again and again (FLAKE_LOAD)
	@$(TEST_TOOLS_ENV) $(E2E_TOOLS_ENV) test/flake-hunt.sh $(GO) "$(RACE)" $(FLAKE_COUNT) $(SHUFFLE) $(FLAKE_LOAD) $(CACHE)/flake-hunt \
	  $(patsubst ./%,$(MODULE)/%,$(FLAKE_LONG))

# ---- make up / make down: the local playground (test/playground) -----------
# make up builds what it needs (the tools make test builds, the command
# below, and the hook from this checkout), starts etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok with three fake Nodes,
# Metacontroller and the hook on 127.0.0.1 in the background, installs
# manifests/ as the end-to-end suite does (the same code), and prints as its
# last line the one to copy: export KUBECONFIG=... PATH=...:$PATH. Already
# up, it prints that line and changes nothing. make down stops all of it,
# waits until no process is left and no port listens, and removes UP_DIR.

UP_DIR ?= $(CACHE)/up
UP_DIR_ABS = $(abspath $(UP_DIR))
UP_TOOLS := $(TOOLS_BINS) $(KUBE_CONTROLLER_MANAGER_BIN) $(KUBE_SCHEDULER_BIN) $(KWOK_BIN)

.PHONY: up
up: $(UP_TOOLS) metacontroller ## run the operator locally in the background: control plane, fake Nodes (no container runs), Metacontroller, the hook, on 127.0.0.1 (UP_DIR=.cache/up)
	@mkdir -p $(UP_DIR_ABS)
	@$(GO) build -o $(UP_DIR_ABS)/playground ./test/playground/cmd/playground
	@$(TEST_TOOLS_ENV) $(E2E_TOOLS_ENV) $(UP_DIR_ABS)/playground up --dir=$(UP_DIR_ABS) --root=$(CURDIR)

.PHONY: down
down: ## stop everything make up started, wait until nothing listens, remove UP_DIR
	@$(GO) run ./test/playground/cmd/playground down --dir=$(UP_DIR_ABS)

.PHONY: fuzz
fuzz: ## fuzz request decoding, sync, the HTTP handler, the agent's protocol and file decoding (FUZZTIME=10m each)
	@for t in $(FUZZ_TARGETS); do \
	  echo "fuzzing $${t#*:} in $${t%%:*} for $(FUZZTIME)"; \
	  $(GO) test -run='^$$' -fuzz="^$${t#*:}$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=100x "$${t%%:*}" || exit 1; \
	done

.PHONY: test-unit
test-unit: ## the tests that need no API server
	$(GO) test $(RACE) -count=1 ./...

.PHONY: bench
bench: build memcached ## benchmarks and a loopback load run: the ratios BENCHMARKS.md records (BENCH_COUNT=5)
	@mkdir -p $(CACHE)/bench
	$(GO) test ./sync/memcached -run '^$$' -bench '^Benchmark(Sync|Floor|SyncParts|DecodeChoices)$$' -benchmem -count $(BENCH_COUNT) | tee $(CACHE)/bench/bench.txt
	@echo; $(GO) run ./test/load/benchreport < $(CACHE)/bench/bench.txt
	@MEMCACHED_BENCH_REQUESTS=$(CACHE)/bench $(GO) test ./sync/memcached -run '^TestWriteBenchRequests$$' -count 1 >/dev/null
	@echo; $(GO) run ./test/load -hook bin/memcached-hook -requests $(CACHE)/bench
	@echo; $(TEST_TOOLS_ENV) $(E2E_TOOLS_ENV) $(GO) test -p 1 $(BENCH_MEASURED) -run '^$$' -bench '^Benchmark(HandoffCopy|ProxyCost)$$' -benchtime 1x -count 1

# BENCH_MEASURED are the packages whose benchmarks only measure real
# processes (the agent's copy rates, the proxy's cost), once each and one
# package at a time, on memcached from .cache: figures that were tests
# asserting nothing, so make test no longer spends its time on them.
BENCH_MEASURED := ./cmd/memcached-agent/internal/handoff ./test/proxy

# vet and verify-generate build with $(RACE), as go test does, so that the
# packages they compile are the ones go test then finds in the build cache.
.PHONY: vet
vet:
	$(GO) vet $(RACE) ./...
	GOWORK=off $(GO) -C test/clients/go vet ./...
	@test -z "$$(gofmt -l cmd sync test)" || { echo "gofmt needed on:"; gofmt -l cmd sync test; exit 1; }

$(CONTROLLER_GEN): $(TOOLS_EXT_MODS)
	@mkdir -p $(BIN)
	$(tools_ext_build) -ldflags '-s -w -X sigs.k8s.io/controller-tools/pkg/version.version=$(CONTROLLER_GEN_VERSION)' -o $(abspath $@) sigs.k8s.io/controller-tools/cmd/controller-gen
	@touch $@

API := ./sync/api/...
DEEPCOPY := sync/api/v1alpha1/zz_generated.deepcopy.go
API_README := sync/api/v1alpha1/README.md

.PHONY: generate
generate: $(CONTROLLER_GEN) ## regenerate the CRD, deep copies and API reference from sync/api (controller-gen, cmd/apigen, cmd/apiref), then the Helm chart
	$(CONTROLLER_GEN) object paths=$(API)
	$(CONTROLLER_GEN) crd:crdVersions=v1 paths=$(API) output:crd:artifacts:config=manifests/base/crd
	$(GO) run ./cmd/apigen --crd $(CRD)
	$(GO) run ./cmd/apiref --crd $(CRD) --readme $(API_README)
	@# The chart carries the CRD: regenerate it too.
	$(MAKE) --no-print-directory chart

.PHONY: verify-generate
verify-generate: $(CONTROLLER_GEN) ## fail if the committed CRD, deep copies or API reference are not what the API generates
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	$(CONTROLLER_GEN) object paths=$(API) output:object:stdout > $$tmp/deepcopy.go; \
	$(CONTROLLER_GEN) crd:crdVersions=v1 paths=$(API) output:crd:artifacts:config=$$tmp; \
	$(GO) run $(RACE) ./cmd/apigen --crd $$tmp/$(notdir $(CRD)); \
	cp $(API_README) $$tmp/README.md; \
	$(GO) run $(RACE) ./cmd/apiref --crd $$tmp/$(notdir $(CRD)) --readme $$tmp/README.md; \
	diff -u $(DEEPCOPY) $$tmp/deepcopy.go && diff -u $(CRD) $$tmp/$(notdir $(CRD)) && diff -u $(API_README) $$tmp/README.md || { echo "generated files are stale: run make generate"; exit 1; }

# ---- the Helm chart ------------------------------------------------------------
# manifests/helm/memcached-operator is generated from the kustomize manifests
# by cmd/chartgen; make test fails when it is stale (cmd/chartgen) or renders
# other objects than kubectl kustomize (test/chart).
CHART := manifests/helm/memcached-operator

.PHONY: chart
chart: $(KUBECTL_BIN) ## regenerate the Helm chart in manifests/helm from manifests/ (cmd/chartgen)
	$(GO) run ./cmd/chartgen --kubectl $(abspath $(KUBECTL_BIN)) --manifests manifests --chart $(CHART)

.PHONY: clean
clean: ## remove built binaries (keeps the cached API server build)
	rm -rf bin
