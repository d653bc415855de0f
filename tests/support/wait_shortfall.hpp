#pragma once
// A Redis store with durability (one replica, a short timeout) against a server that has none:
// every WAIT falls short. What the blocking and the asynchronous store both promise then: the
// claim's shortfall is only reported; the commit's reaches the caller (the value is not known to
// be recorded durably: outcome_unknown, and why says so); each of the guard's commit retries
// finds the same commit on the primary and waits for it again (never lease_lost); the write
// stands on the primary, so a repeat replays it, and a replay writes nothing (no WAIT).

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "idem/guard.hpp"

namespace idem::testing {

class WaitShortfall {
 public:
  /// The durability's on_timeout: counts the reports, each of 0 acknowledgements out of 1.
  std::function<void(std::string_view, int, int)> on_timeout() {
    return [this](std::string_view op, int acked, int wanted) {
      EXPECT_EQ(acked, 0);
      EXPECT_EQ(wanted, 1);
      last_op_ = op;
      reports_.fetch_add(1);
    };
  }

  /// `execute(fn)` runs fn through a guard over the durable store under one key and returns its
  /// outcome; `timeouts()` is the store's replication_timeouts().
  template <class Execute, class Timeouts>
  void expect_commit_unconfirmed_then_replayed(Execute execute, Timeouts timeouts) {
    auto out = execute([] { return 7; });
    ASSERT_TRUE(out) << out.message();
    EXPECT_EQ(out.value(), 7);
    EXPECT_FALSE(out.recorded());
    EXPECT_EQ(out.commit_error(), errc::outcome_unknown);
    EXPECT_NE(out.commit_failure().message.find("commit not confirmed: 0 of 1 replicas"),
              std::string::npos)
        << out.commit_failure().message;
    const int commits = Options{}.commit_retry.attempts;
    EXPECT_EQ(reports_.load(), 1 + commits);  // after the claim and after every commit attempt
    EXPECT_EQ(last_op_, "commit");
    EXPECT_EQ(timeouts(), 1u + commits);
    auto replay = execute([] { return 8; });
    ASSERT_TRUE(replay.replayed()) << replay.message();
    EXPECT_EQ(replay.value(), 7);
    EXPECT_EQ(timeouts(), 1u + commits);
  }

  static std::uint64_t expected_timeouts() { return 1u + Options{}.commit_retry.attempts; }

 private:
  std::atomic<int> reports_{0};
  std::string last_op_;
};

}  // namespace idem::testing
