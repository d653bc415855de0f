// The API's traps, each closed: views that could dangle own their bytes, a failed Result throws a
// typed error, options keep their owner's defaults when one field is set, a superseded value is
// not the key's answer, and waits honour the configured clock.

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "idem/idem.hpp"
#include "idem/memory/entities.hpp"
#include "idem/memory/request_id_cache.hpp"
#include "idem/memory/token_store.hpp"
#include "idem/state_machine_store.hpp"
#include "idem/version_store.hpp"

namespace idem {
namespace {

using namespace std::chrono_literals;

std::string make_id(int n) { return "order-" + std::to_string(n) + "-with-a-long-suffix-past-sso"; }

TEST(KeyTest, AKeyMadeFromATemporaryStringKeepsItsBytes) {
  const Key key{make_id(1)};       // the temporary is gone after this line
  std::string overwrite(64, 'x');  // reuses freed memory if the key dangled
  EXPECT_EQ(key.id, make_id(1));
  const Key copied = key;
  Key moved = Key{make_id(2), "tenant"};
  EXPECT_EQ(copied.id, make_id(1));
  EXPECT_EQ(moved.id, make_id(2));
  EXPECT_EQ(moved.principal, "tenant");
  moved = copied;
  EXPECT_EQ(moved.id, make_id(1));
  EXPECT_EQ(moved, copied);
  EXPECT_NE(moved.id.data(), copied.id.data());  // each owns its copy
}

TEST(KeyTest, AGuardTakesATemporaryIdAndAViewAlike) {
  MemoryStore store;
  IdempotencyGuard guard{store, Options{.scope = "keys"}};
  auto first = guard.execute(make_id(3), [] { return 1; });
  const std::string id = make_id(3);
  auto again = guard.execute(id, [] { return 2; });
  ASSERT_TRUE(again) << again.message();
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.value(), 1);
}

TEST(LayeredRequestTest, FieldsAssignedFromTemporariesOwnTheirBytes) {
  LayeredRequest req;
  req.token = make_id(4);  // a temporary std::string, e.g. tokens.issue(...).value()
  req.payload = std::string(100, 'p');
  std::string overwrite(64, 'y');
  EXPECT_EQ(std::string_view(req.token), make_id(4));
  EXPECT_EQ(req.payload.size(), 100u);
  const std::string_view view = "from a view";
  req.business_key = view;
  EXPECT_EQ(req.business_key.view(), "from a view");
}

TEST(ResultTest, ValueOfAFailureThrowsIdemErrorWithTheCodeAndMessage) {
  Result<std::string> failed = make_failure(errc::store_unavailable, "redis is down");
  try {
    (void)failed.value();
    FAIL() << "value() of a failure returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), errc::store_unavailable);
    EXPECT_NE(std::string(e.what()).find("redis is down"), std::string::npos) << e.what();
  }
  Result<int> bare = make_failure(errc::token_invalid);
  EXPECT_THROW((void)std::move(bare).value(), Error);
}

TEST(ErrorTest, ErrorCodesHaveNamesForLogs) {
  EXPECT_EQ(to_string(std::error_code{}), "ok");
  EXPECT_EQ(to_string(make_error_code(errc::lease_lost)), "lease_lost");
  EXPECT_EQ(to_string(std::make_error_code(std::errc::connection_refused)),
            "generic:" + std::to_string(static_cast<int>(std::errc::connection_refused)));
}

// A ttl that is set must be positive: zero is refused, never read as "the default" (an unset ttl
// is the owner's default), by every owner of a guard.
TEST(OptionsTest, AZeroTtlIsRefusedWhereverAGuardIsBuilt) {
  MemoryStore store;
  EXPECT_THROW(IdempotencyGuard(store, Options{.ttl = 0ms}), std::invalid_argument);
  EXPECT_THROW(IdempotencyGuard(store, Options{.ttl = -1ms}), std::invalid_argument);
  EXPECT_THROW((VersionStore<MemoryBackend>{{.guard = {.ttl = 0ms}}}), std::invalid_argument);
  EXPECT_THROW((MemoryRequestIdCache{{.guard = {.ttl = 0ms}}}), std::invalid_argument);
  EXPECT_THROW((MemoryTokenStore{{.guard = {.ttl = 0ms}}}), std::invalid_argument);
  const auto redrive = [](Context&, std::string_view) { return std::string("done"); };
  EXPECT_THROW((Completer<MemoryStore>{store, Options{.ttl = 0ms}, redrive}),
               std::invalid_argument);
  IdempotencyGuard shortest{store, Options{.ttl = 1ms}};
  EXPECT_EQ(shortest.options().ttl, 1ms);
}

TEST(OptionsTest, SettingOneGuardFieldKeepsTheOwnersOtherDefaults) {
  VersionStore<MemoryBackend> accounts{{.guard = {.scope = "accounts"}}};
  EXPECT_EQ(accounts.options().scope, "accounts");
  ASSERT_TRUE(accounts.options().in_progress.has_value());
  EXPECT_TRUE(std::holds_alternative<Wait>(*accounts.options().in_progress));
  EXPECT_EQ(accounts.options().ttl, std::chrono::hours{24});

  StateMachineStore<TransitionTable, MemoryBackend> orders{
      TransitionTable{"CREATED", {"CREATED", "PAID"}, {{"PAY", {"CREATED"}, "PAID"}}},
      {.guard = {.lease = 5s}}};
  EXPECT_EQ(orders.options().scope, "state");
  EXPECT_TRUE(std::holds_alternative<Wait>(*orders.options().in_progress));
  EXPECT_EQ(orders.options().lease, 5s);

  MemoryRequestIdCache cache{{.guard = {.lease = 2s}}};
  EXPECT_EQ(cache.options().scope, "request-id");
  EXPECT_EQ(cache.options().ttl, std::chrono::minutes{10});
  EXPECT_TRUE(std::holds_alternative<FailFast>(*cache.options().in_progress));

  MemoryTokenStore tokens{{.guard = {.ttl = 1h}}};
  EXPECT_EQ(tokens.options().scope, "token");
  EXPECT_EQ(tokens.options().ttl, 1h);

  MemoryStore store;
  IdempotencyGuard plain{store, Options{.lease = 3s}};
  EXPECT_EQ(plain.options().scope, "");
  EXPECT_EQ(plain.options().ttl, std::chrono::hours{24});
  EXPECT_TRUE(std::holds_alternative<FailFast>(*plain.options().in_progress));
  // Explicit choices win over an owner's defaults.
  VersionStore<MemoryBackend> failing_fast{{.guard = {.in_progress = FailFast{}}}};
  EXPECT_TRUE(std::holds_alternative<FailFast>(*failing_fast.options().in_progress));
  EXPECT_THROW((IdempotencyGuard{store, Options{.ttl = -1s}}), std::invalid_argument);
}

TEST(VersionStoreTest, RetryPausesOnTheConfiguredClock) {
  auto clock = std::make_shared<ManualClock>();
  VersionStore<MemoryBackend> accounts{
      {.guard = {.scope = "clock", .in_progress = FailFast{}, .clock = clock}}};
  accounts.put("acct", 0);
  // Hold the entity from another thread so every attempt of retry() is refused in_progress.
  std::promise<void> holding, release;
  std::thread holder([&] {
    (void)accounts.execute(VersionKey{"acct", 0, "holder"}, [&] {
      holding.set_value();
      release.get_future().wait();
      return 0;
    });
  });
  holding.get_future().wait();
  const auto before = clock->now();
  const auto wall = std::chrono::steady_clock::now();
  auto out = accounts.retry(
      "acct", "op", "", [] { return 1; },
      CasRetry{.attempts = 4, .backoff = 1h, .max_backoff = 4h});
  release.set_value();
  holder.join();
  EXPECT_EQ(out.error(), errc::in_progress);
  EXPECT_EQ(out.attempts(), 4);
  EXPECT_EQ(clock->now() - before, 1h + 2h + 4h);  // three pauses, on the manual clock only
  EXPECT_LT(std::chrono::steady_clock::now() - wall, 30s);  // nothing slept for real hours
}

}  // namespace
}  // namespace idem
