// AsyncGuard over AsyncPostgresStore on ONE io_context thread (this benchmark's thread), with 1
// and 8 calls in flight, beside bare twins that run the same prepared statements through raw
// libpq asynchronous calls on one connection in pipeline mode, each statement with its own sync
// point as the store sends it: callbacks chaining claim -> finish, no coroutines, no guard.
//
//   IDEM_BENCH_PG_URI=postgresql://user@host/db build/bench/idem_bench_async
//
// Without IDEM_BENCH_PG_URI these are not registered (a line on stderr says so). The tables get
// a prefix of their own and are dropped at the end. Each run checks on the server that its fresh
// calls left one new completed record each and its replays none, failing otherwise, and reports
// the WAL bytes written per call (wal_B), a figure the machine's load does not move.

#include <benchmark/benchmark.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "async_bench.hpp"
#include "async_storm.hpp"  // the asynchronous duplicate storm
#include "idem/asio/async_guard.hpp"
#include "idem/engine/effective_key.hpp"
#include "idem/engine/record_model.hpp"
#include "idem/fingerprint.hpp"
#include "idem/postgres/async_store.hpp"
#include "sql/statements.hpp"  // the store's statement texts, so the bare twin sends the same SQL

namespace {

using namespace idem_bench_async;

constexpr std::string_view kScope = "bench";

std::string g_uri;
std::string g_prefix;  // set once the tables may exist: finish_postgres_benchmarks drops them

std::string i64_text(std::int64_t v) { return std::to_string(v); }

const std::string& completed_text() {
  static const std::string text = i64_text(static_cast<int>(idem::detail::SqlState::completed));
  return text;
}

// ---- What the server holds: a blocking connection of its own, used outside the timed loops ---

class Probe {
 public:
  struct Reading {
    long long completed = 0;  // completed records in the table
    long long wal = 0;        // the WAL insert position, in bytes
  };

  Probe() : conn_(PQconnectdb(g_uri.c_str())) {}
  ~Probe() { PQfinish(conn_); }
  Probe(const Probe&) = delete;
  Probe& operator=(const Probe&) = delete;

  std::optional<Reading> read() {
    const std::string sql = "SELECT count(*) FILTER (WHERE state = " + completed_text() +
                            "), (pg_current_wal_insert_lsn() - '0/0')::bigint FROM " +
                            idem::sql::Statements(idem::sql::kPostgres, g_prefix).records;
    PGresult* r = PQexec(conn_, sql.c_str());
    std::optional<Reading> out;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
      out = Reading{std::atoll(PQgetvalue(r, 0, 0)), std::atoll(PQgetvalue(r, 0, 1))};
    }
    PQclear(r);
    return out;
  }

  bool exec(const std::string& sql) {
    PGresult* r = PQexec(conn_, sql.c_str());
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    if (!ok) std::fprintf(stderr, "idem_bench_async: %s", PQresultErrorMessage(r));
    PQclear(r);
    return ok;
  }

 private:
  PGconn* conn_;
};

// Read before a benchmark's timed loop and after it: fresh calls must have left one new completed
// record each, replays none. wal_B: WAL bytes written per call.
class ServerCheck {
 public:
  ServerCheck() : before_(probe_.read()) {}

  void finish(benchmark::State& state, bool fresh) {
    const std::optional<Probe::Reading> after = probe_.read();
    if (!before_ || !after) {
      state.SkipWithError("cannot read the records table");
      return;
    }
    const long long calls = static_cast<long long>(state.iterations());
    const long long added = after->completed - before_->completed;
    state.counters["wal_B"] = benchmark::Counter(static_cast<double>(after->wal - before_->wal),
                                                 benchmark::Counter::kAvgIterations);
    if (added != (fresh ? calls : 0)) {
      const std::string why = std::to_string(calls) + " calls left " + std::to_string(added) +
                              " new completed records, not " + std::to_string(fresh ? calls : 0);
      state.SkipWithError(why.c_str());
    }
  }

 private:
  Probe probe_;
  std::optional<Probe::Reading> before_;
};

// ---- The guarded side -------------------------------------------------------------------------

