// A helper process for the SQL store tests: races with the other workers on the same keys, or
// claims a key and waits to be SIGKILLed.
//
//   idem_sql_worker <sqlite|postgres> <path-or-uri> <prefix> <lease|transactional> race <scope>
//   <keys> <rounds> <threads> [replica-uri]
//       prints "ran <k>" per handler run and "got <k> <value>" / "err <k> <message>" per call;
//       with a replica (postgres only), claims read it first and "replica hits <n>" ends the run
//   idem_sql_worker ... lease hold <key> <lease-ms>
//       claims <key> through the store, prints "fence <n>", then sleeps
//   idem_sql_worker ... transactional hold-tx <scope> <key>
//       runs a handler that inserts a business row, prints "inside", then sleeps
//   idem_sql_worker ... first-use <scope> <keys> <start-ns>
//       waits until the steady clock reads <start-ns> (shared by the processes of one machine),
//       then runs each key once through a store that had not been used yet (no ensure_schema
//       first), printing as race does

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sql/sql_test_support.hpp"

using namespace idem;
using namespace idem::testing;

namespace {

std::mutex out_mutex;
void say(const std::string& line) {
  std::lock_guard lock(out_mutex);
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

int race(const Target& t, SqlStore& store, const std::string& scope, int keys, int rounds,
         int threads) {
  IdempotencyGuard guard{store, Options{.scope = scope,
                                        .lease = std::chrono::seconds{10},
                                        .in_progress = Wait{.timeout = std::chrono::seconds{30}}}};
  const bool tx = store.mode() == SqlMode::transactional;
  std::vector<std::thread> pool;
  for (int th = 0; th < threads; ++th) {
    pool.emplace_back([&, th] {
      for (int r = 0; r < rounds; ++r) {
        for (int i = 0; i < keys; ++i) {
          const std::string k = "key-" + std::to_string((i + th) % keys);
          auto out = guard.execute(k, [&](Context& ctx) {
            if (tx) insert_business_row(t, ctx, scope + "/" + k, "run");
            say("ran " + k);
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            return "v-" + std::to_string(::getpid()) + "-" + std::to_string(th);
          });
          if (out) {
            say("got " + k + " " + out.value());
          } else {
            say("err " + k + " " + out.error().message());
          }
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  return 0;
}

// The first calls of a new store, all processes starting at one instant: each opens the file
// (perhaps creating it) on its first execute.
int first_use(SqlStore& store, const std::string& scope, int keys, long long start_ns) {
  std::this_thread::sleep_until(std::chrono::steady_clock::time_point(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::nanoseconds{start_ns})));
  IdempotencyGuard guard{
      store, Options{.scope = scope, .in_progress = Wait{.timeout = std::chrono::seconds{30}}}};
  for (int i = 0; i < keys; ++i) {
    const std::string k = "key-" + std::to_string((i + ::getpid()) % keys);
    auto out = guard.execute(k, [&] {
      say("ran " + k);
      return "v-" + std::to_string(::getpid());
    });
    say(out ? "got " + k + " " + out.value() : "err " + k + " " + out.message());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr,
                 "usage: idem_sql_worker <sqlite|postgres> <where> <prefix> <mode> <cmd> ...\n");
    return 2;
  }
  const Target t{std::string(argv[1]) == "sqlite" ? Backend::sqlite : Backend::postgres, argv[2],
                 argv[3]};
  const SqlMode mode = std::string(argv[4]) == "lease" ? SqlMode::lease : SqlMode::transactional;
  const std::string cmd = argv[5];
  const bool with_replica = cmd == "race" && argc == 11;
  std::unique_ptr<SqlStore> store;
  PostgresStore* replicated = nullptr;
  if (with_replica) {
    auto pg = std::make_unique<PostgresStore>(
        PostgresStoreOptions{.uri = t.location,
                             .mode = mode,
                             .table_prefix = t.prefix,
                             .replica = PostgresReplicaOptions{.uri = argv[10]}});
    replicated = pg.get();
    store = std::move(pg);
  } else {
    store = make_store(t, mode);
  }
  if (cmd == "first-use" && argc == 9) {
    return first_use(*store, argv[6], std::atoi(argv[7]), std::atoll(argv[8]));
  }
  if (Status s = store->ensure_schema(); !s) {
    std::fprintf(stderr, "worker: %s\n", s.failure().describe().c_str());
    return 3;
  }
  if (cmd == "race" && (argc == 10 || with_replica)) {
    const int status =
        race(t, *store, argv[6], std::atoi(argv[7]), std::atoi(argv[8]), std::atoi(argv[9]));
    if (replicated != nullptr) {
      say("replica hits " + std::to_string(replicated->replica_counters().hits));
    }
    return status;
  }
  if (cmd == "hold" && argc == 8) {
    const std::string key = argv[6];
    Result<Claim> c = store->claim(ClaimRequest{key, Fingerprint{1, 2},
                                                std::chrono::milliseconds{std::atoi(argv[7])},
                                                std::chrono::hours{1}});
    if (!c || c->status != ClaimStatus::acquired) {
      say("error claim");
      return 4;
    }
    say("fence " + std::to_string(c->fence));
    std::this_thread::sleep_for(std::chrono::seconds{60});
    return 5;  // the test kills us long before
  }
  if (cmd == "hold-tx" && argc == 8) {
    IdempotencyGuard guard{*store, Options{.scope = argv[6]}};
    const std::string key = argv[7];
    auto out = guard.execute(key, [&](Context& ctx) {
      insert_business_row(t, ctx, key, "killed");
      say("inside");
      std::this_thread::sleep_for(std::chrono::seconds{60});
      return std::string("never");
    });
    say(out ? "done" : "error " + out.error().message());
    return 5;
  }
  std::fprintf(stderr, "worker: bad command line\n");
  return 2;
}
