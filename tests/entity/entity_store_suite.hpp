#pragma once
// One typed suite for VersionStore and StateMachineStore on every backend: memory, SQLite and
// PostgreSQL instantiate it with their target (entity_common.hpp, sql_targets.hpp).

#include <barrier>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "entity/entity_common.hpp"

namespace idem::testing {

using std::chrono::milliseconds;

template <class T>
class EntityStoreTest : public ::testing::Test {
 protected:
  using B = typename T::Backend;
  using Orders = StateMachineStore<TransitionTable, B>;
  using Accounts = VersionStore<B>;

  void SetUp() override {
    std::string why;
    if (!target_.set_up(why)) GTEST_SKIP() << why;
  }

  std::unique_ptr<Orders> orders(Options guard = Options{
                                     .scope = "orders",
                                     .in_progress = Wait{.timeout = std::chrono::seconds{20}}}) {
    StateMachineStoreOptions<B> o{.backend = target_.connection(), .guard = std::move(guard)};
    if constexpr (T::kSql) o.table = EntityTable{target_.names().orders(), "id", "state"};
    return std::make_unique<Orders>(order_machine(), std::move(o));
  }

  std::unique_ptr<Accounts> accounts(
      Options guard = Options{.scope = "accounts",
                              .in_progress = Wait{.timeout = std::chrono::seconds{20}}}) {
    VersionStoreOptions<B> o{.backend = target_.connection(), .guard = std::move(guard)};
    if constexpr (T::kSql) o.table = EntityTable{target_.names().accounts(), "id", "version"};
    return std::make_unique<Accounts>(std::move(o));
  }

  T target_;
};

TYPED_TEST_SUITE_P(EntityStoreTest);

// ---- state machine ------------------------------------------------------------------------------

TYPED_TEST_P(EntityStoreTest, OrderLifecycleAppliesEachEventOnceAndReplaysRepeats) {
  auto store = this->orders();
  auto& t = this->target_;
  t.create_order(*store, "o-1");
  t.create_order(*store, "o-2");
  auto step = [&](const char* order, const char* event) {
    return store->execute(EventKey{order, event}, [&](Context& ctx) {
      t.add_effect(ctx, std::string(order) + "/" + event);
      return std::string(event) + "-receipt";
    });
  };
  for (const char* event : {"PAY", "SHIP", "COMPLETE"}) {
    auto first = step("o-1", event);
    ASSERT_TRUE(first.has_value()) << event << ": " << first.message();
    EXPECT_TRUE(first.executed());
    auto again = step("o-1", event);  // a retried request: replays, the handler does not run
    ASSERT_TRUE(again.has_value()) << event << ": " << again.message();
    EXPECT_TRUE(again.replayed());
    EXPECT_EQ(again.value(), std::string(event) + "-receipt");
    EXPECT_EQ(t.effects(std::string("o-1/") + event), 1);
  }
  EXPECT_EQ(store->state("o-1").value(), "COMPLETED");

  for (const char* event : {"PAY", "REFUND", "REFUNDED"}) {
    auto out = step("o-2", event);
    ASSERT_TRUE(out.has_value()) << event << ": " << out.message();
  }
  EXPECT_EQ(store->state("o-2").value(), "REFUNDED");
  auto late = step("o-2", "SHIP");
  EXPECT_EQ(late.error(), errc::invalid_transition);
  EXPECT_EQ(late.current_state(), "REFUNDED");
}

TYPED_TEST_P(EntityStoreTest, EventsNotAllowedFromTheCurrentStateAreRejectedNamingBoth) {
  auto observer = std::make_shared<Observer>();
  auto store = this->orders(Options{.scope = "orders", .observer = observer});
  auto& t = this->target_;
  t.create_order(*store, "o-3");
  int runs = 0;
  auto ship = store->execute(EventKey{"o-3", "SHIP"}, [&] { return ++runs; });
  ASSERT_FALSE(ship.has_value());
  EXPECT_EQ(ship.error(), errc::invalid_transition);
  EXPECT_EQ(ship.current_state(), "CREATED");
  EXPECT_NE(ship.message().find("SHIP"), std::string::npos) << ship.message();
  EXPECT_NE(ship.message().find("CREATED"), std::string::npos) << ship.message();
  EXPECT_NE(ship.message().find("PAID"), std::string::npos) << ship.message();

  auto complete = store->execute(EventKey{"o-3", "COMPLETE"}, [&] { return ++runs; });
  EXPECT_EQ(complete.error(), errc::invalid_transition);
  EXPECT_NE(complete.message().find("COMPLETE"), std::string::npos) << complete.message();
  EXPECT_NE(complete.message().find("CREATED"), std::string::npos) << complete.message();
  EXPECT_NE(complete.message().find("SHIPPED"), std::string::npos) << complete.message();
  EXPECT_EQ(observer->counters().rejected, 2u);

  auto unknown = store->execute(EventKey{"o-3", "FLY"}, [&] { return ++runs; });
  EXPECT_EQ(unknown.error(), errc::invalid_transition);
  auto missing = store->execute(EventKey{"no-such-order", "PAY"}, [&] { return ++runs; });
  EXPECT_EQ(missing.error(), errc::key_invalid);
  EXPECT_EQ(runs, 0);
  EXPECT_EQ(store->state("o-3").value(), "CREATED");

  // An operation id lets the same event name another operation; a repeat of it replays.
  auto pay = store->execute(EventKey{"o-3", "PAY", "pay-1"}, [&] { return ++runs; });
  ASSERT_TRUE(pay.has_value()) << pay.message();
  auto again = store->execute(EventKey{"o-3", "PAY", "pay-1"}, [&] { return ++runs; });
  ASSERT_TRUE(again.has_value()) << again.message();
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.value(), 1);
  EXPECT_EQ(runs, 1);
}

