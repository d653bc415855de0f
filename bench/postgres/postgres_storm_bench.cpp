// The duplicate storm (duplicate_storm.hpp) on PostgresStore in lease mode: woken duplicates
// (LISTEN/NOTIFY) against polled ones (the same store behind a wrapper hiding its wake), beside
// two floors: 31 threads woken by one condition variable, and the bare server doing the storm's
// work with libpq (one listening connection hears the NOTIFY sent with the holder's UPDATE and
// wakes 31 threads, each of which reads the row on a connection of its own).
//
//   IDEM_BENCH_PG_URI=postgresql://user@host/db build/bench/idem_bench_postgres_storm
//
// Without IDEM_BENCH_PG_URI it prints a line and exits 0. Tables get a prefix of this process.

#include <benchmark/benchmark.h>
#include <libpq-fe.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "duplicate_storm.hpp"
#include "idem/postgres/store.hpp"

namespace {

using idem::bench::kDuplicates;
using idem::bench::StormClock;

std::string g_uri;
std::string g_prefix;

idem::PostgresStoreOptions storm_options() {
  // A connection for each duplicate: the pool is not what the storm measures.
  return idem::PostgresStoreOptions{.connection = {.uri = g_uri, .table_prefix = g_prefix},
                                    .pool = {.size = kDuplicates + 2}};
}

template <bool Wakes>
void storm(benchmark::State& state, const std::string& keys) {
  idem::PostgresStore store(storm_options());
  if (!store.ensure_schema()) {
    state.SkipWithError("the PostgreSQL tables could not be made");
    return;
  }
  // The tables outlive a run: each run's keys are its own, or its holders would find the last
  // run's results and never run their handlers.
  static int run = 0;
  idem::bench::run_storm<Wakes>(state, store, keys + std::to_string(run++) + "-");
}

void BM_Storm_Postgres_Woken(benchmark::State& state) { storm<true>(state, "woken-"); }
void BM_Storm_Postgres_Polled(benchmark::State& state) { storm<false>(state, "polled-"); }
void BM_Storm_bare(benchmark::State& state) { idem::bench::run_storm_bare(state); }

// ---- The bare server's storm --------------------------------------------------------------

struct ConnDeleter {
  void operator()(PGconn* c) const noexcept { PQfinish(c); }
};
using Conn = std::unique_ptr<PGconn, ConnDeleter>;

Conn connect() {
  Conn c(PQconnectdb(g_uri.c_str()));
  if (PQstatus(c.get()) != CONNECTION_OK) throw std::runtime_error(PQerrorMessage(c.get()));
  return c;
}

void exec(PGconn* c, const std::string& sql) {
  PGresult* r = PQexec(c, sql.c_str());
  const ExecStatusType s = PQresultStatus(r);
  PQclear(r);
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) throw std::runtime_error(PQerrorMessage(c));
}

