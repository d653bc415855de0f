// IdempotencyGuard over PostgresStore beside bare twins: the same prepared statements on libpqxx
// and on libpq itself (BareLibpq: the driver the asynchronous store runs on) without the library
// (the claim's one-statement upsert-or-read, the commit's fenced update), in the same binary and
// run, with 1 and 8 client threads (the guard shares one store and its pool; each bare thread has
// its own connection). The ratio is the library's overhead (docs/design.md §14).
//
//   IDEM_BENCH_PG_URI=postgresql://user@host/db build/bench/idem_bench_postgres
//
// With IDEM_BENCH_PG_REPLICA_URI (a hot standby of that server) it also replays through
// PostgresReplicaOptions::replica beside a bare twin running the replica's read statement there
// (docs/sql.md, "Replicas").
//
// Without IDEM_BENCH_PG_URI it prints a line and exits 0. Tables are created with a prefix of
// their own and dropped at the end. Figures: docs/perf/history.md ("SQL stores").

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>

#include "idem/cached_store.hpp"
#include "idem/guard.hpp"
#include "idem/postgres/store.hpp"
#include "latency.hpp"
#include "postgres/pqxx_calls.hpp"  // the bare twins' calls, the same on libpqxx 6 and 7
#include "sql/statements.hpp"

namespace {

using std::chrono::milliseconds;

constexpr std::string_view kScope = "payments.charge";
constexpr std::string_view kPayload = "card=4242424242424242&amount=1999&currency=EUR";
constexpr std::string_view kResult = "receipt:ch_0000000042:EUR";
constexpr milliseconds kLease{30'000};
constexpr milliseconds kTtl{24 * 3600 * 1000};
constexpr int kReplayKeys = 1000;

std::string g_uri;
std::string g_prefix;
std::atomic<long long> g_counter{0};

std::string handler() { return std::string(kResult); }

std::string key(std::string_view kind, long long i) {
  return std::string(kind) + "-" + std::to_string(1'000'000'000'000LL + i);
}

// One store for all threads of all guarded benchmarks; its pool holds 8 connections.
idem::PostgresStore& store() {
  static idem::PostgresStore s{idem::PostgresStoreOptions{
      .connection = {.uri = g_uri, .table_prefix = g_prefix}, .pool = {.size = 8}}};
  return s;
}

idem::IdempotencyGuard<idem::PostgresStore>& guard() {
  static idem::IdempotencyGuard<idem::PostgresStore> g{store(),
                                                       idem::Options{.scope = std::string(kScope)}};
  return g;
}

// The same tables in transactional mode: claim, handler and commit in one transaction.
idem::IdempotencyGuard<idem::PostgresStore>& transactional_guard() {
  static idem::PostgresStore s{
      idem::PostgresStoreOptions{.connection = {.uri = g_uri, .table_prefix = g_prefix},
                                 .mode = idem::SqlMode::transactional,
                                 .pool = {.size = 8}}};
  static idem::IdempotencyGuard<idem::PostgresStore> g{s,
                                                       idem::Options{.scope = std::string(kScope)}};
  return g;
}

// CachedStore in front of store(): replays of records written without it fill it from their
// claim's time left, and are hits from then on.
using CachedPostgres = idem::CachedStore<idem::PostgresStore&>;
CachedPostgres& cached_store() {
  static CachedPostgres s{idem::CachedStoreOptions{}, store()};
  return s;
}
idem::IdempotencyGuard<CachedPostgres>& cached_guard() {
  static idem::IdempotencyGuard<CachedPostgres> g{cached_store(),
                                                  idem::Options{.scope = std::string(kScope)}};
  return g;
}

void prepare_replays() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int k = 0; k < kReplayKeys; ++k)
      (void)guard().execute(key("replay", k), kPayload, handler);
  });
}

void BM_Guard_Fresh(benchmark::State& state) {
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out = guard().execute(key("fresh", g_counter.fetch_add(1)), kPayload, handler);
    if (!out.recorded()) state.SkipWithError("not recorded");
    benchmark::DoNotOptimize(out);
  }
  latency.report(state);
}

void BM_Guard_Replay(benchmark::State& state) {
  prepare_replays();
  long long i = state.thread_index() * 97;
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out = guard().execute(key("replay", i++ % kReplayKeys), kPayload, handler);
    if (!out.replayed()) state.SkipWithError("not replayed");
    benchmark::DoNotOptimize(out);
  }
  latency.report(state);
}

void BM_GuardTransactional_Fresh(benchmark::State& state) {
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out =
        transactional_guard().execute(key("fresh", g_counter.fetch_add(1)), kPayload, handler);
    if (!out.recorded()) state.SkipWithError("not recorded");
    benchmark::DoNotOptimize(out);
  }
  latency.report(state);
}

