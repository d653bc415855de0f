// AsyncGuard over AsyncRedisStore on ONE io_context thread (this benchmark's thread), with 1, 8,
// 32 and 128 calls in flight, beside bare twins that send the same scripts through raw hiredis
// async, writes gathered as the store gathers them: callbacks chaining claim -> commit, no
// coroutines, no guard.
//
//   IDEM_BENCH_REDIS_URI=redis://127.0.0.1:6379 build/bench/idem_bench_async
//
// Without IDEM_BENCH_REDIS_URI these are not registered (async_main.cpp).
//
// Each benchmark iteration is one call (a fresh key: claim + commit; a replay: one claim). The
// CPU column is this thread's CPU per call: the client's cost, since the server runs elsewhere.
// Calls go in batches of 16 per caller in flight; between batches the pipeline drains.
//
// Server-side counters from INFO, per call, which the machine's load moves little: server_us (the
// Redis process's CPU) and reads (the reads it made of client input: fewer per call means the
// commands arrived in larger batches).

#include <benchmark/benchmark.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "async_bench.hpp"
#include "async_storm.hpp"     // the asynchronous duplicate storm
#include "hiredis_events.hpp"  // hiredis async on Asio, writes gathered as the store gathers them
#include "idem/asio/async_guard.hpp"
#include "idem/engine/effective_key.hpp"
#include "idem/redis/async_store.hpp"
#include "lua_scripts.hpp"   // the embedded scripts, so the bare twin sends the same bytes
#include "store_common.hpp"  // tagged_key, fingerprint_bytes: the same key names and arguments

namespace {

namespace net = boost::asio;
using namespace std::chrono_literals;

using namespace idem_bench_async;

const char* uri() {
  const char* u = std::getenv("IDEM_BENCH_REDIS_URI");
  return u != nullptr && *u != '\0' ? u : nullptr;
}

std::string run_prefix() {
  static const std::string prefix =
      "idembench:async:" + std::to_string(std::random_device{}()) + ":";
  return prefix;
}

// IDEM_BENCH_ASYNC_STRAND=1: the store's calls go through its strand, as when several threads
// call it; by default the store is told it has one thread (single_threaded).
bool single_threaded() {
  const char* v = std::getenv("IDEM_BENCH_ASYNC_STRAND");
  return v == nullptr || std::string_view(v) != "1";
}

// The Redis server's CPU seconds and reads of client input so far (INFO), on a connection of its
// own; nullopt when INFO cannot be read.
struct ServerCounters {
  double cpu_s = 0;
  double reads = 0;
};

std::optional<ServerCounters> server_counters() {
  const auto o = idem::redis::ConnectionOptions::from_uri(uri()).value();
  redisContext* c = redisConnect(o.host.c_str(), o.port);
  if (c == nullptr || c->err != 0) {
    if (c != nullptr) redisFree(c);
    return std::nullopt;
  }
  auto* reply = static_cast<redisReply*>(redisCommand(c, "INFO"));
  std::optional<ServerCounters> out;
  if (reply != nullptr && reply->type == REDIS_REPLY_STRING) {
    const std::string_view info(reply->str, reply->len);
    auto field = [&](std::string_view name) -> std::optional<double> {
      const auto at = info.find(std::string("\n") + std::string(name) + ":");
      if (at == std::string_view::npos) return std::nullopt;
      return std::strtod(info.data() + at + name.size() + 2, nullptr);
    };
    const auto sys = field("used_cpu_sys"), user = field("used_cpu_user"),
               reads = field("total_reads_processed");
    if (sys && user && reads) out = ServerCounters{*sys + *user, *reads};
  }
  if (reply != nullptr) freeReplyObject(reply);
  redisFree(c);
  return out;
}

// Sets server_us and reads per call from the counters at the start of the timed loop.
class ServerMeter {
 public:
  ServerMeter() : before_(server_counters()) {}
  void report(benchmark::State& state) const {
    const auto after = server_counters();
    if (!before_ || !after || state.iterations() == 0) return;
    const auto calls = static_cast<double>(state.iterations());
    state.counters["server_us"] = (after->cpu_s - before_->cpu_s) * 1e6 / calls;
    state.counters["reads"] = (after->reads - before_->reads) / calls;
  }

