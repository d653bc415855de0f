// A helper process for the entity store tests: pays one order from several threads, or holds a
// transition or a version bump inside its handler until it is SIGKILLed.
//
//   idem_entity_worker <sqlite|postgres> <path-or-uri> <prefix> pay <order> <threads>
//       prints "ran" per handler run and "got <value>" / "err <message>" per call
//   idem_entity_worker ... hold-pay <order>
//       PAYs with a handler that records an effect, prints "inside", then sleeps
//   idem_entity_worker ... hold-debit <account>
//       bumps the account's version 0 with a handler that zeroes the balance, prints "inside",
//       then sleeps
//   idem_entity_worker ... fence-turn <order> <ledger> <throw|commit>
//       PAYs once: the handler records an effect, appends its fence to <ledger>, prints
//       "fence <n>", then throws ("threw") or returns ("done")
//   idem_entity_worker ... fence-race <order> <rounds> <ledger>
//       PAYs <rounds> times, each handler appending its fence to <ledger> and throwing
//   idem_entity_worker ... hold-fence <order> <ledger>
//       PAYs with a handler that appends its fence to <ledger>, prints "fence <n>" and "inside",
//       then sleeps

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "entity/sql_targets.hpp"
#include "support/fence_ledger.hpp"
#include "support/say.hpp"

using namespace idem;
using namespace idem::testing;

namespace {

// The fence commands: PAY handlers that write an effect in the claim's transaction, then append
// their fence to the ledger, outside it.
template <class Target, class Orders>
int fences(Target& t, Orders& orders, const std::string& cmd, const std::string& entity,
           char** extra) {
  auto record = [&](Context& ctx, const std::string& ledger) {
    t.add_effect(ctx, "fenced " + entity);
    ledger_append(ledger, ctx.fence());
    return ctx.fence();
  };
  if (cmd == "fence-turn") {
    const std::string ledger = extra[0];
    const bool fail = std::string(extra[1]) == "throw";
    return fence_turn(
        [&](auto handler) {
          return orders.execute(EventKey{entity, "PAY"},
                                [&](Context& ctx) { return handler(ctx); });
        },
        [&](Context& ctx) { return record(ctx, ledger); }, fail, "paid");
  }
  if (cmd == "fence-race") {
    const int rounds = std::atoi(extra[0]);
    const std::string ledger = extra[1];
    for (int r = 0; r < rounds; ++r) {
      try {
        auto out = orders.execute(EventKey{entity, "PAY"}, [&](Context& ctx) {
          (void)record(ctx, ledger);
          std::this_thread::sleep_for(std::chrono::milliseconds{2});
          throw std::runtime_error("failed after the downstream write");
          return std::string("never");
        });
        say("err " + out.message());  // every run throws: an outcome is an error
      } catch (const std::runtime_error&) {
      }
    }
    return 0;
  }
  if (cmd == "hold-fence") {
    auto out = orders.execute(EventKey{entity, "PAY"}, [&](Context& ctx) {
      say("fence " + std::to_string(record(ctx, extra[0])));
      say("inside");
      std::this_thread::sleep_for(std::chrono::seconds{60});
      return std::string("never");
    });
    say(out ? "done" : "error " + out.message());
    return 5;
  }
  return 2;
}

template <class Target>
int run(Target& t, const std::string& cmd, const std::string& entity, int threads, char** extra) {
  using B = typename Target::Backend;
  const Options guard{.scope = "orders", .in_progress = Wait{.timeout = std::chrono::seconds{30}}};
  if (cmd == "hold-debit") {
    VersionStore<B> accounts{
        VersionStoreOptions<B>{.backend = t.connection(),
                               .table = EntityTable{t.names().accounts(), "id", "version"},
                               .guard = Options{.scope = "accounts"}}};
    auto out = accounts.execute(VersionKey{entity, 0}, [&](Context& ctx) {
      t.write_balance(ctx, entity, 0);
      t.add_effect(ctx, "debit-killed");
      say("inside");
      std::this_thread::sleep_for(std::chrono::seconds{60});
      return 0;
    });
    say(out ? "done" : "error " + out.message());
    return 5;
  }
  StateMachineStore<TransitionTable, B> orders{
      order_machine(),
      StateMachineStoreOptions<B>{.backend = t.connection(),
                                  .table = EntityTable{t.names().orders(), "id", "state"},
                                  .guard = guard}};
  if (cmd == "hold-pay") {
    auto out = orders.execute(EventKey{entity, "PAY"}, [&](Context& ctx) {
      t.add_effect(ctx, "pay-killed");
      say("inside");
      std::this_thread::sleep_for(std::chrono::seconds{60});
      return std::string("never");
    });
    say(out ? "done" : "error " + out.message());
    return 5;
  }
  if (cmd.rfind("fence-", 0) == 0 || cmd == "hold-fence") {
    return fences(t, orders, cmd, entity, extra);
  }
  if (cmd != "pay") return 2;
  std::vector<std::thread> pool;
  for (int th = 0; th < threads; ++th) {
    pool.emplace_back([&, th] {
      auto out = orders.execute(EventKey{entity, "PAY"}, "amount=1999", [&](Context& ctx) {
        t.add_effect(ctx, "paid " + entity);
        say("ran");
        std::this_thread::sleep_for(std::chrono::milliseconds{50});
        return "receipt-" + std::to_string(::getpid()) + "-" + std::to_string(th);
      });
      say(out ? "got " + out.value() : "err " + out.message());
    });
  }
  for (auto& th : pool) th.join();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (!has_arguments(argc, 6, "idem_entity_worker <sqlite|postgres> <where> <prefix> <cmd> ..."))
    return 2;
  const std::string backend = argv[1], where = argv[2], prefix = argv[3], cmd = argv[4];
  const std::string entity = argv[5];
  const int threads = argc > 6 ? std::atoi(argv[6]) : 1;
  // The fence commands' arguments after the entity: two, or one for hold-fence.
  const bool fence_cmd = cmd.rfind("fence-", 0) == 0 || cmd == "hold-fence";
  if (fence_cmd && argc != (cmd == "hold-fence" ? 7 : 8)) {
    std::fprintf(stderr, "worker: bad command line\n");
    return 2;
  }
  char** extra = argv + 6;
  try {
    if (backend == "sqlite") {
      SqliteTarget t(where, prefix);
      return run(t, cmd, entity, threads, extra);
    }
    PostgresTarget t(where, prefix);
    return run(t, cmd, entity, threads, extra);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker: %s\n", e.what());
    return 3;
  }
}
