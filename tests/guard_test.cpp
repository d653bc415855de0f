// IdempotencyGuard over MemoryStore: every outcome of docs/design.md §5-§8, time driven by a
// ManualClock.

#include "idem/guard.hpp"

#include <gtest/gtest.h>

#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "idem/idem.hpp"
#include "support/flaky_store.hpp"

namespace idem {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using namespace std::string_literals;

class GuardTest : public ::testing::Test {
 protected:
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  MemoryStore store_{MemoryStoreOptions{.clock = clock_}};

  Options options(Options o = {}) {
    if (o.scope.empty()) o.scope = "orders.create";
    o.clock = clock_;
    return o;
  }
};

TEST_F(GuardTest, FirstCallExecutesAndRepeatsReplay) {
  IdempotencyGuard guard{store_, options()};
  int runs = 0;
  auto handler = [&] {
    ++runs;
    return "order-" + std::to_string(runs);
  };

  // The first call runs and records; each repeat replays that run's value, nothing else.
  for (int i = 0; i < 4; ++i) {
    Outcome<std::string> out = guard.execute("k-1", "{\"qty\":1}", handler);
    ASSERT_TRUE(out);
    EXPECT_EQ(out.value(), "order-1");
    EXPECT_EQ(out.executed(), i == 0) << "call " << i;
    EXPECT_EQ(out.recorded(), i == 0) << "call " << i;
    EXPECT_EQ(out.replayed(), i > 0) << "call " << i;
  }
  EXPECT_EQ(runs, 1);
}

TEST_F(GuardTest, EmptyResultsReplayAsThemselves) {
  IdempotencyGuard guard{store_, options()};
  int runs = 0;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(guard
                  .execute("zero",
                           [&] {
                             ++runs;
                             return 0;
                           })
                  .value(),
              0);
    EXPECT_EQ(guard
                  .execute("false",
                           [&] {
                             ++runs;
                             return false;
                           })
                  .value(),
              false);
    EXPECT_EQ(guard
                  .execute("empty",
                           [&] {
                             ++runs;
                             return std::string();
                           })
                  .value(),
              "");
    EXPECT_TRUE(guard
                    .execute("bytes",
                             [&] {
                               ++runs;
                               return std::vector<std::byte>{};
                             })
                    .value()
                    .empty());
    Outcome<void> v = guard.execute("void", [&] { ++runs; });
    EXPECT_TRUE(v.has_value());
    EXPECT_EQ(v.replayed(), i == 1);
  }
  EXPECT_EQ(runs, 5);
}

TEST_F(GuardTest, AnotherPayloadUnderTheSameKeyIsAMismatch) {
  IdempotencyGuard guard{store_, options()};
  int runs = 0;
  ASSERT_TRUE(guard.execute("k", "amount=10", [&] { return ++runs; }));
  Outcome<int> other = guard.execute("k", "amount=99", [&] { return ++runs; });
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error(), errc::payload_mismatch);
  EXPECT_EQ(http_status(other.error()), 422);
  EXPECT_FALSE(other.message().empty());
  EXPECT_EQ(runs, 1);
}

TEST_F(GuardTest, PrincipalsAndScopesAreSeparateIntents) {
  IdempotencyGuard orders{store_, options()};
  IdempotencyGuard refunds{store_, options({.scope = "orders.refund"})};
  auto echo = [](std::string v) { return [v] { return v; }; };

  EXPECT_EQ(orders.execute(Key{"k", "alice"}, echo("alice's")).value(), "alice's");
  EXPECT_EQ(orders.execute(Key{"k", "bob"}, echo("bob's")).value(), "bob's");
  EXPECT_EQ(orders.execute(Key{"k"}, echo("nobody's")).value(), "nobody's");
  EXPECT_EQ(refunds.execute(Key{"k", "alice"}, echo("refund")).value(), "refund");

  EXPECT_EQ(orders.execute(Key{"k", "alice"}, echo("x")).value(), "alice's");
  EXPECT_EQ(orders.execute(Key{"k", "bob"}, echo("x")).value(), "bob's");
  // The join is length-prefixed: moving bytes between principal and id makes another key.
  EXPECT_EQ(orders.execute(Key{"bk", "alice"}, echo("other")).value(), "other");
  EXPECT_EQ(orders.execute(Key{"ek", "alic"}, echo("another")).value(), "another");
}