 private:
  std::optional<ServerCounters> before_;
};

// ---- The guarded side -------------------------------------------------------------------------

struct Guarded {
  explicit Guarded(net::io_context& io)
      : store(io.get_executor(),
              idem::AsyncRedisStoreOptions{
                  .connection = idem::redis::ConnectionOptions::from_uri(uri()).value(),
                  .prefix = run_prefix() + "g:",
                  .single_threaded = single_threaded()}),
        guard(store, idem::Options{.scope = "bench", .lease = kLease, .ttl = kTtl}) {}
  idem::AsyncRedisStore store;
  idem::AsyncGuard<idem::AsyncRedisStore> guard;
};

void BM_Async_Redis_Fresh(benchmark::State& state) {
  net::io_context io;
  Guarded g(io);
  const int in_flight = static_cast<int>(state.range(0));
  const ServerMeter meter;
  while (state.KeepRunningBatch(in_flight * kPerCaller)) {
    const bool ok = run_guard_batch(
        io, in_flight, [&] { return g.guard.async_execute(next_id("f"), kPayload, handler); },
        [](const auto& out) { return out.recorded(); });
    if (!ok) {
      state.SkipWithError("a fresh call was not recorded");
      break;
    }
  }
  meter.report(state);
  state.SetItemsProcessed(state.iterations());
}

void BM_Async_Redis_Replay(benchmark::State& state) {
  net::io_context io;
  Guarded g(io);
  // The replay keys, written once per run (untimed).
  (void)run_batch(io, 1, [&](int, int j) -> net::awaitable<bool> {
    for (int i = j; i < kReplayKeys; i += kPerCaller) {
      (void)co_await g.guard.async_execute(replay_id(i), kPayload, handler);
    }
    co_return true;
  });
  const int in_flight = static_cast<int>(state.range(0));
  int next = 0;
  const ServerMeter meter;
  while (state.KeepRunningBatch(in_flight * kPerCaller)) {
    const bool ok = run_guard_batch(
        io, in_flight,
        [&] { return g.guard.async_execute(replay_id(next++ % kReplayKeys), kPayload, handler); },
        [](const auto& out) { return out.replayed(); });
    if (!ok) {
      state.SkipWithError("a call was not a replay");
      break;
    }
  }
  meter.report(state);
  state.SetItemsProcessed(state.iterations());
}

// ---- The bare twin: raw hiredis async on Asio, callbacks only ---------------------------------

class Bare {
 public:
  explicit Bare(net::io_context& io) {
    const auto o = idem::redis::ConnectionOptions::from_uri(uri()).value();
    ac_ = redisAsyncConnect(o.host.c_str(), o.port);
    // hiredis's async API on Asio with writes gathered per read or per turn, as the store's own
    // connection gathers them (hiredis_events.hpp).
    idem::redis::detail::HiredisEvents::attach(ac_, io.get_executor());
    const auto fp = idem::redis::fingerprint_bytes(idem::xxh3_128(kPayload));
    fp_.assign(fp.data(), fp.size());
    lease_.assign(idem::redis::ms_text(lease_buf_, kLease));
    ttl_.assign(idem::redis::ms_text(ttl_buf_, kTtl));
  }
  ~Bare() {
    if (ac_ != nullptr) redisAsyncFree(ac_);
  }

  // One caller's chain of `count` calls on `ids`: claim, and for a fresh key commit, then the
  // next; `done` counts finished chains.
  struct Chain {
    Bare* bare;
    std::vector<std::string> keys;
    std::size_t at = 0;
    bool commit = true;
    int* done;
    bool* ok;
  };

  void start(Chain* chain) { claim(chain); }

  std::string key_of(std::string_view id) const {
    const idem::detail::EffectiveKey k("bench", {}, id);
    return idem::redis::tagged_key(run_prefix() + "g:", k.view());
  }

 private:
  void claim(Chain* chain) {
    const std::string& key = chain->keys[chain->at];
    const std::array<std::string_view, 7> argv{
        "EVALSHA", idem::redis::script_record_claim.sha, "1", key, fp_, lease_, ttl_};
    send(argv, &Bare::on_claim, chain);
  }
  static void on_claim(redisAsyncContext*, void* r, void* p) {
    auto* chain = static_cast<Chain*>(p);
    auto* reply = static_cast<redisReply*>(r);
    if (reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements < 2) {
      *chain->ok = false;
      return chain->bare->next(chain);
    }
    const long long code = reply->element[0]->integer;
    if (!chain->commit) {
      if (code != 1) *chain->ok = false;  // completed: a replay
      return chain->bare->next(chain);
    }
    if (code != 0) {
      *chain->ok = false;
      return chain->bare->next(chain);
    }
    idem::redis::DecimalText fence;
    const std::string result = handler();
    const std::array<std::string_view, 7> argv{
        "EVALSHA",
        idem::redis::script_record_commit.sha,
        "1",
        chain->keys[chain->at],
        idem::redis::to_chars(fence, reply->element[1]->integer),
        "C",
        result};
    // ttl last: the commit script's ARGV[4]
    std::array<std::string_view, 8> full{};
    std::copy(argv.begin(), argv.end(), full.begin());
    full[7] = chain->bare->ttl_;
    chain->bare->send(full, &Bare::on_commit, chain);
  }
  static void on_commit(redisAsyncContext*, void* r, void* p) {
    auto* chain = static_cast<Chain*>(p);
    auto* reply = static_cast<redisReply*>(r);
    if (reply == nullptr || reply->type != REDIS_REPLY_INTEGER || reply->integer != 1) {
      *chain->ok = false;
    }
    chain->bare->next(chain);
  }
  void next(Chain* chain) {
    if (++chain->at < chain->keys.size()) return claim(chain);
    ++*chain->done;
  }

