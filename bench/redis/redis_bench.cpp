// The Redis stores through their guards, each beside a bare hiredis twin that sends the same
// commands (the same EVALSHA scripts with the same keys and arguments, or the same SET) on a
// connection of its own per thread, in the same binary and run. Guarded ops/s divided by bare
// ops/s is what idem costs on top of the round trips (docs/design.md §14). Figures:
// docs/performance.md.
//
//   IDEM_BENCH_REDIS_URI=redis://127.0.0.1:6379 build/bench/idem_bench_redis
//   IDEM_BENCH_REDIS_URI='rediss://127.0.0.1:6380?ca_file=ca.crt' build/bench/idem_bench_redis
//
// Over TLS (rediss://) both sides speak TLS: the guarded side through the client, the bare twin
// through an OpenSSL session of its own per connection (bare_connection.hpp); the storm benchmarks,
// whose bare twin pipelines on hiredis, run over plain connections only.
//   IDEM_BENCH_REDIS_CLUSTER_SEEDS=127.0.0.1:7000,127.0.0.1:7001 build/bench/idem_bench_redis
//
// With IDEM_BENCH_REDIS_CLUSTER_SEEDS (Redis Cluster mode) the guarded side uses a cluster
// client, and the bare twin sends each command to the primary of its key's slot (the slot map is
// read once; nothing moves during a run).
//
// The guarded side's client pipelines concurrent calls over a few shared connections (the
// default); IDEM_BENCH_REDIS_PIPELINE=N sets ConnectionOptions::pipeline_connections, and 0
// makes each call borrow a pooled connection of its own instead. The bare twin does the same
// over the same kind of connections: while the client pipelines, its calls share as many
// connections of the twin's own, pipelined (bare_pipeline.hpp); with 0, each thread has a
// connection of its own. (A pipelined guard against a connection per thread would compare
// pipelining with its absence, not idem with the bare round trips.) Commands the client sends
// through its pool even while it pipelines (token issue's SET, the storm's waits) take the
// twin's connection per thread.
//
// Without either variable it prints one line and exits 0.

#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bare_connection.hpp"
#include "bare_pipeline.hpp"
#include "idem/cached_store.hpp"
#include "idem/engine/effective_key.hpp"
#include "idem/guard.hpp"
#include "idem/redis/request_id_cache.hpp"
#include "idem/redis/store.hpp"
#include "idem/redis/token_store.hpp"
#include "latency.hpp"
#include "lua_scripts.hpp"   // the embedded scripts, so the bare twin sends the same bytes
#include "store_common.hpp"  // tagged_key, fingerprint_bytes: the same key names and arguments

namespace {

using namespace std::chrono_literals;

constexpr std::string_view kPayload = "card=4242424242424242&amount=1999&currency=EUR";
constexpr std::string_view kResult = "receipt:ch_0000000042:EUR";
constexpr std::chrono::milliseconds kLease = 30s;
constexpr std::chrono::milliseconds kTtl = 10min;  // short enough not to leave much behind
constexpr int kReplayKeys = 256;

std::string handler() { return std::string(kResult); }

idem::redis::ConnectionOptions g_options;
std::string g_run;  // a prefix unique to this run

// Cluster mode: the seeds, the primaries (host, port), and each slot's primary (an index).
std::vector<std::string> g_cluster_seeds;
std::vector<std::pair<std::string, int>> g_primaries;
std::vector<std::size_t> g_slot_owner;

// ---- Guarded side: one client shared by the stores, its pool large enough for 32 threads ----

struct Guarded {
  std::shared_ptr<idem::redis::Client> client;
  idem::RedisStore store;
  idem::IdempotencyGuard<idem::RedisStore> guard;
  idem::RedisTokenStore tokens;
  idem::RequestIdCache cache;