TEST_F(GuardTest, KeysAreOpaqueBytesAndOnlyEmptyOrOversizedAreInvalid) {
  IdempotencyGuard guard{store_, options()};
  const std::vector<std::string> keys = {"a\0b"s,         "a\0c"s,
                                         "\xff\xfe\x80"s, "'; DROP TABLE t; --",
                                         "%s%n{}\r\n",    std::string(256, '\0')};
  for (const std::string& k : keys) {
    Outcome<std::string> out = guard.execute(k, [&] { return k; });
    ASSERT_TRUE(out) << out.message();
    EXPECT_TRUE(out.executed());
  }
  for (const std::string& k : keys) {
    Outcome<std::string> out = guard.execute(k, [] { return "wrong"s; });
    ASSERT_TRUE(out.replayed());
    EXPECT_EQ(out.value(), k);
  }

  int runs = 0;
  for (const Key& bad : {Key{""}, Key{std::string_view(keys.back().data(), 0), "p"}}) {
    Outcome<int> out = guard.execute(bad, [&] { return ++runs; });
    EXPECT_EQ(out.error(), errc::key_invalid);
    EXPECT_EQ(http_status(out.error()), 400);
  }
  const std::string too_long(257, 'k');
  EXPECT_EQ(guard.execute(too_long, [&] { return ++runs; }).error(), errc::key_invalid);
  EXPECT_EQ(guard.execute(Key{"k", too_long}, [&] { return ++runs; }).error(), errc::key_invalid);
  EXPECT_NE(guard.execute(too_long, [&] { return ++runs; }).message().find("257"),
            std::string::npos);
  EXPECT_EQ(runs, 0);
}

TEST_F(GuardTest, HeldKeyIsInProgressUnderFailFast) {
  IdempotencyGuard guard{store_, options()};
  Outcome<int> inner = Outcome<int>::failed(make_failure(errc::store_unavailable));
  auto outer = guard.execute("k", [&] {
    inner = guard.execute("k", [] { return 2; });
    return 1;
  });
  EXPECT_EQ(outer.value(), 1);
  EXPECT_EQ(inner.error(), errc::in_progress);
  EXPECT_EQ(http_status(inner.error()), 409);
  EXPECT_TRUE(is_retryable(inner.error()));
}

TEST_F(GuardTest, WaitTimesOutAsInProgress) {
  IdempotencyGuard guard{store_, options({.in_progress = Wait{.timeout = seconds{2}}})};
  const auto before = clock_->now();
  Outcome<int> inner = Outcome<int>::failed(make_failure(errc::store_unavailable));
  ASSERT_TRUE(guard.execute("k", [&] {
    inner = guard.execute("k", [] { return 2; });
    return 1;
  }));
  EXPECT_EQ(inner.error(), errc::in_progress);
  const auto waited = clock_->now() - before;
  EXPECT_GE(waited, seconds{2});
  EXPECT_LT(waited, seconds{3});  // the pauses never overshoot the deadline by a backoff
}

TEST(GuardWaitTest, WaiterReplaysWhenTheHolderCompletes) {
  MemoryStore store;  // real steady clock: two threads really wait on each other
  IdempotencyGuard guard{store, Options{.scope = "s", .in_progress = Wait{.timeout = seconds{10}}}};
  std::promise<void> holding, release;
  std::atomic<int> runs{0};
  std::thread holder([&] {
    auto out = guard.execute("k", [&] {
      runs.fetch_add(1);
      holding.set_value();
      release.get_future().wait();
      return "done"s;
    });
    EXPECT_TRUE(out.executed());
  });
  holding.get_future().wait();
  auto waiter = std::async(std::launch::async, [&] {
    return guard.execute("k", [&] {
      runs.fetch_add(1);
      return "second"s;
    });
  });
  std::this_thread::sleep_for(milliseconds{50});
  release.set_value();
  Outcome<std::string> waited = waiter.get();
  holder.join();
  ASSERT_TRUE(waited) << waited.message();
  EXPECT_TRUE(waited.replayed());
  EXPECT_EQ(waited.value(), "done");
  EXPECT_EQ(runs.load(), 1);
}

