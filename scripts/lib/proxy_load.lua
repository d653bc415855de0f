-- wrk script for scripts/bench --proxy: POST /payments through idem-proxy, or straight to the
-- upstream (which ignores the key), one scenario per run, named by the first argument.
--
--   wrk -t2 -c32 -d10s -s scripts/lib/proxy_load.lua http://127.0.0.1:PORT -- SCENARIO RUN KEYS
--
-- replay  each thread cycles over KEYS keys of its own ("replay-RUN-THREAD-I"), as many as it has
--         connections: about one key per connection, each sent again and again (the first
--         request of each key is its one forward)
-- fresh   a new key for every request ("fresh-RUN-THREAD-N")
--
-- RUN makes the keys of one run unique on a store that outlives it. done() prints one JSON line:
-- requests, seconds, requests per second, socket errors, non-2xx answers, latency percentiles in
-- microseconds and how many answers had each status.

local threads = {}

function setup(thread)
  thread:set("thread_id", #threads + 1)
  table.insert(threads, thread)
end

local body = '{"amount":1250,"currency":"EUR"}'

function init(args)
  scenario = args[1] or "replay"
  run = args[2] or tostring(os.time())
  keys = tonumber(args[3] or "1")
  sent = 0
  statuses = {}
  replays = {}
  for i = 1, keys do
    replays[i] = post("replay-" .. run .. "-" .. thread_id .. "-" .. i)
  end
end

function post(key)
  return wrk.format("POST", "/payments", {
    ["Idempotency-Key"] = '"' .. key .. '"',
    ["Content-Type"] = "application/json",
  }, body)
end

function request()
  sent = sent + 1
  if scenario == "replay" then
    return replays[(sent - 1) % keys + 1]
  elseif scenario == "fresh" then
    return post("fresh-" .. run .. "-" .. thread_id .. "-" .. sent)
  end
  error("unknown scenario " .. scenario)
end

function response(status)
  statuses[status] = (statuses[status] or 0) + 1
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