  Guarded()
      : client(g_cluster_seeds.empty()
                   ? std::make_shared<idem::redis::Client>(g_options)
                   : std::make_shared<idem::redis::Client>(
                         idem::redis::ClusterOptions{.seeds = g_cluster_seeds, .node = g_options})),
        store(client, idem::RedisStoreOptions{.prefix = g_run + "g:rec:"}),
        guard(store, idem::Options{.scope = "bench", .lease = kLease, .ttl = kTtl}),
        tokens(client,
               idem::RedisTokenStoreOptions{
                   .prefix = g_run + "g:tok:",
                   .guard = idem::Options{.scope = "bench", .lease = kLease, .ttl = kTtl}}),
        cache(client,
              idem::RequestIdCacheOptions{
                  .prefix = g_run + "g:req:",
                  .guard = idem::Options{.scope = "bench", .lease = kLease, .ttl = kTtl}}) {}
};
Guarded& guarded() {
  static Guarded g;
  return g;
}

// ---- Bare side: a hiredis connection per thread, the same commands ---------------------------

struct ReplyFree {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

// One connection per thread and server: the server, or in cluster mode the primary `node`.
redisContext* bare_connection(std::size_t node) {
  using Owned = std::unique_ptr<redisContext, void (*)(redisContext*)>;
  thread_local std::vector<Owned> connections;
  while (connections.size() <= node) connections.emplace_back(nullptr, redisFree);
  Owned& c = connections[node];
  if (!c) {
    const bool cluster = !g_primaries.empty();
    c.reset(redisConnect(cluster ? g_primaries[node].first.c_str() : g_options.host.c_str(),
                         cluster ? g_primaries[node].second : g_options.port));
    if (c == nullptr || c->err != 0) {
      std::fprintf(stderr, "bare twin: cannot connect\n");
      std::abort();
    }
  }
  return c.get();
}

// In cluster mode, the primary that serves the command's key (EVALSHA's first key, SET's key).
std::size_t bare_node(std::initializer_list<std::string_view> argv) {
  if (g_primaries.empty() || argv.size() < 2) return 0;
  const std::string_view* a = argv.begin();
  const std::string_view key = a[0] == "EVALSHA" && argv.size() > 3 ? a[3] : a[1];
  return g_slot_owner[idem::redis::key_slot(key)];
}

// Over TLS (a rediss:// URI): one connection per thread and server, its own TLS session.
idem_bench::BareConnection& bare_tls_connection(std::size_t node) {
  thread_local std::vector<std::unique_ptr<idem_bench::BareConnection>> connections;
  while (connections.size() <= node) connections.emplace_back();
  auto& c = connections[node];
  if (!c) {
    const bool cluster = !g_primaries.empty();
    c = std::make_unique<idem_bench::BareConnection>(
        cluster ? g_primaries[node].first : g_options.host,
        cluster ? g_primaries[node].second : g_options.port, g_options.tls);
  }
  return *c;
}

// While the client pipelines: the twin's shared connections to each server (as many as the
// client's pipeline_connections), plain or TLS as the client's.
idem_bench::BarePipeline& bare_pipeline(std::size_t node) {
  static std::mutex mutex;
  static std::vector<std::unique_ptr<idem_bench::BarePipeline>> pipelines;
  std::lock_guard lock(mutex);
  while (pipelines.size() <= node) pipelines.emplace_back();
  auto& p = pipelines[node];
  if (!p) {
    const bool cluster = !g_primaries.empty();
    p = std::make_unique<idem_bench::BarePipeline>(
        g_options.pipeline_connections, cluster ? g_primaries[node].first : g_options.host,
        cluster ? g_primaries[node].second : g_options.port, g_options.tls);
  }
  return *p;
}

// Where a bare command goes: as the client's script calls (pipelined while the client
// pipelines), or on the thread's own connection, as the client's pooled commands (token issue's
// SET NX PX).
enum class Path : std::uint8_t { scripts, own };

Reply bare_command(std::initializer_list<std::string_view> argv, std::size_t node,
                   Path path = Path::scripts) {
  std::array<const char*, 12> args{};
  std::array<std::size_t, 12> lens{};
  std::size_t n = 0;
  for (std::string_view a : argv) {
    args[n] = a.data();
    lens[n++] = a.size();
  }
  const int argc = static_cast<int>(n);
  Reply r(g_options.pipeline_connections > 0 && path == Path::scripts
              ? bare_pipeline(node).command(argc, args.data(), lens.data())
          : g_options.tls.enabled
              ? bare_tls_connection(node).command(argc, args.data(), lens.data())
              : static_cast<redisReply*>(
                    redisCommandArgv(bare_connection(node), argc, args.data(), lens.data())));
  if (!r || r->type == REDIS_REPLY_ERROR) {
    std::fprintf(stderr, "bare twin: %s\n", r ? r->str : "connection failed");
    std::abort();
  }
  return r;
}
Reply bare_command(std::initializer_list<std::string_view> argv) {
  return bare_command(argv, bare_node(argv));
}

// The scripts are in the server's cache once the guarded side or load_scripts() ran.
void load_scripts() {
  for (const idem::redis::Script* s :
       {&idem::redis::script_record_claim, &idem::redis::script_record_commit,
        &idem::redis::script_token_claim, &idem::redis::script_cache_claim,
        &idem::redis::script_cache_commit}) {
    for (std::size_t node = 0; node < std::max<std::size_t>(g_primaries.size(), 1); ++node) {
      (void)bare_command({"SCRIPT", "LOAD", s->source}, node);
    }
  }
}

// Cluster mode: reads the slot map once, from the first seed.
bool read_slot_map() {
  g_slot_owner.assign(16384, 0);
  const auto seed = idem::redis::ConnectionOptions::from_uri("redis://" + g_cluster_seeds[0]);
  if (!seed) return false;
  idem::redis::Client client(seed.value());
  auto slots = client.command({"CLUSTER", "SLOTS"});
  if (!slots || slots->type != idem::redis::Reply::Type::array) return false;
  for (const idem::redis::Reply& range : slots->elements) {
    const idem::redis::Reply& primary = range.elements.at(2);
    std::pair<std::string, int> address{primary.elements.at(0).str,
                                        static_cast<int>(primary.elements.at(1).integer)};
    if (address.first.empty()) address.first = seed->host;
    auto it = std::find(g_primaries.begin(), g_primaries.end(), address);
    if (it == g_primaries.end()) it = g_primaries.insert(g_primaries.end(), address);
    const auto owner = static_cast<std::size_t>(it - g_primaries.begin());
    for (long long slot = range.elements.at(0).integer; slot <= range.elements.at(1).integer;
         ++slot) {
      g_slot_owner[static_cast<std::size_t>(slot)] = owner;
    }
  }
  return !g_primaries.empty();
}

long long integer_at(const redisReply& r, std::size_t i) {
  return r.type == REDIS_REPLY_ARRAY && r.elements > i ? r.element[i]->integer : -1;
}

// ---- Keys -------------------------------------------------------------------------------------

// Never-seen ids "<side>-<counter>", cheap on both sides. The counter is global because the
// benchmark library calls each function several times (and on new threads) per run.
std::atomic<std::uint64_t> g_next_id{0};

class Ids {
 public:
  Ids(std::string_view side, int /*thread*/) : prefix_(std::string(side) + "-") {}
  std::string_view next() {
    buf_ = prefix_;
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits,
                                   g_next_id.fetch_add(1, std::memory_order_relaxed))
                         .ptr;
    buf_.append(digits, end);
    return buf_;
  }