// Compare with BM_Guard_Replay: the same keys, answered from process memory. An untimed pass
// over the keys fills the cache from their claims' time left; the timed calls are hits.
void BM_GuardCached_Replay(benchmark::State& state) {
  prepare_replays();
  static std::once_flag warm;
  std::call_once(warm, [] {
    for (int k = 0; k < kReplayKeys; ++k)
      (void)cached_guard().execute(key("replay", k), kPayload, handler);
  });
  const std::uint64_t hits_before = cached_store().hits();
  long long i = state.thread_index() * 97;
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out = cached_guard().execute(key("replay", i++ % kReplayKeys), kPayload, handler);
    if (!out.replayed()) state.SkipWithError("not replayed");
    benchmark::DoNotOptimize(out);
  }
  latency.report(state);
  if (state.thread_index() == 0) {
    state.counters["hit_rate"] =
        benchmark::Counter(static_cast<double>(cached_store().hits() - hits_before),
                           benchmark::Counter::kAvgIterations);
  }
}

// ---- bare twins -------------------------------------------------------------------------------

// bytea's text form.
std::string hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\\x";
  for (const unsigned char c : bytes) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

class Bare {
 public:
  Bare() : text_(idem::sql::kPostgres, g_prefix), conn_(g_uri) {
    // Prepared at once: SQL's EXECUTE (transactional twin) needs them on the server.
    idem_bench::pqxx_calls::prepare(conn_, "claim", text_.claim_in_one);
    idem_bench::pqxx_calls::prepare(conn_, "finish", text_.finish);
  }
  long long claim(const std::string& k) {
    pqxx::nontransaction tx(conn_);
    const pqxx::result r = idem_bench::pqxx_calls::exec_prepared(
        tx, "claim", idem_bench::pqxx_calls::bytes_param(k), static_cast<std::int64_t>(11),
        static_cast<std::int64_t>(22), static_cast<std::int64_t>(1),
        static_cast<std::int64_t>(kLease.count()), static_cast<std::int64_t>(kTtl.count()));
    if (r.empty()) return 0;
    if (r[0][0].as<int>() == 1) return r[0][1].as<long long>();
    benchmark::DoNotOptimize(idem_bench::pqxx_calls::field_bytes(r[0][8]).size());
    return 0;
  }
  void commit(const std::string& k, long long fence, const std::string& result) {
    pqxx::nontransaction tx(conn_);
    idem_bench::pqxx_calls::exec_prepared(
        tx, "finish", idem_bench::pqxx_calls::bytes_param(k), static_cast<std::int64_t>(fence), 1,
        idem_bench::pqxx_calls::bytes_param(result), static_cast<std::int64_t>(kTtl.count()));
  }
  // Transactional mode as the store sends it: two messages, BEGIN with the claim, then the
  // fenced update with COMMIT (the prepared statements run by SQL's EXECUTE).
  void claim_and_commit_in_one(const std::string& k, const std::string& result) {
    pqxx::nontransaction tx(conn_);
    const std::string key = conn_.quote(hex(k));
    const pqxx::result r = tx.exec(fmt::format("BEGIN; EXECUTE claim({}, 11, 22, 1, {}, {})", key,
                                               kLease.count(), kTtl.count()));
    const long long fence = !r.empty() && r[0][0].as<int>() == 1 ? r[0][1].as<long long>() : 0;
    tx.exec(fmt::format("EXECUTE finish({}, {}, 1, {}, {}); COMMIT", key, fence,
                        conn_.quote(hex(result)), kTtl.count()));
  }

 private:
  idem::sql::Statements text_;
  pqxx::connection conn_;
};