// IDEM_BENCH_ASYNC_STRAND=1: the store's calls go through its strand, as when several threads
// call it; by default the store is told it has one thread (single_threaded), as the Redis
// benchmarks' store is.
bool single_threaded() {
  const char* v = std::getenv("IDEM_BENCH_ASYNC_STRAND");
  return v == nullptr || std::string_view(v) != "1";
}

struct Guarded {
  explicit Guarded(net::io_context& io)
      : store(
            io.get_executor(),
            idem::AsyncPostgresStoreOptions{.connection = {.uri = g_uri, .table_prefix = g_prefix},
                                            .single_threaded = single_threaded()}),
        guard(store, idem::Options{.scope = std::string(kScope), .lease = kLease, .ttl = kTtl}) {}
  idem::AsyncPostgresStore store;
  idem::AsyncGuard<idem::AsyncPostgresStore> guard;
};

// A first batch of replays, untimed: the store's connection opens and prepares its statements.
bool warm_up(net::io_context& io, Guarded& g) {
  return run_batch(io, 1, [&](int, int j) -> net::awaitable<bool> {
    auto out = co_await g.guard.async_execute(replay_id(j), kPayload, handler);
    co_return out.replayed();
  });
}

void BM_Async_Postgres_Fresh(benchmark::State& state) {
  net::io_context io;
  Guarded g(io);
  if (!warm_up(io, g)) {
    state.SkipWithError("the store did not replay its warm-up keys");
    return;
  }
  ServerCheck check;
  const int in_flight = static_cast<int>(state.range(0));
  while (state.KeepRunningBatch(in_flight * kPerCaller)) {
    const bool ok = run_guard_batch(
        io, in_flight, [&] { return g.guard.async_execute(next_id("f"), kPayload, handler); },
        [](const auto& out) { return out.recorded(); });
    if (!ok) {
      state.SkipWithError("a fresh call was not recorded");
      return;
    }
  }
  state.SetItemsProcessed(state.iterations());
  check.finish(state, true);
}

void BM_Async_Postgres_Replay(benchmark::State& state) {
  net::io_context io;
  Guarded g(io);
  if (!warm_up(io, g)) {
    state.SkipWithError("the store did not replay its warm-up keys");
    return;
  }
  ServerCheck check;
  const int in_flight = static_cast<int>(state.range(0));
  int next = 0;
  while (state.KeepRunningBatch(in_flight * kPerCaller)) {
    const bool ok = run_guard_batch(
        io, in_flight,
        [&] { return g.guard.async_execute(replay_id(next++ % kReplayKeys), kPayload, handler); },
        [](const auto& out) { return out.replayed(); });
    if (!ok) {
      state.SkipWithError("a call was not a replay");
      return;
    }
  }
  state.SetItemsProcessed(state.iterations());
  check.finish(state, false);
}

// ---- The bare twin: raw libpq in pipeline mode on Asio, callbacks only ------------------------

class Bare {
 public:
  // One caller's chain of calls on `keys`: claim, and for a fresh key finish, then the next;
  // `done` counts finished chains.
  struct Chain {
    Bare* bare;
    std::vector<std::string> keys;
    std::size_t at = 0;
    bool commit = true;
    int* done;
    bool* ok;
  };

  // Connected and set up (untimed) as the store sets up its connection: the statements
  // prepared, then non-blocking and in pipeline mode.
  explicit Bare(net::io_context& io) : conn_(PQconnectdb(g_uri.c_str())), socket_(io) {
    const idem::sql::Statements text(idem::sql::kPostgres, g_prefix);
    if (PQstatus(conn_) != CONNECTION_OK) {
      error_ = PQerrorMessage(conn_);
      return;
    }
    for (const auto& [name, sql] :
         {std::pair{"claim", &text.claim_in_one}, std::pair{"finish", &text.finish}}) {
      PGresult* r = PQprepare(conn_, name, sql->c_str(), 0, nullptr);
      if (PQresultStatus(r) != PGRES_COMMAND_OK) error_ = PQresultErrorMessage(r);
      PQclear(r);
      if (!error_.empty()) return;
    }
    if (PQsetnonblocking(conn_, 1) != 0 || PQenterPipelineMode(conn_) != 1) {
      error_ = PQerrorMessage(conn_);
      return;
    }
    socket_.assign(PQsocket(conn_));
    arm_read();  // always, as the store does (the io_context never runs out of work)
    const idem::Fingerprint fp = idem::xxh3_128(kPayload);
    fp_hi_ = i64_text(std::bit_cast<std::int64_t>(fp.high));
    fp_lo_ = i64_text(std::bit_cast<std::int64_t>(fp.low));
    lease_ = i64_text(kLease.count());
    ttl_ = i64_text(kTtl.count());
  }
  ~Bare() {
    if (socket_.is_open()) {
      boost::system::error_code ignored;
      socket_.cancel(ignored);
      (void)socket_.release();  // libpq closes it
    }
    for (Pending& p : pending_) PQclear(p.result);
    PQfinish(conn_);
  }
  Bare(const Bare&) = delete;
  Bare& operator=(const Bare&) = delete;

