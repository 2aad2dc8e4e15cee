-- Notifications on a POST stream: tools/call notify(count) on one pre-made session, repeated.
-- Arguments after "--": <session-id> <count>. The server answers on an SSE stream carrying
-- `count` notifications/message events and then the result; wrk hands response() the whole
-- stream once it ends. A call counts only if its stream held exactly `count` notifications
-- and the tool's own answer ("sent <count>"); anything else is a bad answer, not a figure.
--
-- Run with one connection per thread (-t N -c N); latency is per call (the whole stream),
-- timed here as in tools_call.lua.
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
  session_id = args[1]
  count = tonumber(args[2])
  done_marker = "sent " .. tostring(count)
  n = 0
  ok = 0
  notifications = 0
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
end

function request()
  n = n + 1
  local body = string.format(
    '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"notify","arguments":{"count":%d}}}',
    tid * 1000000000 + n, count)
  local req = wrk.format("POST", wrk.path, headers, body)
  started = now_us()
  return req
end

local function count_plain(s, needle)
  local c, i = 0, 1
  while true do
    local j = s:find(needle, i, true)
    if not j then return c end
    c = c + 1
    i = j + #needle
  end
end

function response(status, hdrs, body)
  lat[#lat + 1] = now_us() - started
  local got = count_plain(body or "", "notifications/message")
  if status == 200 and got == count and body:find(done_marker, 1, true)
      and body:find('"result"', 1, true) and not body:find('"isError":true', 1, true) then
    ok = ok + 1
    notifications = notifications + got
  else
    bad = bad + 1
    if first_bad == "" then
      first_bad = tostring(status) .. " (" .. got .. " notifications) " .. string.sub(body or "", 1, 300)
    end
  end
end

local function jstr(s)
  return '"' .. s:gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('\n', '\\n'):gsub('\r', '\\r') .. '"'
end

function done(summary, latency, requests)
  local tok, tn, tbad, fb = 0, 0, 0, ""
  local all = {}
  for _, t in ipairs(threads) do
    tok = tok + t:get("ok")
    tn = tn + t:get("notifications")
    tbad = tbad + t:get("bad")
    local b = t:get("first_bad")
    if fb == "" and b ~= nil then fb = b end
    for _, v in ipairs(t:get("lat")) do all[#all + 1] = v end
  end
  table.sort(all)
  local count_, sum = #all, 0
  for _, v in ipairs(all) do sum = sum + v end
  local function pct(p)
    if count_ == 0 then return 0 end
    local i = math.ceil(p / 100 * count_)
    if i < 1 then i = 1 end
    return all[i]
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"ok":%d,"notifications":%d,"bad":%d,"first_bad":%s,"requests":%d,"duration_us":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"lat_us":{"n":%d,"p50":%.1f,"p90":%.1f,"p99":%.1f,"max":%.1f,"mean":%.1f}}\n',
    tok, tn, tbad, jstr(fb), summary.requests, summary.duration,
    e.connect, e.read, e.write, e.status, e.timeout,
    count_, pct(50), pct(90), pct(99), count_ > 0 and all[count_] or 0, count_ > 0 and sum / count_ or 0))
end
