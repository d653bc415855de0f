#pragma once
// The fixture of the kits for stores that carry their own guard (token stores, request-ID
// caches): a fresh store from Traits::make(Options) before every case, the store's time, and the
// checks both kits make, each written once here.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "idem/error.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem::testing {

/// How racing callers of one key fared, each call's outcome counted once.
struct RaceTally {
  int runs = 0;      // handler runs
  int executed = 0;  // outcomes that ran the handler
  int replayed = 0;  // outcomes that replayed the expected result
  int busy = 0;      // in_progress refusals
  int other = 0;     // anything else: a wrong value or another error
};

/// S made by Traits: `static std::unique_ptr<S> make(Options guard)`, `static void advance(S&,
/// std::chrono::milliseconds)` and `static constexpr std::chrono::milliseconds lease`.
template <class S, class Traits>
class GuardedStoreTest : public ::testing::Test {
 public:
  using Store = S;
  static constexpr std::chrono::milliseconds kLease = Traits::lease;

 protected:
  void SetUp() override { make(Options{.scope = "kit", .lease = kLease}); }

  /// Replaces the case's store with a fresh one whose execute() runs under `guard`.
  void make(Options guard) {
    store_ = Traits::make(std::move(guard));
    // A skip or a fatal failure recorded in make() keeps the case's body from running.
    if (!store_ && !IsSkipped() && !HasFatalFailure()) {
      FAIL() << "the traits' make() returned no store and neither skipped nor failed the case";
    }
  }
  S& store() { return *store_; }
  void advance(std::chrono::milliseconds d) { Traits::advance(*store_, d); }

  /// `threads` callers start together and each calls `call` once with one handler, which counts
  /// its runs, takes a few milliseconds and returns `result`.
  template <class Call>
  RaceTally race_on_one_key(int threads, const std::string& result, Call call) {
    std::atomic<int> runs{0}, executed{0}, replayed{0}, busy{0}, other{0};
    const std::function<std::string()> handler = [&] {
      runs.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds{5});
      return result;
    };
    std::atomic<bool> go{false};
    std::vector<std::thread> callers;
    for (int i = 0; i < threads; ++i) {
      callers.emplace_back([&] {
        while (!go) std::this_thread::yield();
        auto out = call(handler);
        if (out && out.value() == result) {
          (out.executed() ? executed : replayed).fetch_add(1);
        } else if (!out && out.error() == errc::in_progress) {
          busy.fetch_add(1);
        } else {
          other.fetch_add(1);
        }
      });
    }
    go = true;
    for (std::thread& t : callers) t.join();
    return RaceTally{runs.load(), executed.load(), replayed.load(), busy.load(), other.load()};
  }

  /// Claims `request`, sees it held, lets its lease lapse and claims it again: the second holder
  /// acquires, and the first can neither commit nor abort. The two claims land in the arguments.
  void lapse_and_claim_again(const ClaimRequest& request, Claim& first, Claim& second) {
    Result<Claim> c = store().claim(request);
    ASSERT_TRUE(c) << c.failure().describe();
    ASSERT_EQ(c->status, ClaimStatus::acquired);
    first = std::move(c).value();
    Result<Claim> held = store().claim(request);
    ASSERT_TRUE(held);
    EXPECT_EQ(held->status, ClaimStatus::in_progress);
    EXPECT_GT(held->lease_remaining.count(), 0);
    advance(kLease + kLease / 2);
    c = store().claim(request);
    ASSERT_TRUE(c) << c.failure().describe();
    ASSERT_EQ(c->status, ClaimStatus::acquired);
    second = std::move(c).value();
    const Completion done{ClaimStatus::completed, "late", std::chrono::hours{1}};
    EXPECT_EQ(store().commit(Ticket{request.key, first.fence}, done).error(), errc::lease_lost);
    EXPECT_EQ(store().abort(Ticket{request.key, first.fence}).error(), errc::lease_lost);
    ASSERT_TRUE(store().commit(Ticket{request.key, second.fence}, done).ok());
  }

  /// A commit retried under its fence after it landed (its answer lost) succeeds; other bytes
  /// under that fence are lease_lost, and the record replays the first bytes. The ticket lands
  /// in `ticket`.
  void commit_twice_under_one_fence(const ClaimRequest& request, std::string_view bytes,
                                    Ticket& ticket) {
    Result<Claim> held = store().claim(request);
    ASSERT_TRUE(held) << held.failure().describe();
    ASSERT_EQ(held->status, ClaimStatus::acquired);
    ticket = Ticket{request.key, held->fence};
    const Completion done{ClaimStatus::completed, bytes, std::chrono::hours{1}};
    ASSERT_TRUE(store().commit(ticket, done).ok());
    const Status repeated = store().commit(ticket, done);
    EXPECT_TRUE(repeated.ok()) << repeated.failure().describe();
    const Completion other{ClaimStatus::completed, "other", std::chrono::hours{1}};
    EXPECT_EQ(store().commit(ticket, other).error(), errc::lease_lost);
    Result<Claim> replay = store().claim(request);
    ASSERT_TRUE(replay);
    EXPECT_EQ(replay->status, ClaimStatus::completed);
    EXPECT_EQ(replay->result, bytes);
  }

  /// The two-phase form: begin<T>() holds `key` until commit() or fail(); fail() frees it for a
  /// retry (here with `payload`, the first try had `first_payload`); after commit(`result`) a
  /// repeat's begin() replays it, and execute() answers alike.
  template <class K>
  void begin_holds_until_commit_or_fail(const K& key, std::string_view first_payload,
                                        std::string_view payload, const std::string& result) {
    {
      auto held = store().template begin<std::string>(key, first_payload);
      ASSERT_TRUE(held.acquired()) << held.outcome().message();
      EXPECT_GT(held.fence(), 0u);
      auto busy = store().template begin<std::string>(key, first_payload);
      ASSERT_FALSE(busy.acquired());
      EXPECT_EQ(busy.outcome().error(), errc::in_progress) << busy.outcome().message();
      EXPECT_GT(busy.retry_after().count(), 0);
      held.fail("declined");
      EXPECT_FALSE(held.acquired());
    }
    auto again = store().template begin<std::string>(key, payload);
    ASSERT_TRUE(again.acquired()) << again.outcome().message();
    Outcome<std::string> committed = again.commit(result);
    ASSERT_TRUE(committed) << committed.message();
    EXPECT_TRUE(committed.executed());
    EXPECT_TRUE(committed.recorded());

    auto repeat = store().template begin<std::string>(key, payload);
    ASSERT_FALSE(repeat.acquired());
    ASSERT_TRUE(repeat.outcome()) << repeat.outcome().message();
    EXPECT_TRUE(repeat.outcome().replayed());
    EXPECT_EQ(repeat.outcome().value(), result);
    auto by_execute = store().execute(key, payload, [] { return std::string("other"); });
    ASSERT_TRUE(by_execute) << by_execute.message();
    EXPECT_TRUE(by_execute.replayed());
    EXPECT_EQ(by_execute.value(), result);
  }

 private:
  std::unique_ptr<S> store_;
};

}  // namespace idem::testing
