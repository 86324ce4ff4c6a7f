# test/tools/external.mk builds the programs the end-to-end tests run that do
# not belong in the tools module's dependency graph: kwok (fake Nodes),
# Metacontroller and memcached (from source archives in shared/),
# memcached_exporter, and helm (for the chart's test). Makefile.inc includes
# it; paths are relative to the repository root.
#
# Every binary's file name carries its version, so a version bump builds a
# new file and the old one is simply no longer used. A binary is rebuilt when
# its version, its source archive or this file changes.
#
# Metacontroller and memcached come from archives outside the repository
# (METACONTROLLER_ARCHIVE, MEMCACHED_ARCHIVE). When one is missing, its target
# prints what is missing and succeeds without building anything, so the tests
# that need the program can skip (outside CI) naming it.

TOOLS_EXT_DEPS  := $(TOOLS_DIR)/external.mk
TOOLS_SRC_DIR   ?= .cache/src
TOOLS_NPROC     := $(shell nproc 2>/dev/null || echo 2)

# ---- the ext module: kwok, memcached_exporter, helm, controller-gen, CoreDNS,
# and Metacontroller's workspace
# Five programs of the Go module proxy built in one module of their own,
# test/tools/ext (go.mod and go.sum committed), so that they share one
# build of what they all import (client-go and the rest of Kubernetes'
# libraries, Prometheus', gRPC): built apart, each compiled its own copy
# at its own versions, minutes of a cold make test. The module requires
# each at the version named below (go get -tool, and CoreDNS's packages
# for ext/coredns); the versions are read from its go.mod, and the graph
# is Go's minimal version selection over the five (Kubernetes' libraries
# at helm's v0.37.1). Metacontroller, from its archive, joins them in a Go
# workspace (below). The file names carry the versions; a change to the
# module's go.mod or go.sum rebuilds them.

TOOLS_EXT_MOD  := $(TOOLS_DIR)/ext
TOOLS_EXT_MODS := $(TOOLS_EXT_MOD)/go.mod $(TOOLS_EXT_MOD)/go.sum
# tools_ext_version is the version $(1) has in the ext module's go.mod.
tools_ext_version = $(shell awk '$$1 == "$(1)" { print $$2 } $$1 == "require" && $$2 == "$(1)" { print $$3 }' $(TOOLS_EXT_MOD)/go.mod)
# tools_ext_build is go build in the ext module, for make's own binaries.
tools_ext_build = CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=readonly $(TOOLS_GO) -C $(TOOLS_EXT_MOD) build $(TOOLS_GOFLAGS)
# tools_ext_work writes $(1), a Go workspace of the module in $(2) and the
# ext module, for a program built outside the ext module that should share
# its build (Metacontroller, memclient): go build with GOWORK=$(1).
tools_ext_work = mkdir -p $(dir $(1)) && printf 'go %s\n\nuse (\n\t%s\n\t%s\n)\n' \
	"$$(awk '$$1 == "go" { print $$2 }' $(TOOLS_EXT_MOD)/go.mod)" $(abspath $(2)) $(abspath $(TOOLS_EXT_MOD)) > $(1)

# ---- kwok: fake Nodes whose Pods become Running and Ready ------------------
# Built in the ext module, as a tool; it reads its version from the build
# information (kwok --version).

KWOK_VERSION := $(call tools_ext_version,sigs.k8s.io/kwok)
KWOK_BIN     ?= $(TOOLS_BIN_DIR)/kwok-$(KWOK_VERSION)

.PHONY: kwok
kwok: $(KWOK_BIN) ## build kwok (fake nodes) into .cache/bin

$(KWOK_BIN): $(TOOLS_EXT_MODS) $(TOOLS_EXT_DEPS)
	@mkdir -p $(dir $@)
	$(tools_ext_build) -ldflags '-s -w' -o $(abspath $@) sigs.k8s.io/kwok/cmd/kwok
	@touch $@