 private:
  std::string prefix_, buf_;
};

std::string effective(std::string_view id, std::string_view principal = {}) {
  const idem::detail::EffectiveKey k("bench", principal, id);
  return std::string(k.view());
}

idem::redis::DecimalText g_lease, g_ttl;
std::string_view lease_text() { return idem::redis::ms_text(g_lease, kLease); }
std::string_view ttl_text() { return idem::redis::ms_text(g_ttl, kTtl); }

// Bare record claim + commit: what RedisStore sends for a fresh key.
void bare_record(std::string_view prefix, std::string_view id, bool commit) {
  const std::string key = idem::redis::tagged_key(prefix, effective(id));
  const auto fp = idem::redis::fingerprint_bytes(idem::xxh3_128(kPayload));
  Reply claim = bare_command({"EVALSHA", idem::redis::script_record_claim.sha, "1", key,
                              std::string_view(fp.data(), fp.size()), lease_text(), ttl_text()});
  if (!commit || integer_at(*claim, 0) != 0) return;  // set-up runs again: already there
  idem::redis::DecimalText fence;
  const std::string result = handler();
  (void)bare_command({"EVALSHA", idem::redis::script_record_commit.sha, "1", key,
                      idem::redis::to_chars(fence, integer_at(*claim, 1)), "C", result,
                      ttl_text()});
}

// ---- Record store -----------------------------------------------------------------------------

void BM_Redis_Record_Fresh(benchmark::State& state) {
  Ids ids("rf", state.thread_index());
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out = guarded().guard.execute(ids.next(), kPayload, handler);
    if (!out.recorded()) {
      state.SkipWithError((out.message() + out.commit_failure().describe()).c_str());
      break;
    }
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}
void BM_Redis_Record_Fresh_bare(benchmark::State& state) {
  Ids ids("rf", state.thread_index());
  const std::string prefix = g_run + "b:rec:";
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    bare_record(prefix, ids.next(), true);
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}

std::string replay_id(int i) { return "replay-" + std::to_string(i); }

// Replay keys are written once, by whichever thread gets there first, before any thread times.
std::once_flag g_record_replay_guarded, g_record_replay_bare, g_cache_replay_guarded,
    g_cache_replay_bare;

void write_guarded_replays() {
  std::call_once(g_record_replay_guarded, [] {
    for (int i = 0; i < kReplayKeys; ++i) {
      (void)guarded().guard.execute(replay_id(i), kPayload, handler);
    }
  });
}

void BM_Redis_Record_Replay(benchmark::State& state) {
  write_guarded_replays();
  std::vector<std::string> keys;
  for (int i = 0; i < kReplayKeys; ++i) keys.push_back(replay_id(i));
  std::size_t i = static_cast<std::size_t>(state.thread_index());
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out = guarded().guard.execute(keys[i++ % keys.size()], kPayload, handler);
    if (!out.replayed()) state.SkipWithError("not a replay");
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}
void BM_Redis_Record_Replay_bare(benchmark::State& state) {
  const std::string prefix = g_run + "b:rec:";
  std::call_once(g_record_replay_bare, [&] {
    for (int i = 0; i < kReplayKeys; ++i) bare_record(prefix, replay_id(i), true);
  });
  std::vector<std::string> keys;
  for (int i = 0; i < kReplayKeys; ++i) keys.push_back(replay_id(i));
  std::size_t i = static_cast<std::size_t>(state.thread_index());
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    bare_record(prefix, keys[i++ % keys.size()], false);
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}

// BM_Redis_Record_Replay through CachedStore. The records were written without it, so in an
// untimed first pass each key's replay is a round trip whose PTTL fills the cache; the timed
// calls are hits (hit_rate).
using CachedRedis = idem::CachedStore<idem::RedisStore&>;
CachedRedis& cached_store() {
  static CachedRedis s{idem::CachedStoreOptions{}, guarded().store};
  return s;
}

void BM_Redis_Cached_Replay(benchmark::State& state) {
  write_guarded_replays();
  static idem::IdempotencyGuard<CachedRedis> guard{
      cached_store(), idem::Options{.scope = "bench", .lease = kLease, .ttl = kTtl}};
  std::vector<std::string> keys;
  for (int i = 0; i < kReplayKeys; ++i) keys.push_back(replay_id(i));
  static std::once_flag warm;
  std::call_once(warm, [&] {
    for (const std::string& key : keys) (void)guard.execute(key, kPayload, handler);
  });
  const std::uint64_t hits_before = cached_store().hits();
  std::size_t i = static_cast<std::size_t>(state.thread_index());
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out = guard.execute(keys[i++ % keys.size()], kPayload, handler);
    if (!out.replayed()) state.SkipWithError("not a replay");
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    state.counters["hit_rate"] =
        benchmark::Counter(static_cast<double>(cached_store().hits() - hits_before),
                           benchmark::Counter::kAvgIterations);
  }
}

