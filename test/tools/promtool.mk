# test/tools/promtool.mk builds promtool, .cache/bin/promtool-<version>:
# Prometheus's rule checker and rule unit tester, which test/monitoring
# runs on the alerts and recording rules of
# manifests/components/prometheusrule and on every expression of the
# Grafana dashboard. The root Makefile includes this file after
# Makefile.inc; it is a file of its own so that changing it rebuilds only
# this binary (every tool of external.mk depends on external.mk).
#
# Built in the ext module (see external.mk), as a tool of its go.mod
# (github.com/prometheus/prometheus, whose releases v3.N are tagged
# v0.N00.x there), so that it shares the build of client-go, Prometheus'
# libraries and gRPC with the other tools. With the build tag
# remove_all_sd: promtool links every service discovery of a release
# (every cloud's SDK) for `promtool check config`, which the tests do not
# run; the Kubernetes and file discoveries it imports itself stay.
# Stamped like Prometheus's release build (promu).

PROMTOOL_VERSION := $(call tools_ext_version,github.com/prometheus/prometheus)
PROMTOOL_BIN     ?= $(TOOLS_BIN_DIR)/promtool-$(PROMTOOL_VERSION)
PROMTOOL_LDFLAGS := -s -w \
	-X github.com/prometheus/common/version.Version=$(patsubst v%,%,$(PROMTOOL_VERSION)) \
	-X github.com/prometheus/common/version.Branch=HEAD \
	-X github.com/prometheus/common/version.Revision=$(PROMTOOL_VERSION)

.PHONY: promtool
promtool: $(PROMTOOL_BIN) ## build promtool (Prometheus's rule checker) into .cache/bin

$(PROMTOOL_BIN): $(TOOLS_EXT_MODS) $(TOOLS_DIR)/promtool.mk
	@mkdir -p $(dir $@)
	$(tools_ext_build) -tags remove_all_sd -ldflags '$(PROMTOOL_LDFLAGS)' -o $(abspath $@) github.com/prometheus/prometheus/cmd/promtool
	$(abspath $@) --version | head -1 | grep -q 'version $(patsubst v%,%,$(PROMTOOL_VERSION)) '
	@touch $@

test-tools: promtool

# The tests find it here (test/monitoring).
E2E_TOOLS_ENV += PROMTOOL_BIN=$(abspath $(PROMTOOL_BIN))