# ---- memcached_exporter ------------------------------------------------------

MEMCACHED_EXPORTER_VERSION := $(call tools_ext_version,github.com/prometheus/memcached_exporter)
MEMCACHED_EXPORTER_BIN     ?= $(TOOLS_BIN_DIR)/memcached_exporter-$(MEMCACHED_EXPORTER_VERSION)
MEMCACHED_EXPORTER_PKG     := github.com/prometheus/memcached_exporter/cmd/memcached_exporter
# Stamped like the project's own release build (promu) does.
MEMCACHED_EXPORTER_LDFLAGS := -s -w \
	-X github.com/prometheus/common/version.Version=$(patsubst v%,%,$(MEMCACHED_EXPORTER_VERSION)) \
	-X github.com/prometheus/common/version.Branch=HEAD \
	-X github.com/prometheus/common/version.Revision=$(MEMCACHED_EXPORTER_VERSION)

.PHONY: memcached-exporter
memcached-exporter: $(MEMCACHED_EXPORTER_BIN) ## build memcached_exporter into .cache/bin

$(MEMCACHED_EXPORTER_BIN): $(TOOLS_EXT_MODS) $(TOOLS_EXT_DEPS)
	@mkdir -p $(dir $@)
	$(tools_ext_build) -ldflags '$(MEMCACHED_EXPORTER_LDFLAGS)' -o $(abspath $@) $(MEMCACHED_EXPORTER_PKG)
	@touch $@

# ---- Metacontroller ----------------------------------------------------------
# Not on the Go module proxy (its module path is `metacontroller`): built from
# the source archive in shared/ (see shared/metacontroller/source/README.md);
# its dependencies come from the proxy. The version is the archive's suffix.
#
# It is built in a Go workspace (METACONTROLLER_WORK) of its extracted
# source and the ext module, so that Go selects one version of each module
# for both and Metacontroller reuses what the ext module's build compiled
# (110 s apart from empty caches, 16 s after the ext module's). Its go.mod's
# replace directives, which pin Kubernetes' libraries to its release's
# v0.36, are dropped from the extracted copy: in a workspace they would
# apply to both modules, and a replaced module is compiled apart even at
# the same version. So Metacontroller is built against the ext module's
# selection (Kubernetes' libraries at v0.37); the end-to-end suite says it
# still works. The ext module requires every module at least at the
# version Metacontroller's go.mod does (k8s.io/utils and demangle are there
# for that), or the workspace would raise it, and everything that imports
# it would be compiled twice: the recipe prints the modules it raises.

METACONTROLLER_ARCHIVE ?= ../shared/metacontroller/source/metacontroller-175eac0.tar.gz
METACONTROLLER_VERSION ?= $(patsubst metacontroller-%.tar.gz,%,$(notdir $(METACONTROLLER_ARCHIVE)))
METACONTROLLER_BIN     ?= $(TOOLS_BIN_DIR)/metacontroller-$(METACONTROLLER_VERSION)
METACONTROLLER_SRC     := $(TOOLS_SRC_DIR)/metacontroller-$(METACONTROLLER_VERSION)
METACONTROLLER_WORK    := $(METACONTROLLER_SRC).work/go.work

.PHONY: metacontroller
metacontroller: ## build Metacontroller from METACONTROLLER_ARCHIVE into .cache/bin (skipped if missing)
ifneq ($(wildcard $(METACONTROLLER_ARCHIVE)),)
metacontroller: $(METACONTROLLER_BIN)