// ---- Token store: issue + consume, and a repeat of a consumed token ---------------------------

void BM_Redis_Token_IssueConsume(benchmark::State& state) {
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto token = guarded().tokens.issue(kTtl);
    auto out = guarded().tokens.execute(token.value(), kPayload, handler);
    if (!out.recorded()) {
      state.SkipWithError((out.message() + out.commit_failure().describe()).c_str());
      break;
    }
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}
void BM_Redis_Token_IssueConsume_bare(benchmark::State& state) {
  const std::string prefix = g_run + "b:tok:";
  const auto fp = idem::redis::fingerprint_bytes(idem::xxh3_128(kPayload));
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto token = idem::detail::random_token();  // the same CSPRNG draw
    const std::string key = idem::redis::tagged_key(prefix, effective(token.value()));
    const std::initializer_list<std::string_view> set{"SET", key, "T", "NX", "PX", ttl_text()};
    (void)bare_command(set, bare_node(set), Path::own);
    Reply claim = bare_command({"EVALSHA", idem::redis::script_token_claim.sha, "1", key,
                                std::string_view(fp.data(), fp.size()), lease_text(), ttl_text()});
    if (integer_at(*claim, 0) != 0) std::abort();
    idem::redis::DecimalText fence;
    const std::string result = handler();
    (void)bare_command({"EVALSHA", idem::redis::script_record_commit.sha, "1", key,
                        idem::redis::to_chars(fence, integer_at(*claim, 1)), "C", result,
                        ttl_text()});
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}

std::vector<std::string> g_tokens;  // consumed tokens for the replay pair
std::mutex g_tokens_mutex;

// Issued and consumed once, before either twin of the replay pair runs (in any order).
const std::vector<std::string>& replay_tokens() {
  std::lock_guard lock(g_tokens_mutex);
  if (g_tokens.empty()) {
    for (int i = 0; i < kReplayKeys; ++i) {
      g_tokens.push_back(guarded().tokens.issue(kTtl).value());
      (void)guarded().tokens.execute(g_tokens.back(), kPayload, handler);
    }
  }
  return g_tokens;
}

void BM_Redis_Token_Replay(benchmark::State& state) {
  const std::vector<std::string>& tokens = replay_tokens();
  std::size_t i = static_cast<std::size_t>(state.thread_index());
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out = guarded().tokens.execute(tokens[i++ % tokens.size()], kPayload, handler);
    if (!out.replayed()) state.SkipWithError("not a replay");
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}
void BM_Redis_Token_Replay_bare(benchmark::State& state) {
  std::vector<std::string> keys;
  for (const std::string& t : replay_tokens()) keys.push_back(guarded().tokens.token_key(t));
  const auto fp = idem::redis::fingerprint_bytes(idem::xxh3_128(kPayload));
  std::size_t i = static_cast<std::size_t>(state.thread_index());
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    Reply claim =
        bare_command({"EVALSHA", idem::redis::script_token_claim.sha, "1", keys[i++ % keys.size()],
                      std::string_view(fp.data(), fp.size()), lease_text(), ttl_text()});
    if (integer_at(*claim, 0) != 1) std::abort();
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}

// ---- Request-ID cache -------------------------------------------------------------------------

// Bare cache claim (+ commit): the marker and arguments RequestIdCache sends.
void bare_cache(std::string_view prefix, std::string_view id, std::uint64_t holder, bool commit) {
  const std::string key = idem::redis::tagged_key(prefix, effective(id, "tenant"));
  const auto fp = idem::redis::fingerprint_bytes(idem::xxh3_128(kPayload));
  std::array<char, 25> marker{};
  marker[0] = 'P';
  for (int b = 0; b < 8; ++b) marker[1 + b] = static_cast<char>(holder >> (56 - 8 * b));
  std::memcpy(marker.data() + 9, fp.data(), fp.size());
  Reply claim = bare_command({"EVALSHA", idem::redis::script_cache_claim.sha, "1", key,
                              std::string_view(marker.data(), marker.size()), lease_text()});
  if (!commit) return;
  const std::string result = handler();
  (void)bare_command({"EVALSHA", idem::redis::script_cache_commit.sha, "1", key,
                      std::string_view(marker.data(), 9), "C", result, ttl_text()});
}

void BM_Redis_RequestId_Fresh(benchmark::State& state) {
  Ids ids("qf", state.thread_index());
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out = guarded().cache.execute(idem::Key{ids.next(), "tenant"}, kPayload, handler);
    if (!out.recorded()) {
      state.SkipWithError((out.message() + out.commit_failure().describe()).c_str());
      break;
    }
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}
void BM_Redis_RequestId_Fresh_bare(benchmark::State& state) {
  Ids ids("qf", state.thread_index());
  const std::string prefix = g_run + "b:req:";
  std::uint64_t holder = static_cast<std::uint64_t>(state.thread_index()) << 40;
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    bare_cache(prefix, ids.next(), ++holder, true);
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}