  template <std::size_t N>
  void send(const std::array<std::string_view, N>& args, redisCallbackFn* fn, Chain* chain) {
    std::array<const char*, N> argv{};
    std::array<std::size_t, N> lens{};
    for (std::size_t i = 0; i < N; ++i) {
      argv[i] = args[i].data();
      lens[i] = args[i].size();
    }
    redisAsyncCommandArgv(ac_, fn, chain, static_cast<int>(N), argv.data(), lens.data());
  }

  redisAsyncContext* ac_ = nullptr;
  std::string fp_, lease_, ttl_;
  idem::redis::DecimalText lease_buf_, ttl_buf_;
};

void bare_batch(benchmark::State& state, bool fresh) {
  net::io_context io;
  Bare bare(io);
  const int in_flight = static_cast<int>(state.range(0));
  if (!fresh) {  // the replay keys, as the guarded side writes them
    Guarded g(io);
    (void)run_batch(io, 1, [&](int, int j) -> net::awaitable<bool> {
      for (int i = j; i < kReplayKeys; i += kPerCaller) {
        (void)co_await g.guard.async_execute(replay_id(i), kPayload, handler);
      }
      co_return true;
    });
  }
  int next = 0;
  const ServerMeter meter;
  while (state.KeepRunningBatch(in_flight * kPerCaller)) {
    // Building the keys is the guard's work too (the effective key, the tagged name).
    int done = 0;
    bool ok = true;
    std::vector<Bare::Chain> chains(static_cast<std::size_t>(in_flight));
    for (auto& chain : chains) {
      chain.bare = &bare;
      chain.commit = fresh;
      chain.done = &done;
      chain.ok = &ok;
      for (int j = 0; j < kPerCaller; ++j) {
        chain.keys.push_back(bare.key_of(fresh ? next_id("b") : replay_id(next++ % kReplayKeys)));
      }
      bare.start(&chain);
    }
    while (done < in_flight) io.run_one();
    if (!ok) {
      state.SkipWithError("a bare call failed");
      break;
    }
  }
  meter.report(state);
  state.SetItemsProcessed(state.iterations());
}

void BM_Async_Redis_Fresh_bare(benchmark::State& state) { bare_batch(state, true); }
void BM_Async_Redis_Replay_bare(benchmark::State& state) { bare_batch(state, false); }

// The asynchronous duplicate storm (async_storm.hpp) on AsyncRedisStore: woken (record_wait.lua
// and BLPOP on the store's wait connections) against polled; the bare floor is
// BM_AsyncStorm_bare.
template <bool Wakes>
void BM_AsyncStorm_Redis(benchmark::State& state) {
  net::io_context io;
  idem::AsyncRedisStore store(
      io.get_executor(), idem::AsyncRedisStoreOptions{
                             .connection = idem::redis::ConnectionOptions::from_uri(uri()).value(),
                             .prefix = run_prefix() + "storm:",
                             .single_threaded = single_threaded()});
  idem::bench::run_async_storm<Wakes>(state, io, store, Wakes ? "woken-" : "polled-");
}

bool register_redis_benchmarks() {
  if (uri() == nullptr) {
    std::fprintf(stderr,
                 "idem_bench_async: IDEM_BENCH_REDIS_URI is not set; no Redis benchmarks\n");
    return false;
  }
  for (auto [name, fn] : {std::pair{"BM_Async_Redis_Fresh", &BM_Async_Redis_Fresh},
                          std::pair{"BM_Async_Redis_Fresh_bare", &BM_Async_Redis_Fresh_bare},
                          std::pair{"BM_Async_Redis_Replay", &BM_Async_Redis_Replay},
                          std::pair{"BM_Async_Redis_Replay_bare", &BM_Async_Redis_Replay_bare}}) {
    benchmark::RegisterBenchmark(name, fn)
        ->ArgName("in_flight")
        ->Arg(1)
        ->Arg(8)
        ->Arg(32)
        ->Arg(128)
        ->UseRealTime();
  }
  benchmark::RegisterBenchmark("BM_AsyncStorm_Redis_Woken", &BM_AsyncStorm_Redis<true>)
      ->Apply(idem::bench::storm_shape);
  benchmark::RegisterBenchmark("BM_AsyncStorm_Redis_Polled", &BM_AsyncStorm_Redis<false>)
      ->Apply(idem::bench::storm_shape);
  return true;
}

[[maybe_unused]] const bool registered = idem_bench_async::add_part({&register_redis_benchmarks});

}  // namespace