$(METACONTROLLER_BIN): $(METACONTROLLER_ARCHIVE) $(TOOLS_EXT_MODS) $(TOOLS_EXT_DEPS)
	@mkdir -p $(dir $@)
	rm -rf $(METACONTROLLER_SRC) $(dir $(METACONTROLLER_WORK)) && mkdir -p $(METACONTROLLER_SRC)
	tar -xzf $(METACONTROLLER_ARCHIVE) -C $(METACONTROLLER_SRC)
	sed -i -e '/^replace (/,/^)/d' -e '/^replace /d' $(METACONTROLLER_SRC)/go.mod
	$(call tools_ext_work,$(METACONTROLLER_WORK),$(METACONTROLLER_SRC))
	@raised=$$(join <(GOWORK=off $(TOOLS_GO) -C $(TOOLS_EXT_MOD) list -m -f '{{.Path}} {{.Version}}' all | sort) \
	  <(GOWORK=$(abspath $(METACONTROLLER_WORK)) $(TOOLS_GO) -C $(METACONTROLLER_SRC) list -m -f '{{.Path}} {{.Version}}' all | sort) | \
	  awk '$$2 != $$3 { print $$1 "@" $$3 }' | tr '\n' ' '); \
	[ -z "$$raised" ] || echo "metacontroller: the workspace raises $$raised above the ext module's go.mod, so they and what imports them are compiled again: raise them there (go get)" >&2
	CGO_ENABLED=0 GOWORK=$(abspath $(METACONTROLLER_WORK)) $(TOOLS_GO) -C $(METACONTROLLER_SRC) build $(TOOLS_GOFLAGS) \
	  -ldflags '-s -w -X main.version=$(METACONTROLLER_VERSION)' -o $(abspath $@) ./pkg/cmd/metacontroller
	@touch $@
else
metacontroller:
	@echo "metacontroller: NOT BUILT: source archive METACONTROLLER_ARCHIVE=$(METACONTROLLER_ARCHIVE) is missing" \
	  "(expected shared/metacontroller/source/ beside the repository);" \
	  "$(if $(wildcard $(METACONTROLLER_BIN)),using the $(METACONTROLLER_BIN) built earlier,no $(METACONTROLLER_BIN): tests that need Metacontroller skip (fail under CI))" >&2
endif

# ---- memcached ---------------------------------------------------------------
# Built from the source archive in shared/ (see
# shared/memcached-source/README.md) with the configure flags of the official
# image memcached:<version>-alpine. Debian's build dependencies (and the SASL
# modules needed at run time) are installed with apt-get when missing.

MEMCACHED_VERSION   ?= 1.6.45
MEMCACHED_ARCHIVE   ?= ../shared/memcached-source/memcached-$(MEMCACHED_VERSION).tar.gz
MEMCACHED_BIN       ?= $(TOOLS_BIN_DIR)/memcached-$(MEMCACHED_VERSION)
MEMCACHED_SRC       := $(TOOLS_SRC_DIR)/memcached-$(MEMCACHED_VERSION)
MEMCACHED_CONFIGURE := --enable-extstore --enable-proxy --enable-sasl --enable-sasl-pwdb --enable-tls
MEMCACHED_DEB_DEPS  := gcc make libc6-dev autoconf automake libevent-dev libssl-dev libsasl2-dev libsasl2-modules

.PHONY: memcached
memcached: ## build memcached from MEMCACHED_ARCHIVE into .cache/bin (skipped if missing)
ifneq ($(wildcard $(MEMCACHED_ARCHIVE)),)
memcached: $(MEMCACHED_BIN)

$(MEMCACHED_BIN): $(MEMCACHED_ARCHIVE) $(TOOLS_EXT_DEPS)
	@$(call tools_apt_install,$(MEMCACHED_DEB_DEPS))
	@mkdir -p $(dir $@)
	rm -rf $(MEMCACHED_SRC) && mkdir -p $(MEMCACHED_SRC)
	tar -xzf $(MEMCACHED_ARCHIVE) -C $(MEMCACHED_SRC) --strip-components=1
	cd $(MEMCACHED_SRC) && ./autogen.sh >autogen.log 2>&1 || { cat $(MEMCACHED_SRC)/autogen.log; exit 1; }
	cd $(MEMCACHED_SRC) && ./configure $(MEMCACHED_CONFIGURE) >configure.log 2>&1 || { tail -50 $(MEMCACHED_SRC)/configure.log; exit 1; }
	$(MAKE) --no-print-directory -C $(MEMCACHED_SRC) -j$(TOOLS_NPROC) >$(MEMCACHED_SRC)/make.log 2>&1 || { tail -50 $(MEMCACHED_SRC)/make.log; exit 1; }
	[ "$$($(MEMCACHED_SRC)/memcached -V)" = "memcached $(MEMCACHED_VERSION)" ]
	cp $(MEMCACHED_SRC)/memcached $@
