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
//   idem_sql_worker ... fence-turn <scope> <key> <ledger> <throw|commit>
//       runs <key> once: the handler writes a business row (transactional mode), appends its
//       fence to <ledger>, prints "fence <n>", then throws or returns
//   idem_sql_worker ... fence-race <scope> <key> <rounds> <ledger>
//       runs <key> <rounds> times, each handler appending its fence to <ledger> and throwing
//   idem_sql_worker ... hold-fence <scope> <key> <lease-ms> <ledger>
//       the handler appends its fence to <ledger>, prints "inside <n>", then sleeps

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sql/sql_test_support.hpp"
#include "support/fence_ledger.hpp"
#include "support/say.hpp"

using namespace idem;
using namespace idem::testing;

namespace {

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

// A guard that waits for the key's holder (in lease mode, past a dead holder's lease).
Options fence_options(const std::string& scope, std::chrono::milliseconds lease) {
  return Options{
      .scope = scope, .lease = lease, .in_progress = Wait{.timeout = std::chrono::seconds{30}}};
}

// A handler of the fence commands: a write in the claim's transaction (transactional mode), then
// the fence in the ledger, outside it.
Fence record_fence(const Target& t, Context& ctx, const std::string& ledger) {
  if (ctx.native_transaction()) insert_business_row(t, ctx, "fenced", "run");
  ledger_append(ledger, ctx.fence());
  return ctx.fence();
}

int fence_turn(const Target& t, SqlStore& store, const std::string& scope, const std::string& key,
               const std::string& ledger, bool fail) {
  IdempotencyGuard guard{store, fence_options(scope, std::chrono::seconds{1})};
  return idem::testing::fence_turn(
      [&](auto handler) { return guard.execute(key, [&](Context& ctx) { return handler(ctx); }); },
      [&](Context& ctx) { return record_fence(t, ctx, ledger); }, fail, "done");
}

int fence_race(const Target& t, SqlStore& store, const std::string& scope, const std::string& key,
               int rounds, const std::string& ledger) {
  IdempotencyGuard guard{store, fence_options(scope, std::chrono::seconds{10})};
  for (int r = 0; r < rounds; ++r) {
    try {
      auto out = guard.execute(key, [&](Context& ctx) {
        (void)record_fence(t, ctx, ledger);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        throw std::runtime_error("failed after the downstream write");
        return std::string("never");
      });
      say("err " + out.message());  // every run throws: an outcome is an error
    } catch (const std::runtime_error&) {
    }
  }
  return 0;
}

int hold_fence(const Target& t, SqlStore& store, const std::string& scope, const std::string& key,
               int lease_ms, const std::string& ledger) {
  IdempotencyGuard guard{store, fence_options(scope, std::chrono::milliseconds{lease_ms})};
  auto out = guard.execute(key, [&](Context& ctx) {
    say("inside " + std::to_string(record_fence(t, ctx, ledger)));
    std::this_thread::sleep_for(std::chrono::seconds{60});
    return std::string("never");
  });
  say(out ? "done" : "error " + out.message());
  return 5;  // the test kills us long before
}

}  // namespace

int main(int argc, char** argv) {
  if (!has_arguments(argc, 6,
                     "idem_sql_worker <sqlite|postgres> <where> <prefix> <mode> <cmd> ..."))
    return 2;
  const Target t{std::string(argv[1]) == "sqlite" ? Backend::sqlite : Backend::postgres, argv[2],
                 argv[3]};
  const SqlMode mode = std::string(argv[4]) == "lease" ? SqlMode::lease : SqlMode::transactional;
  const std::string cmd = argv[5];
  const bool with_replica = cmd == "race" && argc == 11;
  std::unique_ptr<SqlStore> store;
  PostgresStore* replicated = nullptr;
  if (with_replica) {
    auto pg = std::make_unique<PostgresStore>(
        PostgresStoreOptions{.connection = {.uri = t.location, .table_prefix = t.prefix},
                             .mode = mode,
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
  if (cmd == "fence-turn" && argc == 10) {
    return fence_turn(t, *store, argv[6], argv[7], argv[8], std::string(argv[9]) == "throw");
  }
  if (cmd == "fence-race" && argc == 10) {
    return fence_race(t, *store, argv[6], argv[7], std::atoi(argv[8]), argv[9]);
  }
  if (cmd == "hold-fence" && argc == 10) {
    return hold_fence(t, *store, argv[6], argv[7], std::atoi(argv[8]), argv[9]);
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
