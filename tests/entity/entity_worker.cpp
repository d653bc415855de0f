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

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "entity/sql_targets.hpp"

using namespace idem;
using namespace idem::testing;

namespace {

std::mutex out_mutex;
void say(const std::string& line) {
  std::lock_guard lock(out_mutex);
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

template <class Target>
int run(Target& t, const std::string& cmd, const std::string& entity, int threads) {
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
  if (argc < 6) {
    std::fprintf(stderr,
                 "usage: idem_entity_worker <sqlite|postgres> <where> <prefix> <cmd> ...\n");
    return 2;
  }
  const std::string backend = argv[1], where = argv[2], prefix = argv[3], cmd = argv[4];
  const std::string entity = argv[5];
  const int threads = argc > 6 ? std::atoi(argv[6]) : 1;
  try {
    if (backend == "sqlite") {
      SqliteTarget t(where, prefix);
      return run(t, cmd, entity, threads);
    }
    PostgresTarget t(where, prefix);
    return run(t, cmd, entity, threads);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "worker: %s\n", e.what());
    return 3;
  }
}