// Observers label an entity store's events with its backend's name, as they do a record store's.
TYPED_TEST_P(EntityStoreTest, EventsNameTheBackendAsTheirStore) {
  std::vector<std::string> stores;
  std::mutex m;
  auto observer = std::make_shared<Observer>([&](const EventInfo& e) {
    const std::lock_guard lock(m);
    stores.emplace_back(e.store);
  });
  auto orders = this->orders(Options{.scope = "orders", .observer = observer});
  auto accounts = this->accounts(Options{.scope = "accounts", .observer = observer});
  const std::string expected(orders->stats().store);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(accounts->stats().store, expected);
  this->target_.create_order(*orders, "o-9");
  ASSERT_TRUE(orders->execute(EventKey{"o-9", "PAY"}, [] { return 1; }).has_value());
  EXPECT_EQ(orders->execute(EventKey{"o-9", "FLY"}, [] { return 2; }).error(),
            errc::invalid_transition);
  this->target_.create_account(*accounts, "acct-9", 10);
  ASSERT_TRUE(accounts->execute(VersionKey{"acct-9", 0}, [] { return 3; }).has_value());
  ASSERT_GE(stores.size(), 2u);  // the two executed calls at least
  for (const std::string& s : stores) EXPECT_EQ(s, expected);
}

