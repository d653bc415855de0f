#pragma once
// The exactly-once race across processes, shared by the single-server and cluster tests: forked
// children, each with its own client and guard over RedisStore and several threads, run every
// key; each handler counts its runs in Redis, and each caller records the value it got.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "idem/guard.hpp"
#include "idem/redis/client.hpp"
#include "idem/redis/store.hpp"
#include "redis/redis_test_support.hpp"
#include "support/child_processes.hpp"

namespace idem::testing {

struct ProcessRace {
  int processes = 4;
  int threads = 2;
  int keys = 12;
  std::string prefix;  // of the records and of the counters
  std::string scope;
};

/// Forks race.processes children, each running `child(p)` (its failures), whose `callers`
/// callers each call every key once, the handler counting its runs in Redis (INCR
/// <prefix>runs:<key>) and each caller recording the value it got (RPUSH <prefix>seen:<key>).
/// Then every key's handler ran once, and every caller got that run's value.
inline void expect_each_key_runs_once_in_children(const ProcessRace& race, int callers,
                                                  const std::function<int(int p)>& child,
                                                  redis::Client& check) {
  expect_children_pass(race.processes, child);
  for (int i = 0; i < race.keys; ++i) {
    const std::string k = std::to_string(i);
    EXPECT_EQ(redis_integer(check, {"GET", race.prefix + "runs:" + k}), -1);  // a string reply
    EXPECT_EQ(redis_string(check, {"GET", race.prefix + "runs:" + k}), "1") << "key " << k;
    Result<redis::Reply> seen = check.command({"LRANGE", race.prefix + "seen:" + k, "0", "-1"});
    ASSERT_TRUE(seen);
    ASSERT_EQ(seen->elements.size(), static_cast<std::size_t>(race.processes * callers));
    for (const redis::Reply& v : seen->elements) EXPECT_EQ(v.str, seen->elements.front().str);
  }
}

/// The race with RedisStore and race.threads threads in each child; `make_client` builds each
/// child's client, `check` reads the counters after.
inline void expect_each_key_runs_once(
    const ProcessRace& race, const std::function<std::shared_ptr<redis::Client>()>& make_client,
    redis::Client& check) {
  using namespace std::chrono_literals;
  expect_each_key_runs_once_in_children(
      race, race.threads,
      [&](int p) {
        auto client = make_client();
        RedisStore store(client, RedisStoreOptions{.prefix = race.prefix});
        IdempotencyGuard guard{store,
                               Options{.scope = race.scope, .in_progress = Wait{.timeout = 20s}}};
        std::atomic<int> failures{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < race.threads; ++t) {
          threads.emplace_back([&, t] {
            for (int i = 0; i < race.keys; ++i) {
              const std::string k = std::to_string((i + p + t) % race.keys);
              auto out = guard.execute(k, [&] {
                (void)client->command({"INCR", race.prefix + "runs:" + k});
                std::this_thread::sleep_for(2ms);
                return "made by " + std::to_string(p) + "/" + std::to_string(t);
              });
              if (!out) {
                failures.fetch_add(1);
                continue;
              }
              (void)client->command({"RPUSH", race.prefix + "seen:" + k, out.value()});
            }
          });
        }
        for (auto& th : threads) th.join();
        return failures.load();
      },
      check);
}

}  // namespace idem::testing