else
memcached:
	@echo "memcached: NOT BUILT: source archive MEMCACHED_ARCHIVE=$(MEMCACHED_ARCHIVE) is missing" \
	  "(expected shared/memcached-source/ beside the repository);" \
	  "$(if $(wildcard $(MEMCACHED_BIN)),using the $(MEMCACHED_BIN) built earlier,no $(MEMCACHED_BIN): tests that need memcached skip (fail under CI))" >&2
endif

# tools_apt_lock makes the recipe that starts with it wait for any other
# that installs Debian packages (make test builds two tools at once, and a
# second apt-get fails on the first one's lock), until its shell exits.
TOOLS_APT_LOCK := $(abspath $(TOOLS_SRC_DIR)/../apt.lock)
tools_apt_lock = mkdir -p $(dir $(TOOLS_APT_LOCK)) && exec 9>$(TOOLS_APT_LOCK) && { ! command -v flock >/dev/null || flock 9; }

# tools_apt_install installs the Debian packages in $(1) that are not
# installed yet (apt-get update first, as a fresh machine has no lists). It
# does nothing where dpkg is absent (not Debian: install them by hand).
define tools_apt_install
$(tools_apt_lock); \
if command -v dpkg-query >/dev/null; then \
  missing=; \
  for p in $(1); do \
    [ "$$(dpkg-query -W -f='$${db:Status-Status}' $$p 2>/dev/null)" = installed ] || missing="$$missing $$p"; \
  done; \
  if [ -n "$$missing" ]; then \
    sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
    echo "installing Debian packages:$$missing"; \
    $$sudo apt-get update -qq && \
    DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends $$missing; \
  fi; \
fi
endef

# ---- what test/pod runs Pods with --------------------------------------------
# busybox stands in for the official Alpine images' tools (sh, nc, timeout,
# pidof...); nsenter, setpriv (util-linux) and ip (iproute2) make the Pod's
# namespaces and user.

POD_DEB_DEPS := busybox util-linux iproute2

.PHONY: pod-tools
pod-tools: ## install what test/pod needs besides memcached (busybox, nsenter, setpriv, ip)
	@$(call tools_apt_install,$(POD_DEB_DEPS))

# ---- real client libraries from the npm registry ------------------------------
# The memcached clients the tests drive (test/clients/node: package.json and
# its lockfile, committed), installed with `npm ci` into .cache/npm, which
# git ignores. Reinstalled when the lockfile changes. Without npm, it says
# so and the tests that need a client skip (fail under CI).

NPM_CLIENTS_SRC   := test/clients/node
NPM_CLIENTS_DIR   ?= .cache/npm
NPM_CLIENTS_STAMP := $(NPM_CLIENTS_DIR)/node_modules/.installed

.PHONY: npm-clients
npm-clients: ## install the npm clients the tests drive (memcache) into .cache/npm
ifneq ($(shell command -v npm 2>/dev/null),)
npm-clients: $(NPM_CLIENTS_STAMP)

