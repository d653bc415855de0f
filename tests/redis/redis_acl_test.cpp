// RedisStore, RedisTokenStore and the admin as an ACL user with exactly the rights docs/redis.md
// ("Least privilege: an ACL user") gives: fresh calls, replays, a woken duplicate, steps, tokens
// and every admin command work; a right taken away is config_invalid naming it, not an outage.
// The user is one of its own on the test server, deleted at the end.

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "idem/guard.hpp"
#include "idem/redis/admin.hpp"
#include "idem/redis/client.hpp"
#include "idem/redis/store.hpp"
#include "idem/redis/token_store.hpp"
#include "redis/redis_test_support.hpp"

namespace idem::testing {
namespace {

using namespace std::chrono_literals;

// docs/redis.md's rule list, after `ACL SETUSER <user> on ><password>`.
const std::vector<std::string> kRules = {
    "resetkeys", "~idem:*",  "resetchannels", "-@all",  "+ping",  "+select", "+evalsha",
    "+eval",     "+blpop",   "+wait",         "+set",   "+zadd",  "+zrem",   "+scan",
    "+get",      "+del",     "+hget",         "+hmget", "+hset",  "+hdel",   "+hincrby",
    "+hstrlen",  "+pexpire", "+pexpiretime",  "+pttl",  "+rpush", "+type",   "+time"};

class RedisAcl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (redis_uri() == nullptr) GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set";
    admin_ = connect_redis(redis_options());
    user_ = "idem_acl_" + std::to_string(::getpid());
    std::vector<std::string_view> argv{"ACL", "SETUSER", user_, "reset", "on", password_};
    for (const std::string& r : kRules) argv.emplace_back(r);
    ASSERT_TRUE(admin_->command(argv));
  }
  void TearDown() override {
    if (admin_) (void)admin_->command({"ACL", "DELUSER", user_});
  }
  std::shared_ptr<redis::Client> as_user() const {
    redis::ConnectionOptions o = redis_options();
    o.user = user_;
    o.password = std::string(password_).substr(1);
    return std::make_shared<redis::Client>(o);
  }

  std::shared_ptr<redis::Client> admin_;
  std::string user_;
  std::string password_ = ">acl-test-password";
};

TEST_F(RedisAcl, TheStoresAndTheAdminWorkWithTheDocumentedRightsAlone) {
  const auto client = as_user();
  RedisStore store{client};
  const std::string scope = "acl." + std::to_string(::getpid());
  IdempotencyGuard guard{store, Options{.scope = scope}};
  int runs = 0;
  for (int i = 0; i < 2; ++i) {  // fresh, then replayed
    auto out = guard.execute("k", [&] { return ++runs; });
    ASSERT_TRUE(out) << out.message();
  }
  EXPECT_EQ(runs, 1);
  auto stepped = guard.execute("steps", [](Context& ctx) {
    return ctx.step("one", [] { return 1; }) + ctx.step("two", [] { return 2; });
  });
  ASSERT_TRUE(stepped) << stepped.message();
  // A duplicate that waits (BLPOP on the hold's wake list) and is woken by the commit.
  IdempotencyGuard waiting{store, Options{.scope = scope, .in_progress = Wait{.timeout = 10s}}};
  std::thread holder([&] {
    (void)guard.execute("held", [] {
      std::this_thread::sleep_for(200ms);
      return 7;
    });
  });
  std::this_thread::sleep_for(50ms);
  auto woken = waiting.execute("held", [] { return 8; });
  holder.join();
  ASSERT_TRUE(woken) << woken.message();

  RedisTokenStore tokens{client};
  const auto token = tokens.issue(60s);
  ASSERT_TRUE(token) << token.failure().message;

  const auto admin = admin::redis_admin(client);
  const auto page = admin->list(scope, {.state = admin::State::completed});
  ASSERT_TRUE(page) << page.failure().message;
  EXPECT_EQ(page->records.size(), 3u);
  ASSERT_TRUE(admin->inspect(scope, Key{"k"}));
  ASSERT_TRUE(admin->stats(scope));
  const auto forgotten = admin->forget(scope, Key{"k"});
  ASSERT_TRUE(forgotten) << forgotten.failure().message;
  EXPECT_TRUE(forgotten->changed);
  ASSERT_TRUE(admin->release(scope, Key{"none"}));
  ASSERT_TRUE(admin->purge_expired(100));
}

// A command the client sends (EVALSHA: Redis names it), and one a script runs (HSET: Redis names
// the script's line only).
TEST_F(RedisAcl, AMissingRightIsConfigInvalidNamingItNotAnOutage) {
  for (const auto& [right, words] :
       {std::pair{"-evalsha", "'evalsha'"}, std::pair{"-hset", "can't run this command"}}) {
    SCOPED_TRACE(right);
    ASSERT_TRUE(admin_->command({"ACL", "SETUSER", user_, right}));
    RedisStore store{as_user()};
    IdempotencyGuard guard{store, Options{.scope = "acl." + std::to_string(::getpid())}};
    int runs = 0;
    auto out = guard.execute("missing", [&] { return ++runs; });
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error(), errc::config_invalid) << out.message();
    EXPECT_NE(out.message().find("the user lacks a right idem needs"), std::string::npos)
        << out.message();
    EXPECT_NE(out.message().find(words), std::string::npos) << out.message();
    EXPECT_EQ(runs, 0);
    ASSERT_TRUE(admin_->command({"ACL", "SETUSER", user_, "+evalsha", "+hset"}));
  }
}

}  // namespace
}  // namespace idem::testing
