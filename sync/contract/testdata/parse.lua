-- parse.lua runs the proxy's route configuration (sync/memcached/proxy.lua)
-- outside memcached, as routelib runs it on a load or a reload (dofile, in
-- a config VM whose globals persist), once for each pool file named, and
-- prints for each one line: what the proxy would route by.
--
--   lua parse.lua proxy.lua POOL...
--
--   ok host|port|label|down host|port|label|down ...   the pool routelib was given
--   refused <what proxy.lua logged>                      the file was refused
--   raised <error>                                      proxy.lua raised: memcached would exit
--
-- routelib's and the proxy's entry points (settings, pools, routes,
-- route_direct, mcp.*) are stubs that record what proxy.lua hands them.
-- Each file starts from a fresh state (no pool yet), so that a refused
-- file cannot pass for the one before it.
--
-- Needs memcached's own Lua (5.4.3, vendor/lua): MEMCACHED_LUA_BIN.
local config = arg[1]

local captured, said, current
mcp = {
    log = function() end,
    register_cron = function() end,
    schedule_config_reload = function() end,
}
function settings(t) end
function pools(t) captured = t.main.backends end
function routes(t) end
function route_direct(t) return t end

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

for i = 2, #arg do
    current, captured, said, __mcpool = arg[i], nil, {}, nil
    local ok, err = pcall(dofile, config)
    local line
    if not ok then
        line = "raised " .. tostring(err)
    elseif __mcpool == nil or __mcpool.good == nil then
        line = "refused " .. table.concat(said)
    else
        local parts = {}
        for _, b in ipairs(captured) do
            parts[#parts + 1] = b.host .. "|" .. b.port .. "|" .. b.label .. "|" .. tostring(b.down == true)
        end
        line = "ok " .. table.concat(parts, " ")
    end
    io.stdout:write((string.gsub(line, "\n", " ")), "\n")
end
