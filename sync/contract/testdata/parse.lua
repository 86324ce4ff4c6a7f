-- parse.lua runs the proxy's route configuration (sync/memcached/proxy.lua,
-- or an earlier one) outside memcached, as routelib runs it on a load or a
-- reload (dofile, in a config VM whose globals persist), once for each pool
-- file named, and prints for each four lines: what the proxy would route
-- by, the routes it would route with, what it logged, and what its cron
-- announced.
--
--   lua parse.lua CONFIG.lua POOL... [CONFIG.lua POOL...]...
--
-- A name ending in .lua is the configuration the pool files after it are
-- loaded with: a configuration that follows another in one VM is an
-- operator upgrade, whose new ConfigMap a running proxy loads at its next
-- reload.
--
--   ok [a] host|port|label|down ... [b] ...   the pool set routelib was given, zones by name;
--                                             without zones, pool main's, as the zone "" ([])
--   refused <what the configuration logged>   the file was refused
--   raised <error>                            the configuration raised: memcached would exit
--
--   routes cmd=route(children,options) ... pool name=host|port|label|down ...
--
--   said <what it logged, or nothing>
--
--   announced <what the cron sent to mcp.log, lines joined by " | ">, or "announced -"
--
-- The cron the configuration registered runs once after each load (the
-- pool file unchanged, as at the proxy's next second) when PARSE_RUN_CRON
-- is set; "announced -" otherwise, or when it registered none. What it
-- writes to stderr is not in the said line.
--
-- The route stubs record the route, its children and its options (miss,
-- local_zone), and refuse what routelib 1.6.45 would: a command its
-- cmdmap does not know, a route it does not register (allasync,
-- zfailover's absence is the configuration's own choice), a child that
-- names no pool. Each file starts from a fresh state (no pool yet), unless
-- PARSE_KEEP_STATE is set: then they run as reloads of one proxy.
--
-- Needs memcached's own Lua (5.4.3, vendor/lua): MEMCACHED_LUA_BIN.
local captured_pools, captured_routes, said, current, cron, announced

mcp = {
    log = function(msg)
        if announced ~= nil then
            announced[#announced + 1] = tostring(msg)
        end
    end,
    register_cron = function(name, t) cron = t.func end,
    schedule_config_reload = function() end,
}
function settings(t) end
function pools(t) captured_pools = t end
function routes(t) captured_routes = t end
local function route(name)
    return function(t) return { route = name, a = t } end
end
route_failover = route("failover")
route_allfastest = route("allfastest")
route_allsync = route("allsync")
route_direct = route("direct")
route_zfailover = route("zfailover")
-- route_allasync: defined in routelib 1.6.45 but not registered.

local commands = {}
for _, c in ipairs({ "mg", "ms", "md", "mn", "ma", "me", "get", "gat", "set", "add", "cas", "gets", "gats",
    "incr", "decr", "touch", "append", "delete", "replace", "prepend", "all" }) do
    commands[c] = true
end

local function backends(list)
    local parts = {}
    for _, b in ipairs(list) do
        parts[#parts + 1] = b.host .. "|" .. b.port .. "|" .. b.label .. "|" .. tostring(b.down == true)
    end
    return table.concat(parts, " ")
end

local function describe(r)
    if type(r) ~= "table" or r.route == nil then
        error("not a route: " .. tostring(r))
    end
    local child = r.a.children or r.a.child
    if type(child) ~= "string" or captured_pools[child] == nil then
        error("route " .. r.route .. ": child " .. tostring(child) .. " names no pool")
    end
    local opts = { child }
    if r.a.local_zone ~= nil then
        opts[#opts + 1] = "local_zone=" .. tostring(r.a.local_zone)
    end
    if r.a.miss ~= nil then
        opts[#opts + 1] = "miss=" .. tostring(r.a.miss)
    end
    return r.route .. "(" .. table.concat(opts, ",") .. ")"
end

local function describe_all()
    local parts = {}
    local cmds = {}
    for c in pairs(captured_routes.cmap or {}) do
        if not commands[c] then
            error("unknown command in cmdmap: " .. c)
        end
        cmds[#cmds + 1] = c
    end
    table.sort(cmds)
    for _, c in ipairs(cmds) do
        parts[#parts + 1] = c .. "=" .. describe(captured_routes.cmap[c])
    end
    if captured_routes.default ~= nil then
        parts[#parts + 1] = "default=" .. describe(captured_routes.default)
    end
    local names = {}
    for name, p in pairs(captured_pools) do
        if string.find(name, "^set_") == nil then
            names[#names + 1] = name
        end
    end
    table.sort(names)
    for _, name in ipairs(names) do
        parts[#parts + 1] = "pool " .. name .. "=" .. backends(captured_pools[name].backends)
    end
    return table.concat(parts, " ")
end

-- pool_set is the pools routelib was given as zones: set_main's by name,
-- or without a set, pool main's as the zone "".
local function pool_set()
    local parts = {}
    if captured_pools.set_main == nil then
        return "[] " .. backends(captured_pools.main.backends)
    end
    local zones = {}
    for name in pairs(captured_pools.set_main) do
        zones[#zones + 1] = name
    end
    table.sort(zones)
    for _, name in ipairs(zones) do
        parts[#parts + 1] = "[" .. name .. "]"
        parts[#parts + 1] = backends(captured_pools.set_main[name].backends)
    end
    return table.concat(parts, " ")
end

local getenv = os.getenv
os.getenv = function(name)
    if name == "MEMCACHED_PROXY_POOL_FILE" then
        return current
    end
    return getenv(name)
end
io.stderr = {
    write = function(self, ...)
        for _, s in ipairs({ ... }) do
            said[#said + 1] = tostring(s)
        end
        return self
    end,
    flush = function() end,
}

-- The global a configuration keeps its state in (__mcpools, or an earlier
-- configuration's __mcpool or __mczones): its good pool is a new table
-- after a load that took the file.
local function state_of(path)
    local f = assert(io.open(path, "rb"))
    local text = f:read("a")
    f:close()
    return assert(string.match(text, "\n(__mc%w+) = %1 or"), path .. " keeps no state")
end

local keep = getenv("PARSE_KEEP_STATE") ~= nil
local config, state
for i = 1, #arg do
    if string.find(arg[i], "%.lua$") then
        config, state = arg[i], state_of(arg[i])
        goto next
    end
    current, captured_pools, captured_routes, said, cron = arg[i], nil, nil, {}, nil
    if not keep then
        _G[state] = nil
    end
    do
        local prev = _G[state] and _G[state].good
        local ok, err = pcall(dofile, config)
        local line, rline = nil, "routes -"
        if not ok then
            line = "raised " .. tostring(err)
        else
            local rok, r = pcall(describe_all)
            if not rok then
                line = "raised " .. tostring(r)
            else
                rline = "routes " .. r
                if _G[state] == nil or _G[state].good == nil or _G[state].good == prev then
                    line = "refused " .. table.concat(said)
                else
                    line = "ok " .. pool_set()
                end
            end
        end
        io.stdout:write((string.gsub(line, "\n", " ")), "\n")
        io.stdout:write((string.gsub(rline, "\n", " ")), "\n")
        io.stdout:write((string.gsub("said " .. table.concat(said), "\n", " ")), "\n")
        local aline = "announced -"
        if ok and cron ~= nil and getenv("PARSE_RUN_CRON") ~= nil then
            announced, said = {}, {}
            cron()
            aline = "announced " .. table.concat(announced, " | ")
            announced = nil
        end
        io.stdout:write((string.gsub(aline, "\n", " ")), "\n")
    end
    ::next::
end
