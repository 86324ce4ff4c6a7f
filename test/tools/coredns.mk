# test/tools/coredns.mk builds CoreDNS, .cache/bin/coredns-<version>: the
# DNS server test/dns runs, its kubernetes plugin pointed at the test API
# server, to resolve the slots' names. The root Makefile includes this file
# after Makefile.inc; it is a file of its own so that changing it rebuilds
# only this binary (every tool of external.mk depends on external.mk).
#
# A trimmed build: CoreDNS's main with only the plugins test/dns's Corefile
# uses (test/tools/coredns/main.go), not a release's seventy-odd, so the
# first build compiles client-go and a few CoreDNS packages rather than
# every cloud provider's SDK. The file is copied into a throw-away module
# under .cache/src; `go get` of the packages it imports, at
# COREDNS_VERSION, resolves CoreDNS's own go.mod, so the graph is the same
# every time. Its ignore build tag keeps it out of the tools module; named
# on go build's command line, it builds anyway.

COREDNS_VERSION ?= v1.14.7
COREDNS_BIN     ?= $(TOOLS_BIN_DIR)/coredns-$(COREDNS_VERSION)
COREDNS_MAIN    := $(TOOLS_DIR)/coredns/main.go
COREDNS_MOD     := $(TOOLS_SRC_DIR)/coredns-$(COREDNS_VERSION)
COREDNS_PKGS    := $(addprefix github.com/coredns/coredns/,core/dnsserver coremain \
	plugin/bind plugin/errors plugin/kubernetes plugin/log)

.PHONY: coredns
coredns: $(COREDNS_BIN) ## build CoreDNS (trimmed: the kubernetes plugin and what test/dns needs) into .cache/bin

$(COREDNS_BIN): $(COREDNS_MAIN) $(TOOLS_DIR)/coredns.mk
	@mkdir -p $(dir $@)
	rm -rf $(COREDNS_MOD) && mkdir -p $(COREDNS_MOD)
	cp $(COREDNS_MAIN) $(COREDNS_MOD)/main.go
	cd $(COREDNS_MOD) && export GOWORK=off && \
	  $(TOOLS_GO) mod init coredns-build && \
	  $(TOOLS_GO) get $(addsuffix @$(COREDNS_VERSION),$(COREDNS_PKGS)) && \
	  CGO_ENABLED=0 $(TOOLS_GO) build $(TOOLS_GOFLAGS) -ldflags '-s -w' -o $(abspath $@) main.go
	[ "$$($(abspath $@) -version | head -1)" = "CoreDNS-$(patsubst v%,%,$(COREDNS_VERSION))" ]
	@touch $@

test-tools: coredns

# The tests find it here (test/dns).
E2E_TOOLS_ENV += COREDNS_BIN=$(abspath $(COREDNS_BIN))