TEST_F(GuardTest, WaiterTakesOverAnExpiredLeaseAndTheStaleHolderIsFenced) {
  auto observer = std::make_shared<Observer>();
  IdempotencyGuard guard{store_, options({.lease = milliseconds{500},
                                          .in_progress = Wait{.timeout = seconds{5}},
                                          .observer = observer})};
  Fence holder_fence = 0, taker_fence = 0;
  Outcome<std::string> taker = Outcome<std::string>::failed(make_failure(errc::in_progress));
  // The first holder stalls past its lease; meanwhile a second caller waits, takes over and
  // finishes. The first holder's late commit must then change nothing.
  Outcome<std::string> stale = guard.execute("k", [&](Context& ctx) {
    holder_fence = ctx.fence();
    taker = guard.execute("k", [&](Context& inner) {
      taker_fence = inner.fence();
      return "from taker"s;
    });
    return "from stale holder"s;
  });

  ASSERT_TRUE(taker);
  EXPECT_TRUE(taker.recorded());
  EXPECT_EQ(taker_fence, holder_fence + 1);

  // The value it made is not thrown away, but it is not the key's answer: the taker's is. So
  // `if (stale)` is false and error() says lease_lost (HTTP 409: the client's retry replays).
  ASSERT_TRUE(stale.has_value());
  EXPECT_FALSE(stale);
  EXPECT_EQ(stale.value(), "from stale holder");
  EXPECT_FALSE(stale.recorded());
  EXPECT_EQ(stale.commit_error(), errc::lease_lost);
  EXPECT_EQ(stale.error(), errc::lease_lost);
  EXPECT_EQ(http_status(stale.error()), 409);
  EXPECT_FALSE(stale.message().empty());

  EXPECT_EQ(guard.execute("k", [] { return "x"s; }).value(), "from taker");
  EXPECT_EQ(observer->counters().lease_lost, 1u);
}

TEST_F(GuardTest, ContextExtendsTheLease) {
  IdempotencyGuard guard{store_, options({.lease = seconds{1}})};
  Outcome<int> probe = Outcome<int>::failed(make_failure(errc::store_unavailable));
  ASSERT_TRUE(guard.execute("k", [&](Context& ctx) {
    clock_->advance(milliseconds{800});
    EXPECT_TRUE(ctx.extend_lease(seconds{10}).ok());
    clock_->advance(milliseconds{800});  // past the first lease, within the extended one
    probe = guard.execute("k", [] { return 2; });
    return 1;
  }));
  EXPECT_EQ(probe.error(), errc::in_progress);
}

TEST_F(GuardTest, ExtendAfterTakeoverIsLeaseLost) {
  IdempotencyGuard guard{store_, options({.lease = seconds{1}})};
  std::error_code extended;
  auto stale = guard.execute("k", [&](Context& ctx) {
    clock_->advance(seconds{2});
    EXPECT_TRUE(guard.execute("k", [] { return 2; }).executed());  // takes over
    extended = ctx.extend_lease().error();
    return 1;
  });
  EXPECT_TRUE(stale.executed());
  EXPECT_EQ(stale.error(), errc::lease_lost);  // superseded by the taker's result
  EXPECT_EQ(extended, errc::lease_lost);
}

