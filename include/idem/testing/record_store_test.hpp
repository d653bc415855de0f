#pragma once
// The fixture every conformance case runs in: a fresh store from StoreTraits<S>::make(), the
// store's time, keys of the case's own, and the store calls spelled out briefly.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "idem/fingerprint.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"
#include "idem/testing/store_traits.hpp"

namespace idem::testing {

template <class S>
class RecordStoreTest : public ::testing::Test {
 public:
  using Store = S;
  using Traits = StoreTraits<S>;
  static constexpr std::chrono::milliseconds kLease = Traits::lease;
  static constexpr std::chrono::milliseconds kTtl{std::chrono::hours{1}};

 protected:
  void SetUp() override {
    static std::atomic<unsigned> cases{0};
    run_ = std::to_string(cases.fetch_add(1)) + "." +
           std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
    store_ = Traits::make();
    // A skip or a fatal failure recorded in make() keeps the case's body from running.
    if (!store_ && !IsSkipped() && !HasFatalFailure()) {
      FAIL() << "StoreTraits::make() returned no store and neither skipped nor failed the case";
    }
  }

  S& store() { return *store_; }
  void advance(std::chrono::milliseconds d) { Traits::advance(*store_, d); }

  /// Another store over the same records (StoreTraits::reopen).
  std::unique_ptr<S> reopen() requires Reopenable<S> {
    std::unique_ptr<S> other = Traits::reopen(*store_);
    if (!other) ADD_FAILURE() << "StoreTraits::reopen() returned no store";
    return other;
  }
  /// Destroys the case's store without finishing what it holds, as a crash would leave it.
  void close_store() { store_.reset(); }

  /// A key of this run of this case alone: stores sharing a backend never see each other's
  /// records, and a case run again (--gtest_repeat, a database kept between runs) starts afresh.
  std::string key(std::string_view suffix = "k") const {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string(info->test_suite_name()) + "." + info->name() + "/" + run_ + "/" +
           std::string(suffix);
  }

  Result<Claim> claim(std::string_view k, Fingerprint fp = {1, 2},
                      std::chrono::milliseconds lease = kLease) {
    return claim_in(store(), k, fp, lease);
  }
  static Result<Claim> claim_in(S& s, std::string_view k, Fingerprint fp = {1, 2},
                                std::chrono::milliseconds lease = kLease) {
    return s.claim(ClaimRequest{.key = k, .fingerprint = fp, .lease = lease, .retention = kTtl});
  }

  /// Claims `k` and expects to acquire it; the claim, or a failure of the case.
  Claim acquired(std::string_view k, Fingerprint fp = {1, 2}) {
    return acquired_in(store(), k, fp);
  }
  static Claim acquired_in(S& s, std::string_view k, Fingerprint fp = {1, 2}) {
    Result<Claim> c = claim_in(s, k, fp);
    EXPECT_TRUE(c.has_value()) << (c ? "" : c.failure().describe());
    if (c) {
      EXPECT_EQ(c->status, ClaimStatus::acquired) << "key " << k;
    }
    return std::move(c).value();
  }

  Status commit(std::string_view k, Fence fence, std::string_view bytes,
                ClaimStatus status = ClaimStatus::completed, std::chrono::milliseconds ttl = kTtl) {
    return commit_in(store(), k, fence, bytes, status, ttl);
  }
  static Status commit_in(S& s, std::string_view k, Fence fence, std::string_view bytes,
                          ClaimStatus status = ClaimStatus::completed,
                          std::chrono::milliseconds ttl = kTtl) {
    return s.commit(Ticket{k, fence}, Completion{status, bytes, ttl});
  }

 private:
  std::unique_ptr<S> store_;
  std::string run_;  // this run of the case: a counter and the time it began
};

}  // namespace idem::testing