$(NPM_CLIENTS_STAMP): $(NPM_CLIENTS_SRC)/package.json $(NPM_CLIENTS_SRC)/package-lock.json $(TOOLS_EXT_DEPS)
	@mkdir -p $(NPM_CLIENTS_DIR)
	cp $(NPM_CLIENTS_SRC)/package.json $(NPM_CLIENTS_SRC)/package-lock.json $(NPM_CLIENTS_DIR)/
	cd $(NPM_CLIENTS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@
else
npm-clients:
	@echo "npm-clients: NOT INSTALLED: npm is not on PATH; tests that drive an npm client skip (fail under CI)" >&2
endif

# ---- real Go client libraries -------------------------------------------------
# memclient (test/clients/go): Grafana dskit's cache.MemcachedClient and
# bradfitz/gomemcache, the Go clients a user meets, driven by the tests over
# client.mjs's protocol. A module of its own (go.mod and go.sum committed)
# so that their dependency graphs stay out of the operator's go.mod. Built,
# like Metacontroller, in a Go workspace with the ext module, so that what
# both import (Prometheus' client, gRPC, golang.org/x/...) is compiled once
# at one version: 71 s from empty caches alone, 25 s after the ext module.
# dskit and gomemcache stay at the versions its go.mod names; the workspace
# may raise what they import to the ext module's. The file name carries a
# hash of the module's files and the ext module's go.mod and go.sum, so a
# change to its source or to either graph builds a new file.

GO_CLIENTS_SRC   := test/clients/go
GO_CLIENTS_FILES := $(GO_CLIENTS_SRC)/go.mod $(GO_CLIENTS_SRC)/go.sum $(wildcard $(GO_CLIENTS_SRC)/memclient/*.go)
GO_CLIENTS_HASH  := $(shell cat $(GO_CLIENTS_FILES) $(TOOLS_EXT_MODS) | sha256sum | cut -c1-12)
GO_CLIENTS_BIN   ?= $(TOOLS_BIN_DIR)/memclient-$(GO_CLIENTS_HASH)
GO_CLIENTS_WORK  := $(TOOLS_SRC_DIR)/memclient.work/go.work

.PHONY: go-clients
go-clients: $(GO_CLIENTS_BIN) ## build the Go clients the tests drive (dskit, gomemcache) into .cache/bin

$(GO_CLIENTS_BIN): $(GO_CLIENTS_FILES) $(TOOLS_EXT_MODS) $(TOOLS_EXT_DEPS)
	@mkdir -p $(dir $@)
	$(call tools_ext_work,$(GO_CLIENTS_WORK),$(GO_CLIENTS_SRC))
	CGO_ENABLED=0 GOWORK=$(abspath $(GO_CLIENTS_WORK)) $(TOOLS_GO) -C $(GO_CLIENTS_SRC) build $(TOOLS_GOFLAGS) -ldflags '-s -w' -o $(abspath $@) ./memclient
	@touch $@

# ---- real client libraries from Debian ----------------------------------------
# pymemcache's HashClient (test/clients/python/client.py, run by Debian's
# /usr/bin/python3, which is the interpreter python3-pymemcache installs
# into) and PHP's memcached extension, libmemcached underneath
# (test/clients/php/client.php): the clients a Python or PHP user meets,
# as Debian ships them; and Debian's Prometheus server (2.42), which
# test/monitoring runs the shipped rules in, scraping the real programs, as
# a user's Prometheus would (its package's service is not started: the test
# runs /usr/bin/prometheus itself). Installed with apt-get when missing, as
# root (make test runs as root in CI). Not root, it prints what is missing
# and succeeds: the tests that drive these clients skip (fail under CI).

DEBIAN_CLIENTS_DEB_DEPS := python3-pymemcache php-cli php-memcached prometheus

.PHONY: debian-clients
debian-clients: ## install the Debian clients and the Prometheus server the tests drive (python3-pymemcache, php-cli, php-memcached, prometheus)
	@$(tools_apt_lock); \
	if command -v dpkg-query >/dev/null; then \
	  missing=; \
	  for p in $(DEBIAN_CLIENTS_DEB_DEPS); do \
	    [ "$$(dpkg-query -W -f='$${db:Status-Status}' $$p 2>/dev/null)" = installed ] || missing="$$missing $$p"; \
	  done; \
	  if [ -z "$$missing" ]; then :; \
	  elif [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	  else \
	    echo "debian-clients: NOT INSTALLED:$$missing (not root; as root: apt-get install --no-install-recommends$$missing);" \
	      "tests that drive the Python or PHP client or Prometheus skip (fail under CI)" >&2; \
	  fi; \
	else \
	  echo "debian-clients: NOT INSTALLED: no dpkg (not Debian; install pymemcache for /usr/bin/python3, php-cli, PHP's memcached extension and Prometheus by hand);" \
	    "tests that drive the Python or PHP client or Prometheus skip (fail under CI)" >&2; \
	fi

# ---- helm ----------------------------------------------------------------------
# The chart's test (test/chart) renders and lints manifests/helm with it.
# Stamped with its version as helm's own Makefile does (otherwise `helm
# version` says v4.3, the minor version the source carries).

HELM_MODULE  := helm.sh/helm/v4
HELM_VERSION := $(call tools_ext_version,$(HELM_MODULE))
HELM_BIN     ?= $(TOOLS_BIN_DIR)/helm-$(HELM_VERSION)
HELM_LDFLAGS := -s -w -X $(HELM_MODULE)/internal/version.version=$(HELM_VERSION) \
	-X $(HELM_MODULE)/internal/version.gitTreeState=clean

.PHONY: helm
helm: $(HELM_BIN) ## build helm into .cache/bin

$(HELM_BIN): $(TOOLS_EXT_MODS) $(TOOLS_EXT_DEPS)
	@mkdir -p $(dir $@)
	$(tools_ext_build) -ldflags '$(HELM_LDFLAGS)' -o $(abspath $@) $(HELM_MODULE)/cmd/helm
	@touch $@

# ---- all of them -------------------------------------------------------------

E2E_TOOLS_BINS := $(KUBE_CONTROLLER_MANAGER_BIN) $(KUBE_SCHEDULER_BIN) $(KWOK_BIN) $(MEMCACHED_EXPORTER_BIN)

.PHONY: e2e-tools test-tools
e2e-tools: $(E2E_TOOLS_BINS) metacontroller memcached pod-tools npm-clients go-clients debian-clients ## build kube-controller-manager, kube-scheduler, kwok, Metacontroller, memcached, memcached_exporter and the Go clients; install the npm and Debian clients
test-tools: kube-tools e2e-tools helm ## build every program the tests run (kube-tools, e2e-tools and helm)

# E2E_TOOLS_ENV is the environment the end-to-end tests (and the chart's,
# HELM_BIN) read, next to TEST_TOOLS_ENV:
# `$(TEST_TOOLS_ENV) $(E2E_TOOLS_ENV) go test ./...`. The
# paths are set even when a binary could not be built (missing archive): a
# test finds no file there and skips, or fails under CI.
E2E_TOOLS_ENV := KUBE_CONTROLLER_MANAGER_BIN=$(abspath $(KUBE_CONTROLLER_MANAGER_BIN)) \
	KUBE_SCHEDULER_BIN=$(abspath $(KUBE_SCHEDULER_BIN)) \
	KWOK_BIN=$(abspath $(KWOK_BIN)) \
	METACONTROLLER_BIN=$(abspath $(METACONTROLLER_BIN)) \
	MEMCACHED_BIN=$(abspath $(MEMCACHED_BIN)) \
	MEMCACHED_EXPORTER_BIN=$(abspath $(MEMCACHED_EXPORTER_BIN)) \
	NPM_CLIENTS_DIR=$(abspath $(NPM_CLIENTS_DIR)) \
	GO_CLIENTS_BIN=$(abspath $(GO_CLIENTS_BIN)) \
	HELM_BIN=$(abspath $(HELM_BIN))
