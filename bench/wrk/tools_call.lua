-- tools/call load on one pre-made session, or in 2026-07-28 with none.
-- Arguments after "--": <session-id> <token>, or "2026-07-28" <token>: then each request stands
-- alone (no handshake, no session id) and carries its protocol version and the client's
-- capabilities in params._meta, and its method and tool name in the Mcp-Method and Mcp-Name
-- headers, as that revision asks. The token is echoed back, so a 200 that does not contain it
-- (or that carries a JSON-RPC error) counts as a bad answer, not a figure.
--
-- Run with one connection per thread (-t N -c N): request() and response() then alternate
-- strictly, so each thread can time its own requests. We report these raw latencies, not
-- wrk's own percentiles: wrk "corrects" its histogram for coordinated omission by adding
-- synthetic samples after every stall, which turns one 100 ms pause at 1,000 calls/s into
-- ~100 slow samples and makes p99 a measure of the longest stalls.
local ffi = require("ffi")
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
  int clock_gettime(int clk_id, bench_timespec *tp);
]]
local ts = ffi.new("bench_timespec")
local CLOCK_MONOTONIC = 1

local function now_us()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) * 1000000 + tonumber(ts.tv_nsec) / 1000
end

local threads = {}
local next_tid = 1

function setup(thread)
  thread:set("tid", next_tid)
  next_tid = next_tid + 1
  table.insert(threads, thread)
end

function init(args)
  modern = args[1] == "2026-07-28"
  session_id = args[1]
  token = args[2]
  n = 0
  ok = 0
  bad = 0
  first_bad = ""
  lat = {}
  started = 0
  headers = {
    ["Accept"] = "application/json, text/event-stream",
    ["Content-Type"] = "application/json",
    ["Mcp-Session-Id"] = session_id,
    ["MCP-Protocol-Version"] = "2025-11-25",
  }
  params = ''
  if modern then
    headers = {
      ["Accept"] = "application/json, text/event-stream",
      ["Content-Type"] = "application/json",
      ["MCP-Protocol-Version"] = "2026-07-28",
      ["Mcp-Method"] = "tools/call",
      ["Mcp-Name"] = "echo",
    }
    params = ',"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",' ..
      '"io.modelcontextprotocol/clientCapabilities":{},' ..
      '"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"}}'
  end
end

function request()
  n = n + 1
  -- Unique ids: servers may reject an id that is still in flight on the same session.
  local body = string.format(
    '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"%s"}%s}}',
    tid * 1000000000 + n, token, params)
  local req = wrk.format("POST", wrk.path, headers, body)
  started = now_us()
  return req
end

function response(status, hdrs, body)
  lat[#lat + 1] = now_us() - started
  if status == 200 and body:find(token, 1, true) and body:find('"result"', 1, true)
      and not body:find('"error"', 1, true) and not body:find('"isError":true', 1, true) then
    ok = ok + 1
  else
    bad = bad + 1
    if first_bad == "" then
      first_bad = tostring(status) .. " " .. string.sub(body or "", 1, 300)
    end
  end
end

local function jstr(s)
  return '"' .. s:gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('\n', '\\n'):gsub('\r', '\\r') .. '"'
end

function done(summary, latency, requests)
  local tok, tbad, fb = 0, 0, ""
  local all = {}
  for _, t in ipairs(threads) do
    tok = tok + t:get("ok")
    tbad = tbad + t:get("bad")
    local b = t:get("first_bad")
    if fb == "" and b ~= nil then fb = b end
    for _, v in ipairs(t:get("lat")) do all[#all + 1] = v end
  end
  table.sort(all)
  local count, sum = #all, 0
  for _, v in ipairs(all) do sum = sum + v end
  local function pct(p)
    if count == 0 then return 0 end
    local i = math.ceil(p / 100 * count)
    if i < 1 then i = 1 end
    return all[i]
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"ok":%d,"bad":%d,"first_bad":%s,"requests":%d,"duration_us":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"lat_us":{"n":%d,"p50":%.1f,"p90":%.1f,"p99":%.1f,"max":%.1f,"mean":%.1f},' ..
    '"wrk_corrected_lat_us":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f}}\n',
    tok, tbad, jstr(fb), summary.requests, summary.duration,
    e.connect, e.read, e.write, e.status, e.timeout,
    count, pct(50), pct(90), pct(99), count > 0 and all[count] or 0, count > 0 and sum / count or 0,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