TEST_F(GuardTest, ThrowingHandlerReleasesTheKeyForARetry) {
  auto observer = std::make_shared<Observer>();
  IdempotencyGuard guard{store_, options({.observer = observer})};
  int runs = 0;
  EXPECT_THROW((void)guard.execute("k",
                                   [&]() -> int {
                                     ++runs;
                                     throw std::runtime_error("card declined");
                                   }),
               std::runtime_error);
  Outcome<int> retry = guard.execute("k", [&] { return ++runs; });
  EXPECT_TRUE(retry.executed());  // not stuck until the lease runs out
  EXPECT_EQ(retry.value(), 2);
  EXPECT_EQ(observer->counters().aborted, 1u);
}

TEST_F(GuardTest, RememberedFailureReplaysUntilItExpires) {
  IdempotencyGuard guard{store_, options({.ttl = seconds{60}, .remember_failures = true})};
  int runs = 0;
  auto failing = [&]() -> int {
    ++runs;
    throw std::runtime_error("card declined");
  };
  EXPECT_THROW((void)guard.execute("k", failing), std::runtime_error);

  Outcome<int> replay = guard.execute("k", failing);
  ASSERT_FALSE(replay);
  EXPECT_TRUE(replay.replayed());
  EXPECT_EQ(replay.error(), errc::handler_failed);
  EXPECT_NE(replay.message().find("card declined"), std::string::npos);
  EXPECT_THROW((void)replay.value(), Error);
  EXPECT_EQ(runs, 1);

  clock_->advance(seconds{61});
  EXPECT_EQ(guard.execute("k", [&] { return ++runs; }).value(), 2);
}

TEST_F(GuardTest, OversizedResultIsReturnedOnceAndNeverRunAgain) {
  IdempotencyGuard guard{store_, options({.max_result_size = 8})};
  int runs = 0;
  auto big = [&] {
    ++runs;
    return std::string(9, 'x');
  };
  Outcome<std::string> first = guard.execute("k", big);
  ASSERT_TRUE(first);
  EXPECT_EQ(first.value(), std::string(9, 'x'));
  EXPECT_FALSE(first.recorded());
  EXPECT_EQ(first.commit_error(), errc::result_too_large);

  Outcome<std::string> again = guard.execute("k", big);
  EXPECT_EQ(again.error(), errc::result_too_large);
  EXPECT_EQ(runs, 1);

  EXPECT_TRUE(guard.execute("small", [] { return std::string(8, 'x'); }).recorded());
}

TEST_F(GuardTest, ValueOfAnErrorThrowsIdemError) {
  IdempotencyGuard guard{store_, options()};
  Outcome<int> bad = guard.execute("", [] { return 1; });
  try {
    (void)bad.value();
    FAIL() << "value() of an error must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::key_invalid);
    EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos);
  }
}

TEST_F(GuardTest, UndecodableStoredResultIsRecordCorruptNotAValue) {
  IdempotencyGuard guard{store_, options()};
  ASSERT_TRUE(guard.execute("k", [] { return "three"s; }));  // 5 bytes: not an int64
  int runs = 0;
  Outcome<std::int64_t> read_as_int = guard.execute("k", [&] { return std::int64_t{++runs}; });
  EXPECT_EQ(read_as_int.error(), errc::record_corrupt);
  EXPECT_EQ(runs, 0);
}

TEST_F(GuardTest, InvalidOptionsAreRefusedAtConstruction) {
  EXPECT_THROW(IdempotencyGuard(store_, options({.lease = milliseconds{0}})),
               std::invalid_argument);
  EXPECT_THROW(IdempotencyGuard(store_, options({.ttl = milliseconds{-1}})), std::invalid_argument);
  EXPECT_THROW(IdempotencyGuard(store_, options({.commit_retry = {.attempts = 0}})),
               std::invalid_argument);
  // A zero first pause never grows: it would spin, so it is refused.
  EXPECT_THROW(
      IdempotencyGuard(store_, options({.in_progress = Wait{.initial_backoff = milliseconds{0}}})),
      std::invalid_argument);
  EXPECT_THROW(
      IdempotencyGuard(store_, options({.in_progress = Wait{.initial_backoff = milliseconds{50},
                                                            .max_backoff = milliseconds{10}}})),
      std::invalid_argument);
}