// The same two statements on libpq itself (blocking PQexecPrepared; keys and results as binary
// bytea, numbers as text, as the pipelined connection of AsyncPostgresStore sends them): what the
// blocking store's lease mode would cost without libpqxx.
class BareLibpq {
 public:
  BareLibpq() : text_(idem::sql::kPostgres, g_prefix), conn_(PQconnectdb(g_uri.c_str())) {
    if (PQstatus(conn_.get()) != CONNECTION_OK)
      throw std::runtime_error(PQerrorMessage(conn_.get()));
    expect(PQprepare(conn_.get(), "claim", text_.claim_in_one.c_str(), 0, nullptr),
           PGRES_COMMAND_OK);
    expect(PQprepare(conn_.get(), "finish", text_.finish.c_str(), 0, nullptr), PGRES_COMMAND_OK);
  }
  long long claim(const std::string& k) {
    const std::string lease = std::to_string(kLease.count()), ttl = std::to_string(kTtl.count());
    const std::array<const char*, 6> values{k.data(), "11", "22", "1", lease.c_str(), ttl.c_str()};
    const std::array<int, 6> lengths{static_cast<int>(k.size()), 0, 0, 0, 0, 0};
    const std::array<int, 6> formats{1, 0, 0, 0, 0, 0};
    Result r = expect(
        PQexecPrepared(conn_.get(), "claim", 6, values.data(), lengths.data(), formats.data(), 0),
        PGRES_TUPLES_OK);
    if (PQntuples(r.get()) == 0) return 0;
    if (std::string_view(PQgetvalue(r.get(), 0, 0)) == "1") {
      return std::atoll(PQgetvalue(r.get(), 0, 1));
    }
    std::size_t n = 0;
    unsigned char* bytes =
        PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(r.get(), 0, 8)), &n);
    benchmark::DoNotOptimize(n);
    PQfreemem(bytes);
    return 0;
  }
  void commit(const std::string& k, long long fence, const std::string& result) {
    const std::string f = std::to_string(fence), ttl = std::to_string(kTtl.count());
    const std::array<const char*, 5> values{k.data(), f.c_str(), "1", result.data(), ttl.c_str()};
    const std::array<int, 5> lengths{static_cast<int>(k.size()), 0, 0,
                                     static_cast<int>(result.size()), 0};
    const std::array<int, 5> formats{1, 0, 0, 1, 0};
    expect(
        PQexecPrepared(conn_.get(), "finish", 5, values.data(), lengths.data(), formats.data(), 0),
        PGRES_COMMAND_OK);
  }

 private:
  struct Clear {
    void operator()(PGresult* r) const noexcept { PQclear(r); }
    void operator()(PGconn* c) const noexcept { PQfinish(c); }
  };
  using Result = std::unique_ptr<PGresult, Clear>;
  Result expect(PGresult* raw, ExecStatusType status) {
    Result r(raw);
    if (PQresultStatus(r.get()) != status) throw std::runtime_error(PQerrorMessage(conn_.get()));
    return r;
  }
  idem::sql::Statements text_;
  std::unique_ptr<PGconn, Clear> conn_;
};

// A bare twin's fresh key (claim, then finish) and replay, on libpqxx (Bare) or libpq (BareLibpq).
template <class Twin>
void bare_fresh(benchmark::State& state) {
  Twin bare;
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    const std::string k = key("bare-fresh", g_counter.fetch_add(1));
    bare.commit(k, bare.claim(k), handler());
  }
  latency.report(state);
}

template <class Twin>
void bare_replay(benchmark::State& state) {
  Twin bare;  // replays the records bare_replay_setup() stored under its own keys
  long long i = state.thread_index() * 97;
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    benchmark::DoNotOptimize(bare.claim(key("bare-replay", i++ % kReplayKeys)));
  }
  latency.report(state);
}

void BM_Bare_Fresh(benchmark::State& state) { bare_fresh<Bare>(state); }
void BM_BareLibpq_Fresh(benchmark::State& state) { bare_fresh<BareLibpq>(state); }
void BM_Bare_Replay(benchmark::State& state) { bare_replay<Bare>(state); }
void BM_BareLibpq_Replay(benchmark::State& state) { bare_replay<BareLibpq>(state); }

void BM_BareTransactional_Fresh(benchmark::State& state) {
  Bare bare;
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    bare.claim_and_commit_in_one(key("bare-fresh", g_counter.fetch_add(1)), handler());
  }
  latency.report(state);
}

void bare_replay_setup() {
  Bare bare;
  for (int k = 0; k < kReplayKeys; ++k) {
    const std::string kk = key("bare-replay", k);
    bare.commit(kk, bare.claim(kk), handler());
  }
}

BENCHMARK(BM_Bare_Fresh)->Threads(1)->Threads(8)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BareLibpq_Fresh)->Threads(1)->Threads(8)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Guard_Fresh)->Threads(1)->Threads(8)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Bare_Replay)->Threads(1)->Threads(8)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BareLibpq_Replay)
    ->Threads(1)
    ->Threads(8)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Guard_Replay)->Threads(1)->Threads(8)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GuardCached_Replay)
    ->Threads(1)
    ->Threads(8)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
// One client: one commit per fresh key (transactional) against two (lease mode, above).
BENCHMARK(BM_BareTransactional_Fresh)->Threads(1)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GuardTransactional_Fresh)->Threads(1)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

// ---- replay reads on a replica ----------------------------------------------------------------