  // Empty when set up.
  const std::string& error() const { return error_; }

  void start(Chain* chain) { claim(chain); }

  static std::string key_of(std::string_view id) {
    const idem::detail::EffectiveKey k(kScope, {}, id);
    return std::string(k.view());
  }

 private:
  struct Pending {
    Chain* chain;
    bool claim;
    PGresult* result = nullptr;  // its statement's result, until its sync point's
  };

  // The store's parameters: the key and results as binary bytea, numbers as text.
  void claim(Chain* chain) {
    const std::string& key = chain->keys[chain->at];
    const std::array<const char*, 6> values{key.data(), fp_hi_.c_str(), fp_lo_.c_str(),
                                            "1",        lease_.c_str(), ttl_.c_str()};
    const std::array<int, 6> lengths{static_cast<int>(key.size()), 0, 0, 0, 0, 0};
    const std::array<int, 6> formats{1, 0, 0, 0, 0, 0};
    send("claim", values, lengths, formats, Pending{chain, true});
  }

  void finish(Chain* chain, const char* fence) {
    const std::string& key = chain->keys[chain->at];
    const std::string result = handler();
    const std::array<const char*, 5> values{key.data(), fence, completed_text().c_str(),
                                            result.data(), ttl_.c_str()};
    const std::array<int, 5> lengths{static_cast<int>(key.size()), 0, 0,
                                     static_cast<int>(result.size()), 0};
    const std::array<int, 5> formats{1, 0, 0, 1, 0};
    send("finish", values, lengths, formats, Pending{chain, false});
  }

  template <std::size_t N>
  void send(const char* name, const std::array<const char*, N>& values,
            const std::array<int, N>& lengths, const std::array<int, N>& formats, Pending p) {
    if (PQsendQueryPrepared(conn_, name, static_cast<int>(N), values.data(), lengths.data(),
                            formats.data(), 0) != 1 ||
        PQpipelineSync(conn_) != 1) {
      *p.chain->ok = false;
      ++*p.chain->done;
      return;
    }
    pending_.push_back(p);
    flush();
  }

  void flush() {
    const int left = PQflush(conn_);
    if (left < 0) return fail_all();
    if (left == 1 && !write_armed_) {
      write_armed_ = true;
      socket_.async_wait(net::posix::stream_descriptor::wait_write,
                         [this](boost::system::error_code ec) {
                           write_armed_ = false;
                           if (!ec) flush();
                         });
    }
  }

  void arm_read() {
    if (read_armed_) return;
    read_armed_ = true;
    socket_.async_wait(net::posix::stream_descriptor::wait_read,
                       [this](boost::system::error_code ec) {
                         read_armed_ = false;
                         if (ec) return;
                         if (PQconsumeInput(conn_) == 0) return fail_all();
                         take_results();
                         arm_read();
                       });
  }

