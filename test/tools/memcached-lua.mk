# test/tools/memcached-lua.mk builds memcached's own Lua (5.4.3, the
# vendor/lua its proxy embeds) as a standalone interpreter,
# .cache/bin/lua-memcached-<version>, from the same source archive as
# memcached. The tests run the proxy's route configuration
# (sync/memcached/proxy.lua) with it against every kind of pool file the
# agent writes (cmd/memcached-agent/internal/pool): the Lua the proxy
# runs, not another one's idea of it. The root Makefile includes this file
# after Makefile.inc; it is a file of its own so that changing it rebuilds
# only this binary (every tool of external.mk depends on external.mk).

MEMCACHED_LUA_BIN  ?= $(TOOLS_BIN_DIR)/lua-memcached-$(MEMCACHED_VERSION)
MEMCACHED_LUA_SRC  := $(TOOLS_SRC_DIR)/lua-memcached-$(MEMCACHED_VERSION)

.PHONY: memcached-lua
memcached-lua: ## build memcached's vendored Lua interpreter from MEMCACHED_ARCHIVE into .cache/bin (skipped if missing)
ifneq ($(wildcard $(MEMCACHED_ARCHIVE)),)
memcached-lua: $(MEMCACHED_LUA_BIN)

$(MEMCACHED_LUA_BIN): $(MEMCACHED_ARCHIVE) $(TOOLS_DIR)/memcached-lua.mk
	@$(call tools_apt_install,gcc make libc6-dev)
	@mkdir -p $(dir $@)
	rm -rf $(MEMCACHED_LUA_SRC) && mkdir -p $(MEMCACHED_LUA_SRC)
	tar -xzf $(MEMCACHED_ARCHIVE) -C $(MEMCACHED_LUA_SRC) --strip-components=3 memcached-$(MEMCACHED_VERSION)/vendor/lua
	$(MAKE) --no-print-directory -C $(MEMCACHED_LUA_SRC)/src -j$(TOOLS_NPROC) lua >$(MEMCACHED_LUA_SRC)/make.log 2>&1 || { tail -50 $(MEMCACHED_LUA_SRC)/make.log; exit 1; }
	case "$$($(MEMCACHED_LUA_SRC)/src/lua -v)" in "Lua 5.4."*) ;; *) echo "$@: not Lua 5.4" >&2; exit 1;; esac
	cp $(MEMCACHED_LUA_SRC)/src/lua $@
else
memcached-lua:
	@echo "memcached-lua: NOT BUILT: source archive MEMCACHED_ARCHIVE=$(MEMCACHED_ARCHIVE) is missing;" \
	  "$(if $(wildcard $(MEMCACHED_LUA_BIN)),using the $(MEMCACHED_LUA_BIN) built earlier,no $(MEMCACHED_LUA_BIN): tests that need it skip (fail under CI))" >&2
endif

test-tools: memcached-lua

# The tests find it here (next to MEMCACHED_BIN).
E2E_TOOLS_ENV += MEMCACHED_LUA_BIN=$(abspath $(MEMCACHED_LUA_BIN))