namespace {

std::string g_replica_uri;

// store()'s tables and pool, and a replica pool of 8 connections read first.
idem::PostgresStore& replica_store() {
  static idem::PostgresStore s{idem::PostgresStoreOptions{
      .connection = {.uri = g_uri, .table_prefix = g_prefix},
      .pool = {.size = 8},
      .replica = idem::PostgresReplicaOptions{.uri = g_replica_uri, .pool_size = 8}}};
  return s;
}

void BM_GuardReplica_Replay(benchmark::State& state) {
  static idem::IdempotencyGuard<idem::PostgresStore> g{replica_store(),
                                                       idem::Options{.scope = std::string(kScope)}};
  const std::uint64_t hits_before = replica_store().replica_counters().hits;
  long long i = state.thread_index() * 97;
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    auto out = g.execute(key("replay", i++ % kReplayKeys), kPayload, handler);
    if (!out.replayed()) state.SkipWithError("not replayed");
    benchmark::DoNotOptimize(out);
  }
  latency.report(state);
  if (state.thread_index() == 0) {  // share of the replays the replica answered
    state.counters["replica_hits"] = benchmark::Counter(
        static_cast<double>(replica_store().replica_counters().hits - hits_before),
        benchmark::Counter::kAvgIterations);
  }
}

// The replica's read statement on a connection of its own, for the records of bare_replay_setup().
void BM_BareReplica_Replay(benchmark::State& state) {
  const idem::sql::Statements text(idem::sql::kPostgres, g_prefix);
  pqxx::connection conn(g_replica_uri);
  idem_bench::pqxx_calls::prepare(conn, "read", text.read);
  long long i = state.thread_index() * 97;
  idem_bench::Latency latency;
  for (auto _ : state) {
    const auto timer = latency.time();
    const std::string k = key("bare-replay", i++ % kReplayKeys);
    pqxx::nontransaction tx(conn);
    const pqxx::result r =
        idem_bench::pqxx_calls::exec_prepared(tx, "read", idem_bench::pqxx_calls::bytes_param(k));
    if (r.empty()) state.SkipWithError("not on the replica");
    benchmark::DoNotOptimize(idem_bench::pqxx_calls::field_bytes(r[0][6]).size());
  }
  latency.report(state);
}

std::string one_value(const std::string& uri, const std::string& sql) {
  pqxx::connection c(uri);
  pqxx::nontransaction tx(c);
  return tx.exec(sql)[0][0].c_str();
}

// Registers the replica benchmarks once the replica holds every replay record. False: no replica
// was named, or it did not catch up.
bool register_replica_benchmarks() {
  const char* uri = std::getenv("IDEM_BENCH_PG_REPLICA_URI");
  if (uri == nullptr || *uri == '\0') return false;
  g_replica_uri = uri;
  prepare_replays();
  try {
    const std::string lsn = one_value(g_uri, "SELECT pg_current_wal_insert_lsn()");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{30};
    while (one_value(g_replica_uri, "SELECT pg_last_wal_replay_lsn() >= '" + lsn + "'") != "t") {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "idem_bench_postgres: the replica did not catch up in 30 s\n");
        return false;
      }
      std::this_thread::sleep_for(milliseconds{10});
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idem_bench_postgres: replica: %s\n", e.what());
    return false;
  }
  for (auto* b : {benchmark::RegisterBenchmark("BM_BareReplica_Replay", BM_BareReplica_Replay),
                  benchmark::RegisterBenchmark("BM_GuardReplica_Replay", BM_GuardReplica_Replay)}) {
    b->Threads(1)->Threads(8)->UseRealTime()->Unit(benchmark::kMicrosecond);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const char* uri = std::getenv("IDEM_BENCH_PG_URI");
  if (uri == nullptr || *uri == '\0') {
    std::printf(
        "idem_bench_postgres: IDEM_BENCH_PG_URI is not set; skipping the PostgreSQL "
        "benchmarks\n");
    return 0;
  }
  g_uri = uri;
  g_prefix = "bench_" + std::to_string(::getpid()) + "_";
  if (idem::Status ready = store().ensure_schema(); !ready) {
    std::fprintf(stderr, "idem_bench_postgres: %s\n", ready.failure().describe().c_str());
    return 1;
  }
  bare_replay_setup();
  (void)register_replica_benchmarks();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  try {
    pqxx::connection c(g_uri);
    pqxx::work w(c);
    w.exec("DROP TABLE IF EXISTS " + g_prefix + "records");
    w.exec("DROP TABLE IF EXISTS " + g_prefix + "schema");
    w.commit();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idem_bench_postgres: could not drop the bench tables: %s\n", e.what());
  }
  return 0;
}
