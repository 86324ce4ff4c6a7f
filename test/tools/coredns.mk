# test/tools/coredns.mk builds CoreDNS, .cache/bin/coredns-<version>: the
# DNS server test/dns runs, its kubernetes plugin pointed at the test API
# server, to resolve the slots' names. The root Makefile includes this file
# after Makefile.inc; it is a file of its own so that changing it rebuilds
# only this binary (every tool of external.mk depends on external.mk).
#
# A trimmed build: CoreDNS's main with only the plugins test/dns's Corefile
# uses (test/tools/ext/coredns/main.go), not a release's seventy-odd, so the
# first build compiles client-go and a few CoreDNS packages rather than
# every cloud provider's SDK; built in the ext module (see external.mk),
# whose client-go helm's build shares.

COREDNS_VERSION := $(call tools_ext_version,github.com/coredns/coredns)
COREDNS_BIN     ?= $(TOOLS_BIN_DIR)/coredns-$(COREDNS_VERSION)
COREDNS_MAIN    := $(TOOLS_EXT_MOD)/coredns/main.go

.PHONY: coredns
coredns: $(COREDNS_BIN) ## build CoreDNS (trimmed: the kubernetes plugin and what test/dns needs) into .cache/bin

$(COREDNS_BIN): $(COREDNS_MAIN) $(TOOLS_EXT_MODS) $(TOOLS_DIR)/coredns.mk
	@mkdir -p $(dir $@)
	$(tools_ext_build) -ldflags '-s -w' -o $(abspath $@) ./coredns
	[ "$$($(abspath $@) -version | head -1)" = "CoreDNS-$(patsubst v%,%,$(COREDNS_VERSION))" ]
	@touch $@

test-tools: coredns

# The tests find it here (test/dns).
E2E_TOOLS_ENV += COREDNS_BIN=$(abspath $(COREDNS_BIN))