struct Receipt {
  std::string id;
  std::int64_t cents = 0;
};

struct Unencodable {};

}  // namespace

template <>
struct codec<Receipt> {
  static std::string encode(const Receipt& r) {
    return codec<std::int64_t>::encode(r.cents) + r.id;
  }
  static Receipt decode(std::string_view bytes) {
    if (bytes.size() < 8) throw Error(make_error_code(errc::record_corrupt), "short receipt");
    return Receipt{std::string(bytes.substr(8)), codec<std::int64_t>::decode(bytes.substr(0, 8))};
  }
};

template <>
struct codec<Unencodable> {
  static std::string encode(const Unencodable&) { throw std::runtime_error("cannot encode"); }
  static Unencodable decode(std::string_view) { return {}; }
};

namespace {

TEST_F(GuardTest, ResultThatCannotBeEncodedIsNeverRunAgain) {
  IdempotencyGuard guard{store_, options()};  // remember_failures is off
  int runs = 0;
  auto handler = [&] {
    ++runs;
    return Unencodable{};
  };
  EXPECT_THROW((void)guard.execute("k", handler), std::runtime_error);
  Outcome<Unencodable> again = guard.execute("k", handler);
  EXPECT_EQ(again.error(), errc::handler_failed);
  EXPECT_NE(again.message().find("cannot encode"), std::string::npos);
  EXPECT_EQ(runs, 1);  // its effect happened once; the retry must not repeat it
}

TEST_F(GuardTest, UserTypesRoundTripThroughTheirCodec) {
  IdempotencyGuard guard{store_, options()};
  auto charge = [] { return Receipt{"rcpt-\0-1"s, -1234}; };
  ASSERT_TRUE(guard.execute("k", charge).executed());
  Outcome<Receipt> again = guard.execute("k", charge);
  ASSERT_TRUE(again.replayed());
  EXPECT_EQ(again.value().id, "rcpt-\0-1"s);
  EXPECT_EQ(again.value().cents, -1234);
}

// The guard's failure paths, driven by a store that fails on demand.
class GuardStoreFailureTest : public ::testing::Test {
 protected:
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  testing::FlakyStore store_{MemoryStoreOptions{.clock = clock_}};
  std::shared_ptr<Observer> observer_ = std::make_shared<Observer>();
  IdempotencyGuard<testing::FlakyStore> guard_{
      store_, Options{.scope = "s", .clock = clock_, .observer = observer_}};