void BM_Redis_RequestId_Replay(benchmark::State& state) {
  std::call_once(g_cache_replay_guarded, [] {
    for (int i = 0; i < kReplayKeys; ++i) {
      (void)guarded().cache.execute(idem::Key{replay_id(i), "tenant"}, kPayload, handler);
    }
  });
  std::vector<std::string> ids;
  for (int i = 0; i < kReplayKeys; ++i) ids.push_back(replay_id(i));
  std::size_t i = static_cast<std::size_t>(state.thread_index());
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out =
        guarded().cache.execute(idem::Key{ids[i++ % ids.size()], "tenant"}, kPayload, handler);
    if (!out.replayed()) state.SkipWithError("not a replay");
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}
void BM_Redis_RequestId_Replay_bare(benchmark::State& state) {
  const std::string prefix = g_run + "b:req:";
  std::call_once(g_cache_replay_bare, [&] {
    for (int i = 0; i < kReplayKeys; ++i) bare_cache(prefix, replay_id(i), 1000 + i, true);
  });
  std::vector<std::string> ids;
  for (int i = 0; i < kReplayKeys; ++i) ids.push_back(replay_id(i));
  std::size_t i = static_cast<std::size_t>(state.thread_index());
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    bare_cache(prefix, ids[i++ % ids.size()], 1, false);
  }
  latency.report(state);
  state.SetItemsProcessed(state.iterations());
}

#define IDEM_REDIS_BENCH(fn) \
  BENCHMARK(fn)->Threads(1)->Threads(2)->Threads(8)->Threads(32)->UseRealTime()
IDEM_REDIS_BENCH(BM_Redis_Record_Fresh);
IDEM_REDIS_BENCH(BM_Redis_Record_Fresh_bare);
IDEM_REDIS_BENCH(BM_Redis_Record_Replay);
IDEM_REDIS_BENCH(BM_Redis_Record_Replay_bare);
IDEM_REDIS_BENCH(BM_Redis_Cached_Replay);  // compare with BM_Redis_Record_Replay
IDEM_REDIS_BENCH(BM_Redis_Token_IssueConsume);
IDEM_REDIS_BENCH(BM_Redis_Token_IssueConsume_bare);
IDEM_REDIS_BENCH(BM_Redis_Token_Replay);
IDEM_REDIS_BENCH(BM_Redis_Token_Replay_bare);
IDEM_REDIS_BENCH(BM_Redis_RequestId_Fresh);
IDEM_REDIS_BENCH(BM_Redis_RequestId_Fresh_bare);
IDEM_REDIS_BENCH(BM_Redis_RequestId_Replay);
IDEM_REDIS_BENCH(BM_Redis_RequestId_Replay_bare);

// ---- Paired: guarded and bare calls alternate in one loop ------------------------------------
// On a shared machine the load drifts between two separate benchmarks; alternating the twins
// call by call exposes both to the same load. Counters: guard_us and bare_us (mean wall time
// per call) and ratio = guard_us / bare_us (>= 1: what idem adds per call), averaged over the
// threads. With several threads the guarded calls of all threads share the client (pipelined by
// default) while each thread's bare calls have a connection of their own. guard_sleeps and
// bare_sleeps count the thread's voluntary context switches per call (getrusage, outside the
// timed calls): a blocking call sleeps once per round trip; a pipelined call that sleeps more
// often waited for another thread as well as for the server.

// Context switches of the calling thread so far: voluntary (it slept: a blocking read, a futex
// wait) and involuntary (preempted).
struct Switches {
  long slept = 0, preempted = 0;
  static Switches now() {
    rusage r{};
    getrusage(RUSAGE_THREAD, &r);
    return {r.ru_nvcsw, r.ru_nivcsw};
  }
};

template <class Guarded, class Bare>
void paired(benchmark::State& state, Guarded&& guarded_call, Bare&& bare_call) {
  using Steady = std::chrono::steady_clock;
  Steady::duration guard_time{}, bare_time{};
  long guard_slept = 0, guard_preempted = 0, bare_slept = 0, bare_preempted = 0;
  for (auto _ : state) {
    const Switches s0 = Switches::now();
    const auto t0 = Steady::now();
    guarded_call();
    const auto t1 = Steady::now();
    const Switches s1 = Switches::now();
    const auto t2 = Steady::now();
    bare_call();
    const auto t3 = Steady::now();
    const Switches s2 = Switches::now();
    guard_time += t1 - t0;
    bare_time += t3 - t2;
    guard_slept += s1.slept - s0.slept;
    guard_preempted += s1.preempted - s0.preempted;
    bare_slept += s2.slept - s1.slept;
    bare_preempted += s2.preempted - s1.preempted;
  }
  const double n = static_cast<double>(state.iterations());
  const double g = std::chrono::duration<double, std::micro>(guard_time).count() / n;
  const double b = std::chrono::duration<double, std::micro>(bare_time).count() / n;
  const auto avg = [](double v) { return benchmark::Counter(v, benchmark::Counter::kAvgThreads); };
  state.counters["guard_us"] = avg(g);
  state.counters["bare_us"] = avg(b);
  state.counters["ratio"] = avg(g / b);
  // Per call: how often the thread slept and was preempted, guarded and bare.
  state.counters["guard_sleeps"] = avg(static_cast<double>(guard_slept) / n);
  state.counters["guard_preempts"] = avg(static_cast<double>(guard_preempted) / n);
  state.counters["bare_sleeps"] = avg(static_cast<double>(bare_slept) / n);
  state.counters["bare_preempts"] = avg(static_cast<double>(bare_preempted) / n);
}