TYPED_TEST_P(EntityStoreTest, EightThreadsPayingOneOrderRunTheHandlerOnceAndTheRestReplay) {
  auto store = this->orders();
  auto& t = this->target_;
  t.create_order(*store, "o-race");
  constexpr int kThreads = 8;
  std::barrier start(kThreads);
  std::atomic<int> runs{0};
  std::vector<std::optional<TransitionOutcome<std::string>>> outs(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      outs[static_cast<std::size_t>(i)].emplace(
          store->execute(EventKey{"o-race", "PAY"}, "amount=1999", [&](Context& ctx) {
            runs.fetch_add(1);
            t.add_effect(ctx, "paid o-race");
            std::this_thread::sleep_for(milliseconds{30});
            return "receipt-" + std::to_string(i);
          }));
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(runs.load(), 1);
  int executed = 0;
  std::set<std::string> values;
  for (auto& out : outs) {
    ASSERT_TRUE(out && out->has_value()) << (out ? out->message() : "no outcome");
    executed += out->executed() ? 1 : 0;
    values.insert(out->value());
  }
  EXPECT_EQ(executed, 1);
  EXPECT_EQ(values.size(), 1u);
  EXPECT_EQ(t.effects("paid o-race"), 1);
  EXPECT_EQ(store->state("o-race").value(), "PAID");
}

TYPED_TEST_P(EntityStoreTest, AHandlerThatThrowsLeavesTheStateAndItsWritesUnchanged) {
  auto store = this->orders();
  auto& t = this->target_;
  t.create_order(*store, "o-4");
  EXPECT_THROW((void)store->execute(EventKey{"o-4", "PAY"},
                                    [&](Context& ctx) -> int {
                                      t.add_effect(ctx, "doomed o-4");
                                      throw std::runtime_error("card declined");
                                    }),
               std::runtime_error);
  EXPECT_EQ(store->state("o-4").value(), "CREATED");
  if constexpr (TypeParam::kSql) {
    EXPECT_EQ(t.effects("doomed o-4"), 0);  // rolled back with the transition
  }
  auto retry = store->execute(EventKey{"o-4", "PAY"}, [] { return 7; });
  ASSERT_TRUE(retry.has_value()) << retry.message();
  EXPECT_TRUE(retry.executed());
  EXPECT_EQ(store->state("o-4").value(), "PAID");

  auto accounts = this->accounts();
  t.create_account(*accounts, "a-4", 100);
  EXPECT_THROW((void)accounts->execute(VersionKey{"a-4", 0},
                                       [&](Context& ctx) -> int {
                                         t.write_balance(ctx, "a-4", 0);
                                         throw std::runtime_error("boom");
                                       }),
               std::runtime_error);
  EXPECT_EQ(accounts->version("a-4").value(), 0u);
  if constexpr (TypeParam::kSql) {
    EXPECT_EQ(t.balance("a-4"), 100);
  }
}

TYPED_TEST_P(EntityStoreTest, ARememberedFailureLeavesTheStateAndItsWritesUnchangedAndReplays) {
  auto& t = this->target_;
  auto store = this->orders(Options{.scope = "orders",
                                    .in_progress = Wait{.timeout = std::chrono::seconds{20}},
                                    .remember_failures = true});
  t.create_order(*store, "o-5");
  int runs = 0;
  auto pay = [&](Context& ctx) -> int {
    ++runs;
    t.add_effect(ctx, "payment o-5");
    throw std::runtime_error("card declined");
  };
  EXPECT_THROW((void)store->execute(EventKey{"o-5", "PAY"}, pay), std::runtime_error);
  EXPECT_EQ(store->state("o-5").value(), "CREATED");
  if constexpr (TypeParam::kSql) {
    EXPECT_EQ(t.effects("payment o-5"), 0);  // the handler's write rolled back
  }
  auto repeat = store->execute(EventKey{"o-5", "PAY"}, pay);  // remembered: replays the failure
  ASSERT_FALSE(repeat.has_value());
  EXPECT_EQ(repeat.error(), errc::handler_failed);
  EXPECT_TRUE(repeat.replayed());
  EXPECT_NE(repeat.message().find("card declined"), std::string::npos) << repeat.message();
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(store->state("o-5").value(), "CREATED");
  // Another operation of the same event is free to run and moves the entity.
  auto other = store->execute(EventKey{"o-5", "PAY", "second-card"}, [] { return 2; });
  ASSERT_TRUE(other.has_value()) << other.message();
  EXPECT_EQ(store->state("o-5").value(), "PAID");

  auto accounts = this->accounts(Options{.scope = "accounts",
                                         .in_progress = Wait{.timeout = std::chrono::seconds{20}},
                                         .remember_failures = true});
  t.create_account(*accounts, "a-5", 100);
  EXPECT_THROW((void)accounts->execute(VersionKey{"a-5", 0, "debit-1"},
                                       [&](Context& ctx) -> int {
                                         t.write_balance(ctx, "a-5", 0);
                                         throw std::runtime_error("boom");
                                       }),
               std::runtime_error);
  EXPECT_EQ(accounts->version("a-5").value(), 0u);
  if constexpr (TypeParam::kSql) {
    EXPECT_EQ(t.balance("a-5"), 100);
  }
  auto again = accounts->execute(VersionKey{"a-5", 0, "debit-1"}, [] { return 1; });
  EXPECT_EQ(again.error(), errc::handler_failed);
  EXPECT_EQ(accounts->version("a-5").value(), 0u);
}

// ---- optimistic version
// ---------------------------------------------------------------------------

TYPED_TEST_P(EntityStoreTest, VersionBumpReplaysItsOperationAndRefusesOtherStaleVersions) {
  auto store = this->accounts();
  auto& t = this->target_;
  t.create_account(*store, "a-1", 500);
  int runs = 0;
  auto debit = [&](Context& ctx) {
    ++runs;
    const long long b = t.read_balance(ctx, "a-1");
    t.write_balance(ctx, "a-1", b - 50);
    return b - 50;
  };
  auto first = store->execute(VersionKey{"a-1", 0}, "debit=50", debit);
  ASSERT_TRUE(first.has_value()) << first.message();
  EXPECT_EQ(first.value(), 450);
  EXPECT_EQ(store->version("a-1").value(), 1u);

  auto repeat = store->execute(VersionKey{"a-1", 0}, "debit=50", debit);
  ASSERT_TRUE(repeat.has_value()) << repeat.message();
  EXPECT_TRUE(repeat.replayed());
  EXPECT_EQ(repeat.value(), 450);

  auto other = store->execute(VersionKey{"a-1", 0}, "debit=70", debit);
  EXPECT_EQ(other.error(), errc::payload_mismatch);

  auto stale = store->execute(VersionKey{"a-1", 7}, "debit=50", debit);
  ASSERT_FALSE(stale.has_value());
  EXPECT_EQ(stale.error(), errc::version_conflict);
  ASSERT_TRUE(stale.current_version().has_value());
  EXPECT_EQ(*stale.current_version(), 1u);
  EXPECT_TRUE(is_retryable(stale.error()));

  auto next = store->execute(VersionKey{"a-1", 1}, "debit=50", debit);
  ASSERT_TRUE(next.has_value()) << next.message();
  EXPECT_EQ(next.value(), 400);
  // Version 1 -> 2 was made by the operation at 1; a repeat of the one at 0 still replays.
  auto old = store->execute(VersionKey{"a-1", 0}, "debit=50", debit);
  EXPECT_TRUE(old.replayed());
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(t.balance("a-1"), 400);
  EXPECT_EQ(store->execute(VersionKey{"nobody", 0}, debit).error(), errc::key_invalid);
}

TYPED_TEST_P(EntityStoreTest, EightConcurrentDebitsWithRetriesLoseNoUpdateAndApplyOnce) {
  auto store = this->accounts();
  auto& t = this->target_;
  constexpr long long kStart = 10'000;
  t.create_account(*store, "acct", kStart);
  constexpr int kThreads = 8;
  std::barrier start(kThreads);
  std::atomic<long long> applied{0};
  std::atomic<int> failures{0};
  std::atomic<int> attempts{0};
  std::vector<std::thread> threads;
  auto debit = [&](int i) {
    const long long amount = 10 * (i + 1);
    const std::string op = "debit-" + std::to_string(i);
    return store->retry(
        "acct", op, "amount=" + std::to_string(amount),
        [&, amount, op](Context& ctx) {
          const long long before = t.read_balance(ctx, "acct");
          std::this_thread::sleep_for(milliseconds{2});  // read-modify-write, with room for a race
          t.write_balance(ctx, "acct", before - amount);
          t.add_effect(ctx, op);
          return before - amount;
        },
        CasRetry{.attempts = 50});
  };
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      auto out = debit(i);
      if (!out.has_value()) {
        failures.fetch_add(1);
        ADD_FAILURE() << "debit " << i << ": " << out.message();
        return;
      }
      applied.fetch_add(10 * (i + 1));
      attempts.fetch_add(out.attempts());
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(applied.load(), 360);
  EXPECT_GE(attempts.load(), kThreads);
  EXPECT_EQ(t.balance("acct"), kStart - applied.load());
  EXPECT_EQ(store->version("acct").value(), static_cast<std::uint64_t>(kThreads));
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(t.effects("debit-" + std::to_string(i)), 1) << i;

  // The same debit again (its response was lost, say): replays, whatever the version now.
  auto repeat = debit(3);
  ASSERT_TRUE(repeat.has_value()) << repeat.message();
  EXPECT_TRUE(repeat.replayed());
  EXPECT_EQ(repeat.attempts(), 1);
  EXPECT_EQ(t.balance("acct"), kStart - applied.load());
  EXPECT_EQ(t.effects("debit-3"), 1);
}

REGISTER_TYPED_TEST_SUITE_P(EntityStoreTest, OrderLifecycleAppliesEachEventOnceAndReplaysRepeats,
                            EventsNotAllowedFromTheCurrentStateAreRejectedNamingBoth,
                            EventsNameTheBackendAsTheirStore,
                            EightThreadsPayingOneOrderRunTheHandlerOnceAndTheRestReplay,
                            AHandlerThatThrowsLeavesTheStateAndItsWritesUnchanged,
                            ARememberedFailureLeavesTheStateAndItsWritesUnchangedAndReplays,
                            VersionBumpReplaysItsOperationAndRefusesOtherStaleVersions,
                            EightConcurrentDebitsWithRetriesLoseNoUpdateAndApplyOnce);

}  // namespace idem::testing