  // A repeat of "k" with the handler `40 + ++runs` replays the first run's 41: it ran once.
  void expect_a_repeat_replays_the_first_run(int& runs) {
    Outcome<int> again = guard_.execute("k", [&] { return 40 + ++runs; });
    ASSERT_TRUE(again) << again.message();
    EXPECT_TRUE(again.replayed());
    EXPECT_EQ(again.value(), 41);
    EXPECT_EQ(runs, 1);
  }
};

TEST_F(GuardStoreFailureTest, ClaimFailureIsStoreUnavailableAndTheHandlerDoesNotRun) {
  store_.failing_claims = 1;
  int runs = 0;
  Outcome<int> out = guard_.execute("k", [&] { return ++runs; });
  EXPECT_EQ(out.error(), errc::store_unavailable);
  EXPECT_EQ(http_status(out.error()), 503);
  EXPECT_NE(out.message().find("injected"), std::string::npos);
  EXPECT_EQ(runs, 0);
  EXPECT_EQ(observer_->counters().store_errors, 1u);
}

TEST_F(GuardStoreFailureTest, CommitIsRetriedAndThenRecorded) {
  store_.failing_commits = 2;  // attempts = 3 by default
  Outcome<int> out = guard_.execute("k", [] { return 7; });
  EXPECT_TRUE(out.recorded());
  EXPECT_EQ(store_.commit_calls.load(), 3);
  EXPECT_TRUE(guard_.execute("k", [] { return 8; }).replayed());
}

TEST_F(GuardStoreFailureTest, CommitThatKeepsFailingReturnsTheValueUnrecorded) {
  store_.failing_commits = 100;
  int runs = 0;
  Outcome<int> out = guard_.execute("k", [&] { return ++runs; });
  ASSERT_TRUE(out);  // a finished result is never thrown away
  EXPECT_EQ(out.value(), 1);
  EXPECT_FALSE(out.recorded());
  EXPECT_EQ(out.commit_error(), errc::store_unavailable);
  EXPECT_EQ(store_.commit_calls.load(), 3);
  EXPECT_EQ(observer_->counters().store_errors, 1u);
}

// The commit lands and its answer is lost: the retry under the same fence finds its own commit
// and succeeds. Nobody took the key over, so this is no lease_lost.
TEST_F(GuardStoreFailureTest, CommitWhoseReplyIsLostIsRecordedNotATakeover) {
  store_.lost_commit_replies = 1;
  int runs = 0;
  Outcome<int> out = guard_.execute("k", [&] { return 40 + ++runs; });
  ASSERT_TRUE(out) << out.message();
  EXPECT_EQ(out.value(), 41);
  EXPECT_TRUE(out.recorded()) << out.commit_failure().describe();
  EXPECT_FALSE(out.commit_error());
  EXPECT_EQ(store_.commit_calls.load(), 2);
  EXPECT_EQ(observer_->counters().lease_lost, 0u);
  expect_a_repeat_replays_the_first_run(runs);
}

// Every try of the commit lands or may have, and no answer comes back: the caller gets its value
// with outcome_unknown, never recorded; the record did land, so a repeat replays it.
TEST_F(GuardStoreFailureTest, CommitWhoseEveryReplyIsLostIsOutcomeUnknownAndARepeatReplays) {
  store_.lost_commit_replies = 3;  // attempts = 3 by default
  int runs = 0;
  Outcome<int> out = guard_.execute("k", [&] { return 40 + ++runs; });
  ASSERT_TRUE(out) << out.message();  // the value is still the key's answer
  EXPECT_EQ(out.value(), 41);
  EXPECT_FALSE(out.recorded());
  EXPECT_EQ(out.commit_error(), errc::outcome_unknown) << out.commit_failure().describe();
  EXPECT_EQ(store_.commit_calls.load(), 3);
  EXPECT_EQ(observer_->counters().store_errors, 1u);
  EXPECT_EQ(observer_->counters().lease_lost, 0u);
  expect_a_repeat_replays_the_first_run(runs);
}

// A first try whose answer was lost, then tries that cannot reach the store: those prove
// nothing about the first, so the commit stays in doubt (outcome_unknown, not
// store_unavailable). It had landed: a repeat replays.
TEST_F(GuardStoreFailureTest, ADoubtfulCommitStaysOutcomeUnknownWhenLaterTriesCannotReachTheStore) {
  using Fault = testing::FlakyStore::CommitFault;
  store_.next_commits({Fault::lose_reply, Fault::fail, Fault::fail});
  int runs = 0;
  Outcome<int> out = guard_.execute("k", [&] { return 40 + ++runs; });
  ASSERT_TRUE(out) << out.message();
  EXPECT_FALSE(out.recorded());
  EXPECT_EQ(out.commit_error(), errc::outcome_unknown) << out.commit_failure().describe();
  EXPECT_NE(out.commit_failure().describe().find("injected loss of the commit's reply"),
            std::string::npos)
      << out.commit_failure().describe();
  EXPECT_NE(out.commit_failure().describe().find("injected commit failure"), std::string::npos)
      << out.commit_failure().describe();
  expect_a_repeat_replays_the_first_run(runs);
}

// The commit is lost on its way every time (and, in the second round, the store then cannot be
// reached): outcome_unknown. It never landed: the key stays held until its lease passes, then a
// repeat takes it over and runs the handler once more, and that result is the key's only one.
TEST_F(GuardStoreFailureTest, CommitLostOnItsWayIsOutcomeUnknownAndARepeatRunsOnceTheLeasePasses) {
  using Fault = testing::FlakyStore::CommitFault;
  for (const bool then_unreachable : {false, true}) {
    SCOPED_TRACE(then_unreachable ? "lost, then unreachable" : "lost every time");
    const std::string key = then_unreachable ? "k-unreachable" : "k-lost";
    if (then_unreachable) {
      store_.next_commits({Fault::lose_request, Fault::fail, Fault::fail});
    } else {
      store_.next_commits({Fault::lose_request, Fault::lose_request, Fault::lose_request});
    }
    int runs = 0;
    Outcome<int> out = guard_.execute(key, [&] { return 40 + ++runs; });
    ASSERT_TRUE(out) << out.message();
    EXPECT_EQ(out.value(), 41);
    EXPECT_FALSE(out.recorded());
    EXPECT_EQ(out.commit_error(), errc::outcome_unknown) << out.commit_failure().describe();
    Outcome<int> held = guard_.execute(key, [&] { return 40 + ++runs; });
    EXPECT_EQ(held.error(), errc::in_progress) << held.message();
    clock_->advance(Options{}.lease + std::chrono::seconds{1});
    Outcome<int> rerun = guard_.execute(key, [&] { return 40 + ++runs; });
    ASSERT_TRUE(rerun) << rerun.message();
    EXPECT_TRUE(rerun.executed());
    EXPECT_TRUE(rerun.recorded()) << rerun.commit_failure().describe();
    EXPECT_EQ(rerun.value(), 42);
    Outcome<int> replay = guard_.execute(key, [&] { return 40 + ++runs; });
    ASSERT_TRUE(replay) << replay.message();
    EXPECT_TRUE(replay.replayed());
    EXPECT_EQ(replay.value(), 42);
    EXPECT_EQ(runs, 2);
  }
}

TEST(GuardConceptTest, HandlersWithAndWithoutContextDeduceTheirResult) {
  static_assert(std::is_same_v<handler_result_t<int (*)()>, int>);
  static_assert(std::is_same_v<handler_result_t<std::string (*)(Context&)>, std::string>);
  static_assert(std::is_same_v<handler_result_t<void (*)(Context&)>, void>);
  static_assert(std::is_same_v<handler_result_t<const std::string& (*)()>, std::string>);
  MemoryStore store;
  IdempotencyGuard guard{store, Options{.scope = "s"}};
  std::string held = "by reference";
  const std::string& ref = held;
  Outcome<std::string> copy = guard.execute("k", [&]() -> const std::string& { return ref; });
  EXPECT_EQ(copy.value(), "by reference");
}

// A failed record's bytes are the failure it replays (tag, errc, message). Bytes that are not one
// (no tag, no code, a code idem does not have) are record_corrupt: never a success, never a
// fresh run, never another error code.
TEST_F(GuardTest, FailedRecordThatHoldsNoFailureIsRecordCorruptNotASuccess) {
  const Options o = options();
  const detail::EffectiveKey key(o.scope, "", "k");
  const ClaimRequest request{key.view(), o.hash(""), seconds{30}, seconds{60}};
  for (const std::string& bytes : {""s, "X"s, "F"s, "F\x00oops"s, "F\x7fnope"s, "C\x01"s}) {
    SCOPED_TRACE(::testing::PrintToString(bytes));
    const Claim held = store_.claim(request).value();
    ASSERT_EQ(held.status, ClaimStatus::acquired);
    ASSERT_TRUE(store_
                    .commit(Ticket{key.view(), held.fence},
                            Completion{ClaimStatus::failed, bytes, seconds{60}})
                    .ok());
    IdempotencyGuard guard{store_, o};
    int runs = 0;
    Outcome<int> out = guard.execute("k", [&] { return ++runs; });
    EXPECT_EQ(out.error(), errc::record_corrupt) << out.message();
    EXPECT_EQ(runs, 0);
    clock_->advance(seconds{61});  // the record expires: the next bytes get a fresh one
  }
}

}  // namespace
}  // namespace idem