void BM_Redis_Paired_Record_Fresh(benchmark::State& state) {
  Ids guarded_ids("pf", 0), bare_ids("pf", 0);
  const std::string prefix = g_run + "b:rec:";
  paired(
      state, [&] { (void)guarded().guard.execute(guarded_ids.next(), kPayload, handler); },
      [&] { bare_record(prefix, bare_ids.next(), true); });
}
void BM_Redis_Paired_Record_Replay(benchmark::State& state) {
  std::call_once(g_record_replay_guarded, [] {
    for (int i = 0; i < kReplayKeys; ++i) {
      (void)guarded().guard.execute(replay_id(i), kPayload, handler);
    }
  });
  const std::string prefix = g_run + "b:rec:";
  std::call_once(g_record_replay_bare, [&] {
    for (int i = 0; i < kReplayKeys; ++i) bare_record(prefix, replay_id(i), true);
  });
  std::vector<std::string> keys;
  for (int i = 0; i < kReplayKeys; ++i) keys.push_back(replay_id(i));
  std::size_t i = 0, j = 0;
  paired(
      state, [&] { (void)guarded().guard.execute(keys[i++ % keys.size()], kPayload, handler); },
      [&] { bare_record(prefix, keys[j++ % keys.size()], false); });
}
void BM_Redis_Paired_RequestId_Fresh(benchmark::State& state) {
  Ids guarded_ids("pq", 0), bare_ids("pq", 0);
  const std::string prefix = g_run + "b:req:";
  std::uint64_t holder = std::uint64_t{1} << 50;
  paired(
      state,
      [&] {
        (void)guarded().cache.execute(idem::Key{guarded_ids.next(), "tenant"}, kPayload, handler);
      },
      [&] { bare_cache(prefix, bare_ids.next(), ++holder, true); });
}

IDEM_REDIS_BENCH(BM_Redis_Paired_Record_Fresh);
IDEM_REDIS_BENCH(BM_Redis_Paired_Record_Replay);
BENCHMARK(BM_Redis_Paired_RequestId_Fresh)->UseRealTime();

// ---- Duplicate storm: one holder and 31 duplicates of one key, a 5 ms handler ---------------
// Each iteration is one storm on a fresh key: the holder claims, the 31 duplicate threads claim
// (in_progress) and wait, the holder's handler runs 5 ms, then it commits; the duplicates then
// claim again and replay. The iteration's time (manual) is from the holder's commit to the last
// duplicate's answer. Counters: p50_us and max_us of that time over the storms, and calls (store
// calls per duplicate: claims and waits). The duplicates wait as the engine does:
//   _Wake: await_change for the longest pause (Wait::max_backoff, 100 ms), cut to the holder's
//          lease end (+1 ms): the store wakes them (RedisStore::await_change);
//   _Poll: sleep for Wait's doubling backoff (2 ms, 4 ms, ... up to 100 ms) between claims, as
//          the engine did before waking stores;
//   _bare: the twin: the same commands as _Wake (the claim, commit and waiter scripts and
//          BLPOP), sent by hiredis on a connection of each thread's own;
//   _floor: a wake through Redis alone: 31 BLPOPs on a plain list and one RPUSH (the round
//          trips and the scheduling of 31 threads on the machine's cores).

constexpr int kStormDuplicates = 31;
constexpr auto kStormHandler = 5ms;
constexpr idem::Wait kStormWait{};  // the policy's defaults: 2 ms doubling up to 100 ms

// 31 threads that each run `duplicate(index)` once per storm, started together by run().
class StormCrew {
 public:
  explicit StormCrew(std::function<void(int)> duplicate) : duplicate_(std::move(duplicate)) {
    for (int i = 0; i < kStormDuplicates; ++i) threads_.emplace_back([this, i] { loop(i); });
  }
  ~StormCrew() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    start_.notify_all();
    for (auto& t : threads_) t.join();
  }
  StormCrew(const StormCrew&) = delete;
  StormCrew& operator=(const StormCrew&) = delete;

  // Starts a storm; `holder` runs meanwhile; returns when every duplicate has answered.
  template <class Holder>
  void run(Holder&& holder) {
    {
      std::lock_guard lock(mutex_);
      ++generation_;
      running_ = kStormDuplicates;
    }
    start_.notify_all();
    holder();
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return running_ == 0; });
  }

 private:
  void loop(int i) {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        start_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      duplicate_(i);
      std::lock_guard lock(mutex_);
      if (--running_ == 0) done_.notify_all();
    }
  }

  std::function<void(int)> duplicate_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  std::uint64_t generation_ = 0;
  int running_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

using Steady = std::chrono::steady_clock;

// What the storms of one benchmark measured.
struct StormFigures {
  std::vector<double> commit_to_last_us;
  double calls = 0;
  std::size_t duplicates = 0;

  void report(benchmark::State& state) {
    std::sort(commit_to_last_us.begin(), commit_to_last_us.end());
    if (!commit_to_last_us.empty()) {
      state.counters["p50_us"] = commit_to_last_us[commit_to_last_us.size() / 2];
      state.counters["max_us"] = commit_to_last_us.back();
    }
    state.counters["calls"] = duplicates == 0 ? 0 : calls / static_cast<double>(duplicates);
  }
};

