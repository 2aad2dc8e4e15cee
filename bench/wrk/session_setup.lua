-- Session set-up: initialize, then notifications/initialized on the new session, repeated.
-- Run with one connection per thread (-t N -c N) so that request and response alternate
-- strictly and the per-thread state machine below is exact.
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  state = "init"
  session_id = nil
  sessions = 0
  bad = 0
  first_bad = ""
  init_body = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",' ..
    '"capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}'
  notif_body = '{"jsonrpc":"2.0","method":"notifications/initialized"}'
  init_headers = {
    ["Accept"] = "application/json, text/event-stream",
    ["Content-Type"] = "application/json",
  }
end

function request()
  if state == "init" then
    return wrk.format("POST", wrk.path, init_headers, init_body)
  end
  local h = {
    ["Accept"] = "application/json, text/event-stream",
    ["Content-Type"] = "application/json",
    ["Mcp-Session-Id"] = session_id,
    ["MCP-Protocol-Version"] = "2025-11-25",
  }
  return wrk.format("POST", wrk.path, h, notif_body)
end

local function note_bad(status, body)
  bad = bad + 1
  if first_bad == "" then
    first_bad = state .. ": " .. tostring(status) .. " " .. string.sub(body or "", 1, 300)
  end
end

function response(status, hdrs, body)
  if state == "init" then
    local sid = nil
    for k, v in pairs(hdrs) do
      if string.lower(k) == "mcp-session-id" then sid = v end
    end
    if status == 200 and sid and body:find('"protocolVersion"', 1, true) then
      session_id = sid
      state = "notif"
    else
      note_bad(status, body)
    end
  else
    if status == 202 or status == 200 then
      sessions = sessions + 1
    else
      note_bad(status, body)
    end
    state = "init"
  end
end

local function jstr(s)
  return '"' .. s:gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('\n', '\\n'):gsub('\r', '\\r') .. '"'
end

function done(summary, latency, requests)
  local ts, tbad, fb = 0, 0, ""
  for _, t in ipairs(threads) do
    ts = ts + t:get("sessions")
    tbad = tbad + t:get("bad")
    local b = t:get("first_bad")
    if fb == "" and b ~= nil then fb = b end
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"sessions":%d,"bad":%d,"first_bad":%s,"requests":%d,"duration_us":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"lat_us":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f}}\n',
    ts, tbad, jstr(fb), summary.requests, summary.duration,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
