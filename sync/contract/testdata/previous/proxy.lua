-- Route config for memcached's built-in proxy (memcached 1.6.45, routelib).
--
-- Run: memcached -l 0.0.0.0 -p 11211 -t 2 \
--        -o proxy_config=routelib,proxy_arg=/etc/memcached-proxy/config.lua
--
-- This file is static: the same bytes for every Memcached. The pool is data
-- in a separate file (POOL_FILE below) that the agent sidecar writes
-- atomically (temp file + rename). Every reload, routelib's
-- mcp_config_pools() runs this file again (dofile) in the config VM, which
-- lives as long as the process, so state kept in a global survives reloads.
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
-- Pool file format, one line per slot, in slot order (that order is the
-- jump hash's bucket order; the file order is the distribution):
--
--   # comments and blank lines are ignored
--   version 1732481234          optional, informational (logged)
--   10.244.1.7:11211            a serving slot; label defaults to host:port
--   127.0.0.1:1 _down_1         a slot with no serving Pod: a label starting
--                               with _down_ makes it a backend that is down
--   [fd00::7]:11211             IPv6 in brackets
--   end 3                       required last line: the number of slot lines
--
-- The "end N" trailer is what lets this file tell a complete pool from a
-- truncated one (a writer that does not rename, a full disk): a prefix of a
-- valid file never ends with the right "end N" line.
--
-- A bad file (missing, empty, malformed, truncated, over 1000 slots,
-- duplicate address or label) is refused: the proxy keeps routing by the
-- last good pool and says why on stderr, once per distinct problem.

local POOL_FILE <const> = os.getenv("MEMCACHED_PROXY_POOL_FILE") or "/run/memcached-proxy/pool"
local MAX_SLOTS <const> = 1000 -- sync/slots.MaxSlots
local MAX_BYTES <const> = 256 * 1024

-- State that survives reloads (the config VM is never recreated).
__mcpool = __mcpool or {
    good = nil,       -- the last valid pool: { key =, list =, version =, down = }
    bad_content = nil, -- last content refused, so the cron does not re-parse it
    said = nil,       -- last problem logged, to log each problem once
}
local S <const> = __mcpool

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

-- parse returns a pool { key, list, version, down } or nil and why.
-- Never raises (callers still use pcall, for what this cannot foresee).
local function parse(data)
    local list, labels, addrs = {}, {}, {}
    local version, ended, down = nil, nil, 0
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
            if v ~= nil then
                if version ~= nil or #list > 0 then
                    return nil, "line " .. n .. ": version must come first, once"
                end
                version = v
            elseif e ~= nil then
                ended = tonumber(e)
            else
                if #list >= MAX_SLOTS then
                    return nil, "more than " .. MAX_SLOTS .. " slots"
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
    for i, b in ipairs(list) do
        key[i] = b.host .. "|" .. b.port .. "|" .. b.label .. "|" .. tostring(b.down == true)
    end
    return { key = table.concat(key, "\n"), list = list, version = version or "-", down = down }
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

-- This reload's pool.
do
    local pool, why = load_pool()
    if pool ~= nil then
        if S.good == nil or S.good.key ~= pool.key then
            log("pool version " .. pool.version .. ": " .. #pool.list .. " slots, " .. pool.down .. " down")
        end
        S.good, S.said, S.bad_content = pool, nil, nil
    elseif S.good ~= nil then
        say(why .. "; keeping pool version " .. S.good.version)
    else
        say(why .. "; no pool yet: every request fails until one comes")
    end
end

local backends = {}
if S.good ~= nil then
    for i, b in ipairs(S.good.list) do
        -- fresh tables: routelib copies fields out of them, but never share.
        backends[i] = { host = b.host, port = b.port, label = b.label, down = b.down }
    end
else
    backends[1] = { host = "127.0.0.1", port = "1", label = "_down_nopool", down = true }
end

-- Global backend settings (memcached's defaults in brackets). Every reload
-- sets all of them: they are process-wide and stick otherwise.
settings{
    backend_connect_timeout = env_number("MEMCACHED_PROXY_CONNECT_TIMEOUT", 5, 0.01, 60), -- [5 s]
    backend_read_timeout = env_number("MEMCACHED_PROXY_READ_TIMEOUT", 3, 0.01, 60),       -- [3 s]
    backend_retry_waittime = env_number("MEMCACHED_PROXY_RETRY_WAIT", 3, 1, 300),         -- [3 s, whole seconds]
    backend_failure_limit = math.floor(env_number("MEMCACHED_PROXY_FAILURE_LIMIT", 3, 0, 100)), -- [3]
}

pools{
    main = { backends = backends },
}

routes{
    default = route_direct{ child = "main" },
}

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