void guarded_storm(benchmark::State& state, bool wake) {
  static idem::RedisStore store(guarded().client,
                                idem::RedisStoreOptions{.prefix = g_run + "g:storm:"});
  static std::atomic<std::uint64_t> next_key{0};
  std::string key;
  std::vector<Steady::time_point> answered(kStormDuplicates);
  std::vector<int> calls(kStormDuplicates);
  const auto claim = [&] { return store.claim(idem::ClaimRequest{key, {7, 7}, kLease, kLease}); };
  StormCrew crew([&](int i) {
    calls[i] = 0;
    auto backoff = kStormWait.initial_backoff;
    for (;;) {
      ++calls[i];
      idem::Result<idem::Claim> c = claim();
      if (!c || c->status != idem::ClaimStatus::in_progress) break;
      const auto lease_end = c->lease_remaining + 1ms;
      if (wake) {
        ++calls[i];
        store.await_change(idem::Ticket{key, c->fence},
                           std::min(kStormWait.max_backoff, lease_end));
      } else {
        std::this_thread::sleep_for(std::min(backoff, lease_end));
        backoff = std::min(backoff * 2, kStormWait.max_backoff);
      }
    }
    answered[i] = Steady::now();
  });
  StormFigures figures;
  for (auto _ : state) {
    key = "storm-" + std::to_string(next_key++);
    idem::Result<idem::Claim> held = claim();
    if (!held || held->status != idem::ClaimStatus::acquired) {
      state.SkipWithError("the holder's claim did not acquire");
      return;
    }
    Steady::time_point committed{};
    crew.run([&] {
      std::this_thread::sleep_for(kStormHandler);
      committed = Steady::now();
      (void)store.commit(idem::Ticket{key, held->fence},
                         idem::Completion{.result = kResult, .ttl = kTtl});
    });
    const auto last = *std::max_element(answered.begin(), answered.end());
    const double us = std::chrono::duration<double, std::micro>(last - committed).count();
    state.SetIterationTime(us / 1e6);
    figures.commit_to_last_us.push_back(us);
    figures.calls += std::accumulate(calls.begin(), calls.end(), 0.0);
    figures.duplicates += kStormDuplicates;
  }
  figures.report(state);
}

void BM_Redis_Storm_Wake(benchmark::State& state) { guarded_storm(state, true); }
void BM_Redis_Storm_Poll(benchmark::State& state) { guarded_storm(state, false); }

// The bare twin's duplicate: RedisStore's commands for a woken duplicate, on this thread's own
// hiredis connection (claim; the waiter's script and BLPOP in one write; claim again). Returns
// the calls the store would count (claims and waits).
int bare_storm_duplicate(const std::string& record, std::string_view fp) {
  for (int calls = 1;; calls += 2) {
    Reply c = bare_command({"EVALSHA", idem::redis::script_record_claim.sha, "1", record, fp,
                            lease_text(), ttl_text()});
    if (integer_at(*c, 0) != 3) return calls;  // not in progress: replayed
    idem::redis::DecimalText fence;
    const std::string wake =
        idem::redis::wake_key(record, static_cast<idem::Fence>(integer_at(*c, 1)));
    const std::string_view fence_text = idem::redis::to_chars(fence, integer_at(*c, 1));
    std::array<const char*, 6> wait{"EVAL",       idem::redis::script_record_wait.source.data(),
                                    "2",          record.c_str(),
                                    wake.c_str(), fence_text.data()};
    const std::array<std::size_t, 6> wait_lens{
        4,           idem::redis::script_record_wait.source.size(),
        1,           record.size(),
        wake.size(), fence_text.size()};
    std::array<const char*, 3> pop{"BLPOP", wake.c_str(), "0.100"};
    const std::array<std::size_t, 3> pop_lens{5, wake.size(), 5};
    redisContext* conn = bare_connection(0);
    redisAppendCommandArgv(conn, 6, wait.data(), wait_lens.data());
    redisAppendCommandArgv(conn, 3, pop.data(), pop_lens.data());
    for (int i = 0; i < 2; ++i) {
      void* r = nullptr;
      if (redisGetReply(conn, &r) != REDIS_OK) std::abort();
      freeReplyObject(r);
    }
  }
}