  // In order: a statement's result, a null, then its sync point's result, which answers it.
  // Every reply in hand is read before the first answer sends its chain's next statement, as
  // the store does (its replies resume their coroutines after the read).
  void take_results() {
    std::vector<Pending> answered;
    int nulls = 0;
    while (!pending_.empty() && PQisBusy(conn_) == 0) {
      PGresult* r = PQgetResult(conn_);
      if (r == nullptr) {
        if (++nulls > 1) break;
        continue;
      }
      nulls = 0;
      if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
        PQclear(r);
        answered.push_back(pending_.front());
        pending_.pop_front();
        continue;
      }
      if (pending_.front().result == nullptr) {
        pending_.front().result = r;
      } else {
        PQclear(r);
      }
    }
    for (const Pending& p : answered) {
      answer(p);
      PQclear(p.result);
    }
  }

  // claim_in_one's row: acquired, fence, took_over, then the record's state, fp_hi, fp_lo, lease
  // left, retention left, result.
  void answer(const Pending& p) {
    Chain* chain = p.chain;
    const PGresult* r = p.result;
    if (r == nullptr || PQresultStatus(r) != (p.claim ? PGRES_TUPLES_OK : PGRES_COMMAND_OK)) {
      return failed(chain);
    }
    if (!p.claim) {  // finish: the fenced update changed the record
      if (std::string_view(PQcmdTuples(const_cast<PGresult*>(r))) != "1") return failed(chain);
      return next(chain);
    }
    if (PQntuples(r) != 1 || PQnfields(r) != 9) return failed(chain);
    const bool acquired = std::string_view(PQgetvalue(r, 0, 0)) == "1";
    if (chain->commit) {
      if (!acquired) return failed(chain);
      return finish(chain, PQgetvalue(r, 0, 1));  // libpq copies it as it sends
    }
    // A replay: the completed record of this payload, its result decoded as the store does.
    if (acquired || PQgetvalue(r, 0, 3) != completed_text() || PQgetvalue(r, 0, 4) != fp_hi_ ||
        PQgetvalue(r, 0, 5) != fp_lo_ || PQgetisnull(r, 0, 8) != 0) {
      return failed(chain);
    }
    std::size_t n = 0;
    unsigned char* bytes =
        PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(r, 0, 8)), &n);
    const std::string result(reinterpret_cast<const char*>(bytes), n);
    PQfreemem(bytes);
    benchmark::DoNotOptimize(result.size());
    next(chain);
  }

  void failed(Chain* chain) {
    *chain->ok = false;
    next(chain);
  }

  void next(Chain* chain) {
    if (++chain->at < chain->keys.size()) return claim(chain);
    ++*chain->done;
  }

  // A lost connection: every chain waiting on it ends, failed.
  void fail_all() {
    std::deque<Pending> lost = std::move(pending_);
    pending_.clear();
    for (Pending& p : lost) {
      PQclear(p.result);
      *p.chain->ok = false;
      ++*p.chain->done;
    }
  }

  PGconn* conn_;
  net::posix::stream_descriptor socket_;
  bool read_armed_ = false, write_armed_ = false;
  std::deque<Pending> pending_;
  std::string error_, fp_hi_, fp_lo_, lease_, ttl_;
};

void bare_batch(benchmark::State& state, bool fresh) {
  net::io_context io;
  Bare bare(io);
  if (!bare.error().empty()) {
    state.SkipWithError(bare.error().c_str());
    return;
  }
  ServerCheck check;
  const int in_flight = static_cast<int>(state.range(0));
  int next = 0;
  while (state.KeepRunningBatch(in_flight * kPerCaller)) {
    // Building the keys is the guard's work too (the effective key).
    int done = 0;
    bool ok = true;
    std::vector<Bare::Chain> chains(static_cast<std::size_t>(in_flight));
    for (auto& chain : chains) {
      chain.bare = &bare;
      chain.commit = fresh;
      chain.done = &done;
      chain.ok = &ok;
      for (int j = 0; j < kPerCaller; ++j) {
        chain.keys.push_back(Bare::key_of(fresh ? next_id("b") : replay_id(next++ % kReplayKeys)));
      }
      bare.start(&chain);
    }
    while (done < in_flight) io.run_one();
    if (!ok) {
      state.SkipWithError(fresh ? "a bare fresh call was not recorded"
                                : "a bare call was not a replay");
      return;
    }
  }
  state.SetItemsProcessed(state.iterations());
  check.finish(state, fresh);
}

