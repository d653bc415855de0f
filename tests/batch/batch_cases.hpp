#pragma once
// The batch conformance cases: execute_batch on one store, each key answered as execute() would
// answer it alone. A fixture type F gives `Store& store()` (a fresh, empty store per test) and
// `static constexpr const char* kName`; its SetUp may skip when the backend is not there.

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

namespace idem::testing {

template <class F>
class BatchTest : public F {};

TYPED_TEST_SUITE_P(BatchTest);

// Fresh, replayed, in-progress, mismatched, invalid and repeated keys in one batch.
TYPED_TEST_P(BatchTest, MixedBatchAnswersEachKeyAsAlone) {
  if (this->IsSkipped()) return;
  auto& store = this->store();
  IdempotencyGuard guard(store, Options{.scope = "batch.mixed", .lease = std::chrono::minutes{1}});

  // Before the batch: "done" completed, "other" completed under another payload, "busy" held.
  ASSERT_TRUE(guard.execute(Key{"done"}, "p", [] { return std::string("old-done"); }));
  ASSERT_TRUE(guard.execute(Key{"other"}, "first", [] { return std::string("old-other"); }));
  auto busy = guard.template begin<std::string>(Key{"busy"}, "p");
  ASSERT_TRUE(busy.acquired());

  const std::vector<BatchItem> items{
      {Key{"fresh-1"}, "p"}, {Key{"done"}, "p"},    {Key{"busy"}, "p"},    {Key{"other"}, "second"},
      {Key{""}, "p"},        {Key{"fresh-2"}, "p"}, {Key{"fresh-1"}, "p"},
  };
  std::vector<std::size_t> ran;
  auto out = guard.execute_batch(items, [&](std::size_t i) {
    ran.push_back(i);
    return "new-" + std::string(items[i].key.id);
  });
  ASSERT_EQ(out.size(), items.size());
  EXPECT_EQ(ran, (std::vector<std::size_t>{0, 5}));

  EXPECT_TRUE(out[0] && out[0].recorded() && !out[0].replayed());
  EXPECT_EQ(out[0].value(), "new-fresh-1");
  EXPECT_TRUE(out[1] && out[1].replayed());
  EXPECT_EQ(out[1].value(), "old-done");
  EXPECT_EQ(out[2].error(), errc::in_progress);
  EXPECT_GT(out[2].retry_after().count(), 0);
  EXPECT_EQ(out[3].error(), errc::payload_mismatch);
  EXPECT_EQ(out[4].error(), errc::key_invalid);
  EXPECT_TRUE(out[5] && out[5].recorded());
  // The second mention of fresh-1 met the first one's hold.
  EXPECT_EQ(out[6].error(), errc::in_progress);

  // The busy key's holder is undisturbed; repeats replay what the batch recorded.
  EXPECT_TRUE(busy.commit("held-result"));
  std::vector<std::size_t> ran_again;
  auto again = guard.execute_batch(items, [&](std::size_t i) {
    ran_again.push_back(i);
    return std::string("never");
  });
  EXPECT_TRUE(ran_again.empty());
  EXPECT_EQ(again[0].value(), "new-fresh-1");
  EXPECT_TRUE(again[0].replayed());
  EXPECT_EQ(again[2].value(), "held-result");
  EXPECT_EQ(again[5].value(), "new-fresh-2");
  EXPECT_EQ(again[6].value(), "new-fresh-1");
  EXPECT_EQ(again[3].error(), errc::payload_mismatch);
}

// A throwing handler releases its key only; the others commit.
TYPED_TEST_P(BatchTest, ThrowingHandlerReleasesOnlyItsKey) {
  if (this->IsSkipped()) return;
  auto& store = this->store();
  IdempotencyGuard guard(store, Options{.scope = "batch.throw"});
  const std::vector<BatchItem> items{{Key{"a"}}, {Key{"b"}}, {Key{"c"}}};
  auto out = guard.execute_batch(items, [&](std::size_t i) -> int {
    if (i == 1) throw std::runtime_error("card declined");
    return static_cast<int>(i);
  });
  EXPECT_EQ(out[0].value(), 0);
  // Released, not remembered: the item says so, and a consumer retries it.
  EXPECT_EQ(out[1].error(), errc::handler_aborted);
  EXPECT_TRUE(is_retryable(out[1].error()));
  EXPECT_NE(out[1].message().find("card declined"), std::string::npos);
  EXPECT_EQ(out[2].value(), 2);
  // b was released: it runs again; a and c replay.
  int runs = 0;
  auto again = guard.execute_batch(items, [&](std::size_t i) {
    ++runs;
    return static_cast<int>(i) + 10;
  });
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(again[0].replayed());
  EXPECT_EQ(again[1].value(), 11);
  EXPECT_TRUE(again[1].recorded());
  EXPECT_EQ(again[2].value(), 2);
}

// Under remember_failures a throwing item's failure is remembered, and its answer says so: not
// retryable, and its repeats replay it without running the handler.
TYPED_TEST_P(BatchTest, ARememberedFailureIsHandlerFailed) {
  if (this->IsSkipped()) return;
  auto& store = this->store();
  IdempotencyGuard guard(store, Options{.scope = "batch.remembered", .remember_failures = true});
  const std::vector<BatchItem> items{{Key{"a"}}, {Key{"b"}}};
  int runs = 0;
  auto out = guard.execute_batch(items, [&](std::size_t i) -> int {
    ++runs;
    if (i == 1) throw std::runtime_error("card declined");
    return static_cast<int>(i);
  });
  EXPECT_EQ(out[0].value(), 0);
  EXPECT_EQ(out[1].error(), errc::handler_failed);
  EXPECT_FALSE(is_retryable(out[1].error()));
  EXPECT_NE(out[1].message().find("card declined"), std::string::npos);
  auto again = guard.execute_batch(items, [&](std::size_t) {
    ++runs;
    return -1;
  });
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(again[1].error(), errc::handler_failed);
  EXPECT_TRUE(again[1].replayed());
}

// Batch holders get fences: a key released by an abort is claimed by the batch under a larger
// fence, and the aborted holder's ticket can no longer commit.
TYPED_TEST_P(BatchTest, BatchClaimsRaiseTheFence) {
  if (this->IsSkipped()) return;
  auto& store = this->store();
  IdempotencyGuard guard(store, Options{.scope = "batch.fence"});
  Fence before = 0;
  {
    auto first = guard.template begin<int>(Key{"k"});
    ASSERT_TRUE(first.acquired());
    before = first.fence();
    first.fail("released");
  }
  Fence inside = 0;
  const std::vector<BatchItem> items{{Key{"k"}}};
  auto out = guard.execute_batch(items, [&](std::size_t, Context& ctx) {
    inside = ctx.fence();
    EXPECT_TRUE(ctx.extend_lease());
    return 7;
  });
  EXPECT_TRUE(out[0].recorded());
  EXPECT_GT(inside, before);
}

// A holder whose lease ran out is taken over by a batch; the old holder's commit is then stale.
TYPED_TEST_P(BatchTest, BatchTakesOverAnExpiredLease) {
  if (this->IsSkipped()) return;
  auto& store = this->store();
  IdempotencyGuard guard(
      store, Options{.scope = "batch.takeover", .lease = std::chrono::milliseconds{150}});
  auto stale = guard.template begin<int>(Key{"k"});
  ASSERT_TRUE(stale.acquired());
  const Fence old = stale.fence();
  std::this_thread::sleep_for(std::chrono::milliseconds{400});
  Fence fresh = 0;
  const std::vector<BatchItem> items{{Key{"k"}}};
  auto out = guard.execute_batch(items, [&](std::size_t, Context& ctx) {
    fresh = ctx.fence();
    return 2;
  });
  EXPECT_TRUE(out[0].recorded());
  EXPECT_GT(fresh, old);
  auto late = stale.commit(1);
  EXPECT_EQ(late.error(), errc::lease_lost);
  auto replay = guard.execute(Key{"k"}, [] { return 3; });
  EXPECT_EQ(replay.value(), 2);
}

// Threads run overlapping batches: each key's handler runs exactly once; every answer is the
// key's one value, or in_progress while its holder runs.
TYPED_TEST_P(BatchTest, ConcurrentBatchesRunEachKeyOnce) {
  if (this->IsSkipped()) return;
  auto& store = this->store();
  IdempotencyGuard guard(store, Options{.scope = "batch.race", .lease = std::chrono::minutes{1}});
  constexpr int kKeys = 60;
  constexpr int kThreads = 4;
  std::vector<std::string> ids;
  for (int k = 0; k < kKeys; ++k) ids.push_back("key-" + std::to_string(k));
  std::mutex m;
  std::map<std::string, int> runs;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 6; ++round) {
        std::vector<BatchItem> items;
        for (int k = 0; k < 20; ++k) items.push_back({Key{ids[(t * 7 + round * 11 + k) % kKeys]}});
        auto out = guard.execute_batch(items, [&](std::size_t i) {
          std::lock_guard lock(m);
          ++runs[std::string(items[i].key.id)];
          return std::string(items[i].key.id);
        });
        for (std::size_t i = 0; i < items.size(); ++i) {
          if (out[i].error() == errc::in_progress) continue;
          if (!out[i] || out[i].value() != items[i].key.id) ++wrong;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  for (const auto& [key, n] : runs) EXPECT_EQ(n, 1) << key;
  // Every key that ran replays its value now.
  std::vector<BatchItem> all;
  for (const auto& [key, n] : runs) all.push_back({Key{key}});
  auto replay = guard.execute_batch(all, [](std::size_t) { return std::string("never"); });
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_TRUE(replay[i].replayed());
    EXPECT_EQ(replay[i].value(), all[i].key.id);
  }
}

REGISTER_TYPED_TEST_SUITE_P(BatchTest, MixedBatchAnswersEachKeyAsAlone,
                            ThrowingHandlerReleasesOnlyItsKey, ARememberedFailureIsHandlerFailed,
                            BatchClaimsRaiseTheFence, BatchTakesOverAnExpiredLease,
                            ConcurrentBatchesRunEachKeyOnce);

}  // namespace idem::testing
