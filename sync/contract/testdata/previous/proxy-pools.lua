-- Route config for memcached's built-in proxy (memcached 1.6.45, routelib),
-- of every Memcached, with zones (spec.zones) or without.
--
-- Run: memcached -l 0.0.0.0 -p 11211 -t 2 \
--        -o proxy_config=routelib,proxy_arg=/etc/memcached-proxy/config.lua
--
-- This file is static: the same bytes for every proxy of every Memcached
-- (a zone's proxies are told their zone by MEMCACHED_PROXY_LOCAL_ZONE). The
-- pool is data in a separate file (POOL_FILE below) that the agent sidecar
-- writes atomically (temp file + rename), and the file says whether the
-- Memcached has zones. Every reload, routelib's mcp_config_pools() runs this
-- file again (dofile) in the config VM, which lives as long as the process,
-- so state kept in a global survives reloads.
--
-- Why so careful: in 1.6.45 any error raised while this file runs (or in
-- routelib's pools{} / routes{} processing after it) makes memcached call
-- exit(EXIT_FAILURE) (proxy_config.c, proxy_load_config), and a pool with no
-- backend crashes the process on its first request. So nothing below may
-- raise: reading and parsing run under pcall, routelib only ever gets
-- backends this file validated, and when there is no valid pool the proxy
-- gets a placeholder pool of one backend marked down (requests to it are
-- answered "SERVER_ERROR backend failure" at once; nothing connects).
--
-- Pool file format: a pool set, a pool a zone. Each zone's slots are under
-- its zone line, one line per slot, in slot order (that order is the jump
-- hash's bucket order within the zone; the file order is the distribution).
-- A Memcached without zones is the one zone "", which has no zone line: its
-- slot lines are the whole file.
--
--   # comments and blank lines are ignored
--   version 1732481234          optional, informational (logged)
--   zone a                      the slot lines below are zone a's
--   10.244.1.7:11211            a serving slot; label defaults to host:port
--   127.0.0.1:1 _down_a_1       a slot with no serving Pod: a label starting
--                               with _down_ makes it a backend that is down
--   zone b
--   [fd00::7]:11211             IPv6 in brackets
--   end 3                       required last line: the number of slot lines,
--                               every zone's
--
-- Without zones:
--
--   version 1732481234
--   10.244.1.7:11211
--   127.0.0.1:1 _down_1
--   end 2
--
-- Labels, and the addresses of backends that are not down, are unique in
-- the whole file (a Pod is in one zone); every zone has a slot line; a file
-- has slot lines of the zone "" or zone lines, not both.
--
-- Routes without zones (the zone ""): every command to the one pool
-- (route_direct), which hashes the key over its backends.
--
-- Routes with zones: every zone holds a full copy of the cache. routelib
-- gets a pool set, a pool a zone (pools{ set_main = { a = { backends = ...
-- }, b = ... } }), and this proxy's zone is MEMCACHED_PROXY_LOCAL_ZONE:
--
--   get, gets, mg    route_failover over the zones, the local zone first:
--                    its hit or its miss is the answer (miss is left
--                    unset, so a miss stays local, no cross-zone read);
--                    only an error (a Pod down, a slot with no Pod) tries
--                    the next zone. mg's flags that change the item (T, N,
--                    ...) change it in the zone that answered only.
--   gat, gats        route_allfastest{ miss = true } to every zone: they
--                    touch, and a touch must reach every copy or the
--                    zones' TTLs part. The answer is the first hit, a miss
--                    only when no zone hits, so they read across zones;
--                    get and touch apart keep the read local.
--   cas              refused, stored nowhere: a pool of one backend that is
--                    down answers "SERVER_ERROR backend failure" at once.
--                    Its unique is one memcached's and the item has
--                    another in every other zone: a cas sent to every zone
--                    would store in one and fail in the rest (the copies
--                    parting), one sent to the local zone alone would leave
--                    the others stale. An error is loud; NOT_STORED would
--                    spin clients that retry a cas that did not store.
--   everything else  set, add, replace, append, prepend, delete, touch,
--                    incr, decr and the meta commands ms, md, ma, mn, me:
--                    route_allfastest to every zone. The answer is the
--                    first that is not an error, so a zone that is down
--                    fails no write (route_allsync would answer
--                    SERVER_ERROR with one zone down). incr and decr count
--                    in each zone, which agree as long as none missed an
--                    update; the answer is the fastest zone's. ms, md and
--                    ma with a cas unique (C) have cas's flaw, unrefused:
--                    routelib routes by command, not by flag.
--
-- local_zone is set on each read route: routelib's file-level local_zone()
-- does not reach route_failover in 1.6.45 (route_failover_conf assigns it
-- to a global). With MEMCACHED_PROXY_LOCAL_ZONE unset, or naming no zone of
-- the pool, reads fail over in no set order (logged once). Not used:
-- route_zfailover (deprecated upstream; it fans out on a local miss unless
-- miss = false) and route_allasync (not registered in 1.6.45).
--
-- The routes follow the pool file: a Memcached that turns zones on or off
-- changes what its agent writes, and the proxy reloads into the other
-- routes. Before any valid pool, every command goes to one placeholder.
--
-- The "end N" trailer is what lets this file tell a complete pool from a
-- truncated one (a writer that does not rename, a full disk): a prefix of a
-- valid file never ends with the right "end N" line.
--
-- A bad file (missing, empty, malformed, truncated, over 1000 slots in a
-- zone, a zone with no slot, a bad or repeated zone name, slot lines of the
-- zone "" and a zone line, duplicate address or label) is refused: the
-- proxy keeps routing by the last good pool and says why on stderr, once
-- per distinct problem.

local POOL_FILE <const> = os.getenv("MEMCACHED_PROXY_POOL_FILE") or "/run/memcached-proxy/pool"
local MAX_SLOTS <const> = 1000 -- sync/slots.MaxSlots, in each zone
local MAX_BYTES <const> = 1024 * 1024 -- contract.MaxPoolBytes: 8 zones of 1000 slots fit
local LOCAL_ZONE <const> = os.getenv("MEMCACHED_PROXY_LOCAL_ZONE")

-- State that survives reloads (the config VM is never recreated). Not
-- __mcpool nor __mczones: the configurations before this one (one without
-- zones, one with) kept pools of other shapes there, and an operator
-- upgrade changes the ConfigMap under a running proxy, whose next reload
-- runs this file in the VM they ran in.
__mcpools = __mcpools or {
    good = nil,       -- the last valid pool: { key =, list =, zones =, version =, down = }
    bad_content = nil, -- last content refused, so the cron does not re-parse it
    said = nil,       -- last problem logged, to log each problem once
    said_zone = nil,  -- last word on the local zone, to say it once
}
local S <const> = __mcpools

local function log(msg)
    pcall(function()
        io.stderr:write("memcached-proxy-pool: ", msg, "\n")
        io.stderr:flush()
    end)
    pcall(mcp.log, "memcached-proxy-pool: " .. msg) -- `watch proxyuser`
end

-- say logs a problem once until a different one (or success) comes.
local function say(problem)
    if S.said ~= problem then
        S.said = problem
        log(problem)
    end
end

local function read_file(path)
    local f, err = io.open(path, "rb")
    if f == nil then
        return nil, "cannot open pool file: " .. tostring(err)
    end
    local data = f:read(MAX_BYTES + 1)
    f:close()
    if data == nil then
        return nil, "pool file " .. path .. " is empty"
    end
    if #data > MAX_BYTES then
        return nil, "pool file " .. path .. " is larger than " .. MAX_BYTES .. " bytes"
    end
    return data
end

local function valid_ipv4(h)
    local a, b, c, d = string.match(h, "^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
    if a == nil then
        return false
    end
    for _, o in ipairs({ a, b, c, d }) do
        -- no leading zero: getaddrinfo would read "010" as octal 8
        if #o > 3 or tonumber(o) > 255 or (#o > 1 and string.sub(o, 1, 1) == "0") then
            return false
        end
    end
    return true
end

local function valid_ipv6(h)
    return #h >= 2 and #h <= 45 and string.match(h, "^[%x:%.]+$") ~= nil
        and string.find(h, ":", 1, true) ~= nil
end

-- valid_zone: a DNS label of at most 40 characters (v1alpha1's
-- MaxZoneNameLen).
local function valid_zone(z)
    return #z <= 40 and string.match(z, "^[a-z0-9][a-z0-9%-]*$") ~= nil
        and string.sub(z, -1) ~= "-"
end

-- parse_line returns a backend table, or nil and why.
local function parse_line(line)
    local addr, label, rest = string.match(line, "^(%S+)%s*(%S*)%s*(.-)$")
    if rest ~= "" then
        return nil, "too many fields"
    end
    local host, port = string.match(addr, "^%[([^%]]+)%]:(%d+)$")
    if host ~= nil then
        if not valid_ipv6(host) then
            return nil, "bad IPv6 address " .. host
        end
    else
        host, port = string.match(addr, "^([%d%.]+):(%d+)$")
        if host == nil or not valid_ipv4(host) then
            return nil, "want IPv4:port or [IPv6]:port, got " .. addr
        end
    end
    local p = tonumber(port)
    if #port > 5 or p < 1 or p > 65535 then
        return nil, "bad port " .. port
    end
    port = tostring(p) -- no leading zeros: the label is compared as text
    if label == "" then
        label = host .. ":" .. port
    elseif #label > 64 or not string.match(label, "^[%w_.:%-]+$") then
        return nil, "bad label " .. label
    end
    local b = { host = host, port = port, label = label }
    if string.sub(label, 1, 6) == "_down_" then
        b.down = true -- never connected; requests fail at once
    end
    return b
end

-- parse returns a pool { key, list, zones, version, down } or nil and why:
-- zones are { name =, list = } in file order (the one zone "" without zone
-- lines), list every zone's slots. Never raises (callers still use pcall,
-- for what this cannot foresee).
local function parse(data)
    local list, labels, addrs = {}, {}, {}
    local version, ended, down = nil, nil, 0
    local zones, names, zone = {}, {}, nil
    local n = 0
    -- a file not ending in a newline is a truncated one
    if string.sub(data, -1) ~= "\n" then
        return nil, "last line has no newline (truncated?)"
    end
    for raw in string.gmatch(data, "([^\n]*)\n") do
        n = n + 1
        local line = string.match(raw, "^%s*(.-)%s*$")
        if line == "" or string.sub(line, 1, 1) == "#" then
            -- skip
        elseif ended ~= nil then
            return nil, "line " .. n .. ": text after the end line"
        else
            local v = string.match(line, "^version%s+(%d+)$")
            local e = string.match(line, "^end%s+(%d+)$")
            local z = string.match(line, "^zone%s+(%S+)$")
            if v ~= nil then
                if version ~= nil or #list > 0 or #zones > 0 then
                    return nil, "line " .. n .. ": version must come first, once"
                end
                version = v
            elseif e ~= nil then
                ended = tonumber(e)
            elseif z ~= nil then
                if names[""] then
                    return nil, "line " .. n .. ": a zone line after slot lines of no zone"
                end
                if not valid_zone(z) then
                    return nil, "line " .. n .. ": bad zone name " .. z
                end
                if names[z] then
                    return nil, "line " .. n .. ": zone " .. z .. " listed twice"
                end
                names[z] = true
                zone = { name = z, list = {} }
                zones[#zones + 1] = zone
            else
                if zone == nil then
                    -- slot lines before any zone line: the zone ""
                    names[""] = true
                    zone = { name = "", list = {} }
                    zones[1] = zone
                end
                if #zone.list >= MAX_SLOTS then
                    if zone.name == "" then
                        return nil, "more than " .. MAX_SLOTS .. " slots"
                    end
                    return nil, "zone " .. zone.name .. " has more than " .. MAX_SLOTS .. " slots"
                end
                local b, why = parse_line(line)
                if b == nil then
                    return nil, "line " .. n .. ": " .. why
                end
                if labels[b.label] then
                    return nil, "line " .. n .. ": label " .. b.label .. " listed twice"
                end
                local a = b.host .. "|" .. b.port
                if not b.down and addrs[a] then
                    return nil, "line " .. n .. ": address " .. b.host .. ":" .. b.port .. " listed twice"
                end
                labels[b.label], addrs[a] = true, true
                if b.down then
                    down = down + 1
                end
                list[#list + 1] = b
                zone.list[#zone.list + 1] = b
            end
        end
    end
    if ended == nil then
        return nil, "no end line (truncated?)"
    end
    if ended ~= #list then
        return nil, "end line says " .. ended .. " slots, file has " .. #list
    end
    if #list == 0 then
        return nil, "no backend"
    end
    local key = {}
    for _, zn in ipairs(zones) do
        if #zn.list == 0 then
            return nil, "zone " .. zn.name .. " has no backend"
        end
        key[#key + 1] = "zone " .. zn.name
        for _, b in ipairs(zn.list) do
            key[#key + 1] = b.host .. "|" .. b.port .. "|" .. b.label .. "|" .. tostring(b.down == true)
        end
    end
    return { key = table.concat(key, "\n"), list = list, zones = zones, version = version or "-", down = down }
end

-- load_pool reads and parses the pool file; nil and why when it cannot.
local function load_pool()
    local ok, data, why = pcall(read_file, POOL_FILE)
    if not ok then
        return nil, "reading pool file: " .. tostring(data), nil
    end
    if data == nil then
        return nil, why, nil
    end
    local ok2, pool, why2 = pcall(parse, data)
    if not ok2 then
        return nil, "parsing pool file: " .. tostring(pool), data
    end
    if pool == nil then
        return nil, "pool file " .. POOL_FILE .. " refused: " .. why2, data
    end
    return pool, nil, data
end

-- A number from the environment, within [lo, hi], else the default.
local function env_number(name, default, lo, hi)
    local v = os.getenv(name)
    if v == nil or v == "" then
        return default
    end
    local n = tonumber(v)
    if n == nil or n ~= n or n < lo or n > hi then
        say("ignoring " .. name .. "=" .. v .. " (want a number in [" .. lo .. ", " .. hi .. "])")
        return default
    end
    return n
end

-- zoned tells whether a pool has zones: not the one zone "".
local function zoned(pool)
    return pool.zones[1].name ~= ""
end

-- This reload's pool.
do
    local pool, why = load_pool()
    if pool ~= nil then
        if S.good == nil or S.good.key ~= pool.key then
            local zones = ""
            if zoned(pool) then
                zones = #pool.zones .. " zones, "
            end
            log("pool version " .. pool.version .. ": " .. zones .. #pool.list .. " slots, " .. pool.down .. " down")
        end
        S.good, S.said, S.bad_content = pool, nil, nil
    elseif S.good ~= nil then
        say(why .. "; keeping pool version " .. S.good.version)
    else
        say(why .. "; no pool yet: every request fails until one comes")
    end
end

-- backends_of copies a zone's slots for routelib: fresh tables, as routelib
-- copies fields out of them, but never share.
local function backends_of(list)
    local backends = {}
    for i, b in ipairs(list) do
        backends[i] = { host = b.host, port = b.port, label = b.label, down = b.down }
    end
    return backends
end

-- A placeholder pool: one backend, down.
local function down_pool(label)
    return { backends = { { host = "127.0.0.1", port = "1", label = label, down = true } } }
end

-- this_zone is this proxy's zone if the pool has it, else nil (said once).
local function this_zone(pool)
    for _, zn in ipairs(pool.zones) do
        if LOCAL_ZONE ~= nil and LOCAL_ZONE ~= "" and zn.name == LOCAL_ZONE then
            S.said_zone = nil
            return LOCAL_ZONE
        end
    end
    local names = {}
    for _, zn in ipairs(pool.zones) do
        names[#names + 1] = zn.name
    end
    local word = "MEMCACHED_PROXY_LOCAL_ZONE is not set"
    if LOCAL_ZONE ~= nil and LOCAL_ZONE ~= "" then
        word = "MEMCACHED_PROXY_LOCAL_ZONE=" .. LOCAL_ZONE .. " is no zone of the pool"
    end
    word = word .. " (zones " .. table.concat(names, ", ") .. "): reads fail over in no set order"
    if S.said_zone ~= word then
        S.said_zone = word
        log(word)
    end
    return nil
end

-- Global backend settings (memcached's defaults in brackets). Every reload
-- sets all of them: they are process-wide and stick otherwise.
settings{
    backend_connect_timeout = env_number("MEMCACHED_PROXY_CONNECT_TIMEOUT", 5, 0.01, 60), -- [5 s]
    backend_read_timeout = env_number("MEMCACHED_PROXY_READ_TIMEOUT", 3, 0.01, 60),       -- [3 s]
    backend_retry_waittime = env_number("MEMCACHED_PROXY_RETRY_WAIT", 3, 1, 300),         -- [3 s, whole seconds]
    backend_failure_limit = math.floor(env_number("MEMCACHED_PROXY_FAILURE_LIMIT", 3, 0, 100)), -- [3]
}

if S.good ~= nil and zoned(S.good) then
    local set_main = {}
    for _, zn in ipairs(S.good.zones) do
        set_main[zn.name] = { backends = backends_of(zn.list) }
    end
    local lz = this_zone(S.good)
    pools{
        set_main = set_main,
        -- cas's: one backend, down (see the routes at the top).
        nocas = down_pool("_down_nocas"),
    }
    routes{
        cmap = {
            get = route_failover{ children = "set_main", local_zone = lz },
            gets = route_failover{ children = "set_main", local_zone = lz },
            mg = route_failover{ children = "set_main", local_zone = lz },
            gat = route_allfastest{ children = "set_main", miss = true },
            gats = route_allfastest{ children = "set_main", miss = true },
            cas = route_direct{ child = "nocas" },
        },
        default = route_allfastest{ children = "set_main" },
    }
else
    local main = down_pool("_down_nopool")
    if S.good ~= nil then
        main = { backends = backends_of(S.good.list) }
    end
    pools{
        main = main,
    }
    routes{
        default = route_direct{ child = "main" },
    }
end

-- Poll the pool file once a second; reload only when it holds a valid pool
-- different from the one in use. A refused file is logged here, once, and
-- the proxy keeps its pool without reloading.
local function poll()
    local ok, data, why = pcall(read_file, POOL_FILE)
    if not ok or data == nil then
        if S.good ~= nil then
            say(tostring(why or data) .. "; keeping pool version " .. S.good.version)
        end
        return
    end
    if data == S.bad_content then
        return
    end
    local ok2, pool, why2 = pcall(parse, data)
    if not ok2 or pool == nil then
        S.bad_content = data
        local keeping = "no pool yet"
        if S.good ~= nil then
            keeping = "keeping pool version " .. S.good.version
        end
        say("pool file " .. POOL_FILE .. " refused: " .. tostring(why2 or pool) .. "; " .. keeping)
        return
    end
    if S.good == nil or S.good.key ~= pool.key then
        mcp.schedule_config_reload()
    end
end

pcall(mcp.register_cron, "memcached_pool", { every = 1, func = function() pcall(poll) end })