void BM_Async_Postgres_Fresh_bare(benchmark::State& state) { bare_batch(state, true); }
void BM_Async_Postgres_Replay_bare(benchmark::State& state) { bare_batch(state, false); }

// The tables (the store creates them on its first connection) and the replay keys, written once
// through the guard; false when the server does not take them.
bool write_replay_keys() {
  net::io_context io;
  Guarded g(io);
  std::string why;
  const bool ok = run_batch(io, 1, [&](int, int j) -> net::awaitable<bool> {
    for (int i = j; i < kReplayKeys; i += kPerCaller) {
      auto out = co_await g.guard.async_execute(replay_id(i), kPayload, handler);
      if (!out.recorded() && !out.replayed()) {
        why = out.message();
        co_return false;
      }
    }
    co_return true;
  });
  if (!ok) std::fprintf(stderr, "idem_bench_async: PostgreSQL: %s\n", why.c_str());
  return ok;
}

// The asynchronous duplicate storm (async_storm.hpp) on AsyncPostgresStore: woken (the waiter
// counted in the record, the store's listener hearing the hold's NOTIFY) against polled; the bare
// floor is BM_AsyncStorm_bare.
template <bool Wakes>
void BM_AsyncStorm_Postgres(benchmark::State& state) {
  net::io_context io;
  idem::AsyncPostgresStore store(
      io.get_executor(),
      idem::AsyncPostgresStoreOptions{.connection = {.uri = g_uri, .table_prefix = g_prefix},
                                      .single_threaded = single_threaded()});
  idem::bench::run_async_storm<Wakes>(state, io, store, Wakes ? "woken-" : "polled-");
}

void finish_postgres_benchmarks();

bool register_postgres_benchmarks() {
  const char* uri = std::getenv("IDEM_BENCH_PG_URI");
  if (uri == nullptr || *uri == '\0') {
    std::fprintf(stderr,
                 "idem_bench_async: IDEM_BENCH_PG_URI is not set; no PostgreSQL benchmarks\n");
    return false;
  }
  g_uri = uri;
  g_prefix = "bench_async_" + std::to_string(::getpid()) + "_";
  if (!write_replay_keys()) {
    std::fprintf(stderr, "idem_bench_async: no PostgreSQL benchmarks\n");
    finish_postgres_benchmarks();
    return false;
  }
  for (auto [name, fn] :
       {std::pair{"BM_Async_Postgres_Fresh", &BM_Async_Postgres_Fresh},
        std::pair{"BM_Async_Postgres_Fresh_bare", &BM_Async_Postgres_Fresh_bare},
        std::pair{"BM_Async_Postgres_Replay", &BM_Async_Postgres_Replay},
        std::pair{"BM_Async_Postgres_Replay_bare", &BM_Async_Postgres_Replay_bare}}) {
    benchmark::RegisterBenchmark(name, fn)->ArgName("in_flight")->Arg(1)->Arg(8)->UseRealTime();
  }
  benchmark::RegisterBenchmark("BM_AsyncStorm_Postgres_Woken", &BM_AsyncStorm_Postgres<true>)
      ->Apply(idem::bench::storm_shape);
  benchmark::RegisterBenchmark("BM_AsyncStorm_Postgres_Polled", &BM_AsyncStorm_Postgres<false>)
      ->Apply(idem::bench::storm_shape);
  return true;
}

void finish_postgres_benchmarks() {
  if (g_prefix.empty()) return;
  const idem::sql::Statements text(idem::sql::kPostgres, g_prefix);
  Probe probe;
  (void)probe.exec("DROP TABLE IF EXISTS " + text.records + ", " + text.schema + ", " + text.steps +
                   " CASCADE");
  (void)probe.exec("DROP SEQUENCE IF EXISTS " + text.fences);
  (void)probe.exec("DROP FUNCTION IF EXISTS " + text.steps + "_drop() CASCADE");
  (void)probe.exec("DROP FUNCTION IF EXISTS " + text.records + "_wake() CASCADE");
  g_prefix.clear();
}

[[maybe_unused]] const bool registered =
    idem_bench_async::add_part({&register_postgres_benchmarks, &finish_postgres_benchmarks});

}  // namespace
