// Fail-fast racing: with 8 threads on the same keys each handler still runs once, and every
// caller gets either that handler's value or in_progress, never another value.

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "idem/idem.hpp"

namespace idem {
namespace {

TEST(GuardRaceTest, FailFastCallersGetTheValueOrInProgress) {
  constexpr int kThreads = 8;
  constexpr int kKeys = 64;
  MemoryStore store{MemoryStoreOptions{.shards = 4}};
  IdempotencyGuard guard{store, Options{.scope = "race"}};
  std::vector<std::atomic<int>> runs(kKeys);
  std::atomic<int> wrong{0}, refused{0}, answered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 20; ++round) {
        for (int k = 0; k < kKeys; ++k) {
          auto out = guard.execute(std::to_string(k), [&, k] {
            runs[k].fetch_add(1);
            return k * 10;
          });
          if (out) {
            answered.fetch_add(1);
            if (out.value() != k * 10) wrong.fetch_add(1);
          } else if (out.error() == errc::in_progress) {
            refused.fetch_add(1);
          } else {
            wrong.fetch_add(1);
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int k = 0; k < kKeys; ++k) EXPECT_EQ(runs[k].load(), 1) << "key " << k;
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(answered.load() + refused.load(), kThreads * 20 * kKeys);
}

}  // namespace
}  // namespace idem