void BM_Redis_Storm_bare(benchmark::State& state) {
  if (!g_cluster_seeds.empty()) {
    state.SkipWithError("the bare storm runs on one server");
    return;
  }
  if (g_options.tls.enabled) {
    state.SkipWithError("its hiredis twin has no TLS");
    return;
  }
  static std::atomic<std::uint64_t> next_key{0};
  const auto fp_bytes = idem::redis::fingerprint_bytes(idem::xxh3_128(kPayload));
  const std::string_view fp(fp_bytes.data(), fp_bytes.size());
  std::string record;
  std::vector<Steady::time_point> answered(kStormDuplicates);
  std::vector<int> calls(kStormDuplicates);
  StormCrew crew([&](int i) {
    calls[i] = bare_storm_duplicate(record, fp);
    answered[i] = Steady::now();
  });
  StormFigures figures;
  for (auto _ : state) {
    record = idem::redis::tagged_key(g_run + "b:storm:", "storm-" + std::to_string(next_key++));
    Reply held = bare_command({"EVALSHA", idem::redis::script_record_claim.sha, "1", record, fp,
                               lease_text(), ttl_text()});
    Steady::time_point committed{};
    crew.run([&] {
      std::this_thread::sleep_for(kStormHandler);
      committed = Steady::now();
      idem::redis::DecimalText fence;
      const std::string wake =
          idem::redis::wake_key(record, static_cast<idem::Fence>(integer_at(*held, 1)));
      (void)bare_command({"EVALSHA", idem::redis::script_record_commit.sha, "2", record, wake,
                          idem::redis::to_chars(fence, integer_at(*held, 1)), "C", kResult,
                          ttl_text()});
    });
    const auto last = *std::max_element(answered.begin(), answered.end());
    const double us = std::chrono::duration<double, std::micro>(last - committed).count();
    state.SetIterationTime(us / 1e6);
    figures.commit_to_last_us.push_back(us);
    figures.calls += std::accumulate(calls.begin(), calls.end(), 0.0);
    figures.duplicates += kStormDuplicates;
  }
  figures.report(state);
}

// The floor: a wake through Redis alone. Each duplicate blocks in BLPOP on a plain list on its
// own connection; the holder's one RPUSH of 31 elements wakes them.
void BM_Redis_Storm_floor(benchmark::State& state) {
  if (!g_cluster_seeds.empty()) {
    state.SkipWithError("the floor runs on one server");
    return;
  }
  if (g_options.tls.enabled) {
    state.SkipWithError("its hiredis twin has no TLS");
    return;
  }
  static std::atomic<std::uint64_t> next_key{0};
  std::string list;
  std::vector<Steady::time_point> answered(kStormDuplicates);
  StormCrew crew([&](int i) {
    (void)Reply(static_cast<redisReply*>(
        redisCommand(bare_connection(0), "BLPOP %b 5", list.data(), list.size())));
    answered[i] = Steady::now();
  });
  StormFigures figures;
  for (auto _ : state) {
    list = g_run + "b:floor:" + std::to_string(next_key++);
    Steady::time_point committed{};
    crew.run([&] {
      std::this_thread::sleep_for(kStormHandler);
      committed = Steady::now();
      std::vector<const char*> argv{"RPUSH", list.c_str()};
      std::vector<std::size_t> lens{5, list.size()};
      for (int i = 0; i < kStormDuplicates; ++i) {
        argv.push_back("1");
        lens.push_back(1);
      }
      (void)Reply(static_cast<redisReply*>(redisCommandArgv(
          bare_connection(0), static_cast<int>(argv.size()), argv.data(), lens.data())));
    });
    const auto last = *std::max_element(answered.begin(), answered.end());
    const double us = std::chrono::duration<double, std::micro>(last - committed).count();
    state.SetIterationTime(us / 1e6);
    figures.commit_to_last_us.push_back(us);
    figures.calls += kStormDuplicates;
    figures.duplicates += kStormDuplicates;
  }
  figures.report(state);
}

BENCHMARK(BM_Redis_Storm_Wake)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(2);
BENCHMARK(BM_Redis_Storm_Poll)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(2);
BENCHMARK(BM_Redis_Storm_bare)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(2);
BENCHMARK(BM_Redis_Storm_floor)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(2);

}  // namespace

int main(int argc, char** argv) {
  const char* uri = std::getenv("IDEM_BENCH_REDIS_URI");
  if (const char* seeds = std::getenv("IDEM_BENCH_REDIS_CLUSTER_SEEDS"); seeds && *seeds) {
    const std::string list = seeds;
    for (std::size_t at = 0; at <= list.size();) {
      const std::size_t comma = std::min(list.find(',', at), list.size());
      g_cluster_seeds.push_back(list.substr(at, comma - at));
      at = comma + 1;
    }
    if (!read_slot_map()) {
      std::fprintf(stderr, "idem_bench_redis: cannot read the slot map from %s\n", seeds);
      return 1;
    }
    uri = "redis://127.0.0.1";  // the options of every node; the addresses come from the map
  }
  if (uri == nullptr || *uri == '\0') {
    std::puts("idem_bench_redis: IDEM_BENCH_REDIS_URI is not set; skipping the Redis benchmarks");
    return 0;
  }
  auto options = idem::redis::ConnectionOptions::from_uri(uri);
  if (!options) {
    std::fprintf(stderr, "idem_bench_redis: %s\n", options.failure().describe().c_str());
    return 1;
  }
  g_options = options.value();
  if (!g_options.unix_socket.empty() || !g_options.password.empty() || g_options.db != 0) {
    std::fprintf(stderr,
                 "idem_bench_redis: the bare twin supports redis:// and rediss://host:port only\n");
    return 1;
  }
  g_options.pool_size = 64;  // the guarded side may hold as many connections as the bare one
  g_options.pool_wait = 10s;
  if (const char* lanes = std::getenv("IDEM_BENCH_REDIS_PIPELINE"); lanes != nullptr && *lanes) {
    g_options.pipeline_connections = std::strtoul(lanes, nullptr, 10);
  }
  std::random_device rd;
  g_run = "idembench:" + std::to_string(rd()) + ":";
  load_scripts();
  if (!guarded().client->ping().ok()) {
    std::fprintf(stderr, "idem_bench_redis: Redis at %s does not answer\n", uri);
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
