-- wrk script: POST /orders/<id>/pay, every request with its own
-- Idempotency-Key (also sent as X-Request-ID, so the audit trail's
-- correlation id names the key). Configured by the environment:
--   WRK_MODE   hot  -- every request to order WRK_FIRST
--              many -- a random order in WRK_FIRST .. WRK_FIRST+WRK_COUNT-1
--   WRK_FIRST, WRK_COUNT, WRK_PREFIX (key prefix, unique per run)
--   WRK_OUT    the summary JSON is written there; the keys answered 2xx
--              to WRK_OUT .. ".keys", one "<order id> <key>" line each (both
--              echoed in the body: "id", "key")
local threads = {}

function setup(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  mode = os.getenv("WRK_MODE") or "many"
  first = tonumber(os.getenv("WRK_FIRST") or "1")
  count = tonumber(os.getenv("WRK_COUNT") or "1")
  prefix = os.getenv("WRK_PREFIX") or "k"
  counter = 0
  statuses = {}
  problems = {}
  okkeys = {}
  math.randomseed(tid * 7919 + os.time())
  body = '{"amount_cents": 1250}'
end

function request()
  counter = counter + 1
  local key = prefix .. "-" .. tid .. "-" .. counter
  local id = first
  if mode ~= "hot" then id = first + math.random(0, count - 1) end
  return wrk.format("POST", "/orders/" .. id .. "/pay", {
    ["Idempotency-Key"] = key,
    ["X-Request-ID"] = key,
    ["Content-Type"] = "application/json",
  }, body)
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  if status >= 200 and status < 300 then
    okkeys[#okkeys + 1] = (body:match('"id": (%d+)') or "?") .. " " ..
      (body:match('"key": "([^"]+)"') or "?")
  else
    local t = status .. ":" .. (body:match('/problems/([%w%-]+)') or "?")
    problems[t] = (problems[t] or 0) + 1
  end
end

local function kv(tbl)
  local parts = {}
  for k, v in pairs(tbl) do parts[#parts + 1] = string.format('"%s": %d', k, v) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

function done(summary, latency, requests)
  local out = os.getenv("WRK_OUT")
  local st, pr = {}, {}
  local kf = io.open(out .. ".keys", "w")
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("statuses")) do st[k] = (st[k] or 0) + v end
    for k, v in pairs(t:get("problems")) do pr[k] = (pr[k] or 0) + v end
    for _, k in ipairs(t:get("okkeys")) do kf:write(k, "\n") end
  end
  kf:close()
  local pct = {}
  for _, p in ipairs({50, 75, 90, 99, 99.9}) do
    pct[#pct + 1] = string.format('"%s": %d', p, latency:percentile(p))
  end
  local e = summary.errors
  local f = io.open(out, "w")
  f:write(string.format(
    '{"requests": %d, "duration_us": %d, "bytes": %d, ' ..
    '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, ' ..
    '"latency_us": {"min": %d, "mean": %.1f, "stdev": %.1f, "max": %d, "percentiles": {%s}}, ' ..
    '"statuses": %s, "problems": %s}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.mean, latency.stdev, latency.max, table.concat(pct, ", "),
    kv(st), kv(pr)))
  f:close()
end
