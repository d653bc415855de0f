-- wrk script for examples/http_payments: one scenario per run, named by the first argument.
--
--   wrk -t2 -c32 -d10s -s scripts/lib/http_load.lua http://127.0.0.1:PORT -- SCENARIO RUN [BURST]
--
-- health      GET /health
-- fresh       POST /payments, a new Idempotency-Key for every request
-- replay      POST /payments with the key "replay-RUN" (send it once before the run)
-- mix         nine replays of "replay-RUN", then one fresh key, over and over
-- duplicates  every BURST requests of a thread share one new key: the thread's connections send
--             it together, so the first runs and the others meet it in flight (409) or replay it
--
-- RUN makes the keys of one run unique on a database that outlives it. done() prints one JSON
-- line: requests, seconds, requests per second, socket errors, non-2xx answers, latency
-- percentiles in microseconds and, when HTTP_LOAD_STATUSES=1 is set, how many answers had each
-- status (wrk then parses every answer, which costs it CPU: set it where several are expected).

local threads = {}

function setup(thread)
  thread:set("thread_id", #threads + 1)
  table.insert(threads, thread)
end

local body = '{"amount":1250,"currency":"EUR"}'

function init(args)
  scenario = args[1] or "health"
  run = args[2] or tostring(os.time())
  burst = tonumber(args[3] or "1")
  sent = 0
  statuses = {}
  health = wrk.format("GET", "/health")
  replay = post("replay-" .. run)
end

function post(key)
  return wrk.format("POST", "/payments", {
    ["Authorization"] = "Bearer bench",
    ["Idempotency-Key"] = key,
    ["Content-Type"] = "application/json",
  }, body)
end

local function fresh()
  return post(run .. "-" .. thread_id .. "-" .. sent)
end

function request()
  sent = sent + 1
  if scenario == "health" then
    return health
  elseif scenario == "fresh" then
    return fresh()
  elseif scenario == "replay" then
    return replay
  elseif scenario == "mix" then
    if sent % 10 == 0 then return fresh() end
    return replay
  elseif scenario == "duplicates" then
    return post("dup-" .. run .. "-" .. thread_id .. "-" .. math.floor(sent / burst))
  end
  error("unknown scenario " .. scenario)
end

if os.getenv("HTTP_LOAD_STATUSES") == "1" then
  function response(status)
    statuses[status] = (statuses[status] or 0) + 1
  end
end

function done(summary, latency, requests)
  local counts = {}
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("statuses")) do
      counts[status] = (counts[status] or 0) + n
    end
  end
  local parts = {}
  for status, n in pairs(counts) do
    table.insert(parts, string.format('"%d": %d', status, n))
  end
  local seconds = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "seconds": %.3f, "rps": %.1f, ' ..
    '"socket_errors": %d, "non_2xx": %d, ' ..
    '"latency_us": {"p50": %d, "p90": %d, "p99": %d, "max": %d, "mean": %.1f}, ' ..
    '"statuses": {%s}}\n',
    summary.requests, seconds, summary.requests / seconds,
    e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    latency.mean, table.concat(parts, ", ")))
end
