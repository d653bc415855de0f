#pragma once
// The guard on top of the store, through IdempotencyGuard::execute and its Outcome only: each key
// runs once however many threads race on it, a handler that throws leaves the key to a retry,
// and a remembered failure replays. Every record store passes all of them.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "idem/idem.hpp"
#include "idem/testing/detail/conformance_case.hpp"

namespace idem::testing::conformance {

IDEM_TESTING_CASE(GuardRunsEachKeyOnceUnderRacingThreads) {
  constexpr int kThreads = 8;
  constexpr int kKeys = 16;
  constexpr int kRounds = 4;
  IdempotencyGuard guard{this->store(),
                         Options{.scope = this->key("race"),
                                 .in_progress = Wait{.timeout = std::chrono::seconds{20}}}};
  std::vector<std::atomic<int>> runs(kKeys);
  std::mutex seen_mutex;
  std::map<int, std::vector<std::string>> seen;
  std::atomic<int> failures{0};

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        for (int i = 0; i < kKeys; ++i) {
          const int k = (i + t) % kKeys;  // threads meet on every key, in different orders
          auto out = guard.execute("key-" + std::to_string(k), [&, k, t] {
            runs[k].fetch_add(1);
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            return "value of " + std::to_string(k) + " from " + std::to_string(t);
          });
          if (!out) {
            failures.fetch_add(1);
            continue;
          }
          std::lock_guard lock(seen_mutex);
          seen[k].push_back(out.value());
        }
      }
    });
  }
  for (auto& th : threads) th.join();

  EXPECT_EQ(failures.load(), 0);
  for (int k = 0; k < kKeys; ++k) {
    EXPECT_EQ(runs[k].load(), 1) << "key " << k;
    ASSERT_EQ(seen[k].size(), static_cast<std::size_t>(kThreads * kRounds));
    for (const std::string& v : seen[k]) EXPECT_EQ(v, seen[k].front()) << "key " << k;
  }
}

// The guard aborts the claim of a handler that throws: the retry runs the handler again.
IDEM_TESTING_CASE(GuardLeavesTheKeyOfAThrowingHandlerToARetry) {
  IdempotencyGuard guard{this->store(), Options{.scope = this->key("throws")}};
  int runs = 0;
  EXPECT_THROW((void)guard.execute("k",
                                   [&]() -> std::string {
                                     ++runs;
                                     throw std::runtime_error("handler failed");
                                   }),
               std::runtime_error);
  auto retry = guard.execute("k", [&] {
    ++runs;
    return std::string("second run");
  });
  ASSERT_TRUE(retry.has_value()) << retry.message();
  EXPECT_TRUE(retry.executed());
  EXPECT_TRUE(retry.recorded());
  EXPECT_EQ(retry.value(), "second run");
  EXPECT_EQ(runs, 2);
}

// Under remember_failures the guard commits the handler's failure (after rewind() where the store
// has one), and repeats replay it without running the handler.
IDEM_TESTING_CASE(GuardReplaysARememberedFailure) {
  IdempotencyGuard guard{this->store(),
                         Options{.scope = this->key("remembered"), .remember_failures = true}};
  int runs = 0;
  EXPECT_THROW((void)guard.execute("k",
                                   [&]() -> std::string {
                                     ++runs;
                                     throw std::runtime_error("card declined");
                                   }),
               std::runtime_error);
  auto repeat = guard.execute("k", [&] {
    ++runs;
    return std::string("never");
  });
  EXPECT_FALSE(repeat.has_value());
  EXPECT_EQ(repeat.error(), errc::handler_failed);
  EXPECT_TRUE(repeat.replayed());
  EXPECT_NE(repeat.message().find("card declined"), std::string::npos) << repeat.message();
  EXPECT_EQ(runs, 1);
}

}  // namespace idem::testing::conformance
