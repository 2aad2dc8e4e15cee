-- tools/call load on one pre-made session.
-- Arguments after "--": <session-id> <token>. The token is echoed back, so a 200 that does
-- not contain it (or that carries a JSON-RPC error) counts as a bad answer, not a figure.
local threads = {}
local next_tid = 1

function setup(thread)
  thread:set("tid", next_tid)
  next_tid = next_tid + 1
  table.insert(threads, thread)
end

function init(args)
  session_id = args[1]
  token = args[2]
  n = 0
  ok = 0
  bad = 0
  first_bad = ""
  headers = {
    ["Accept"] = "application/json, text/event-stream",
    ["Content-Type"] = "application/json",
    ["Mcp-Session-Id"] = session_id,
    ["MCP-Protocol-Version"] = "2025-11-25",
  }
end

function request()
  n = n + 1
  -- Unique ids: servers may reject an id that is still in flight on the same session.
  local body = string.format(
    '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"%s"}}}',
    tid * 1000000000 + n, token)
  return wrk.format("POST", wrk.path, headers, body)
end

function response(status, hdrs, body)
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
  for _, t in ipairs(threads) do
    tok = tok + t:get("ok")
    tbad = tbad + t:get("bad")
    local b = t:get("first_bad")
    if fb == "" and b ~= nil then fb = b end
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"ok":%d,"bad":%d,"first_bad":%s,"requests":%d,"duration_us":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"lat_us":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f}}\n',
    tok, tbad, jstr(fb), summary.requests, summary.duration,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