// One holder row per storm; the duplicates wait for the NOTIFY the holder's UPDATE transaction
// sends, then each reads the row (its replay). Time: from the holder's handler end (before its
// UPDATE) to the last read answered, as in run_storm.
void BM_Storm_BarePostgres(benchmark::State& state) {
  const std::chrono::milliseconds handler{state.range(0)};
  const std::string table = g_prefix + "bare_storm";
  const std::string channel = g_prefix + "bare_storm_wake";
  try {
    Conn writer = connect();
    exec(writer.get(), "CREATE TABLE IF NOT EXISTS " + table +
                           " (key text PRIMARY KEY, state smallint NOT NULL, result bytea)");
    Conn listener = connect();
    exec(listener.get(), "LISTEN \"" + channel + "\"");
    std::vector<Conn> readers;
    readers.reserve(kDuplicates);
    for (int i = 0; i < kDuplicates; ++i) readers.push_back(connect());

    std::vector<double> times_us;
    long iteration = 0;
    for (auto _ : state) {
      const std::string key = "k" + std::to_string(iteration++);
      exec(writer.get(), "INSERT INTO " + table + " VALUES ('" + key + "', 0, NULL)");
      std::mutex mutex;
      std::condition_variable changed;
      bool done = false;
      int asleep = 0;
      std::atomic<StormClock::rep> last_answer{0};
      std::atomic<int> wrong{0};
      std::vector<std::thread> duplicates;
      duplicates.reserve(kDuplicates);
      for (int i = 0; i < kDuplicates; ++i) {
        duplicates.emplace_back([&, i] {
          {
            std::unique_lock lock(mutex);
            ++asleep;
            changed.notify_all();
            changed.wait(lock, [&] { return done; });
          }
          PGresult* r =
              PQexec(readers[static_cast<std::size_t>(i)].get(),
                     ("SELECT state, result FROM " + table + " WHERE key = '" + key + "'").c_str());
          if (PQntuples(r) != 1 || std::string(PQgetvalue(r, 0, 0)) != "1") wrong.fetch_add(1);
          PQclear(r);
          const StormClock::rep now = StormClock::now().time_since_epoch().count();
          StormClock::rep seen = last_answer.load();
          while (seen < now && !last_answer.compare_exchange_weak(seen, now)) {
          }
        });
      }
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return asleep == kDuplicates; });
      }
      std::this_thread::sleep_for(handler);
      const StormClock::time_point handler_end = StormClock::now();
      exec(writer.get(), "BEGIN; UPDATE " + table + " SET state = 1, result = 'r' WHERE key = '" +
                             key + "'; NOTIFY \"" + channel + "\", '" + key + "'; COMMIT");
      // The listener hears it and wakes the duplicates.
      for (bool heard = false; !heard;) {
        pollfd fd{.fd = PQsocket(listener.get()), .events = POLLIN, .revents = 0};
        (void)::poll(&fd, 1, 1000);
        PQconsumeInput(listener.get());
        while (PGnotify* n = PQnotifies(listener.get())) {
          heard = heard || key == n->extra;
          PQfreemem(n);
        }
      }
      {
        std::lock_guard lock(mutex);
        done = true;
      }
      changed.notify_all();
      for (std::thread& t : duplicates) t.join();
      const double us = std::chrono::duration<double, std::micro>(
                            StormClock::duration(std::max<StormClock::rep>(
                                last_answer - handler_end.time_since_epoch().count(), 0)))
                            .count();
      state.SetIterationTime(us / 1e6);
      times_us.push_back(us);
      if (wrong.load() != 0) {
        state.SkipWithError("a duplicate did not read the committed row");
        break;
      }
    }
    idem::bench::report_storm(state, times_us, {});
    state.counters["calls_per_dup"] = 1;  // one read each (the wake is pushed, not asked for)
    exec(writer.get(), "DROP TABLE IF EXISTS " + table);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

}  // namespace

BENCHMARK(BM_Storm_Postgres_Woken)->Apply(idem::bench::storm_shape);
BENCHMARK(BM_Storm_Postgres_Polled)->Apply(idem::bench::storm_shape);
BENCHMARK(BM_Storm_BarePostgres)->Apply(idem::bench::storm_shape);
BENCHMARK(BM_Storm_bare)->Apply(idem::bench::storm_shape);

int main(int argc, char** argv) {
  const char* uri = std::getenv("IDEM_BENCH_PG_URI");
  if (uri == nullptr || *uri == '\0') {
    std::printf("idem_bench_postgres_storm: IDEM_BENCH_PG_URI is not set; skipping\n");
    return 0;
  }
  g_uri = uri;
  g_prefix = "bench_storm_" + std::to_string(::getpid()) + "_";
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  try {
    Conn c = connect();
    for (const char* t : {"records", "schema", "steps", "entity_ops"}) {
      exec(c.get(), "DROP TABLE IF EXISTS " + g_prefix + t + " CASCADE");
    }
    for (const char* s : {"fences", "entity_fences"}) {
      exec(c.get(), "DROP SEQUENCE IF EXISTS " + g_prefix + s);
    }
    for (const char* f : {"records_wake", "steps_drop"}) {
      exec(c.get(), "DROP FUNCTION IF EXISTS " + g_prefix + f + "()");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idem_bench_postgres_storm: could not drop the bench tables: %s\n",
                 e.what());
  }
  return 0;
}
