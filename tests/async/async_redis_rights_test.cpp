// AsyncRedisStore as an ACL user missing one right: a command the client sends (EVALSHA, which
// Redis names in its NOPERM reply) and one a script runs (HSET, of which Redis names the script's
// line only). Each is config_invalid naming the right, as on RedisStore, not an outage; the
// handler never runs. A wrong password is store_unavailable with the server's words and without
// the password. The user is one of its own on the test server, deleted at the end.

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "async/async_test_support.hpp"
#include "idem/asio/async_guard.hpp"
#include "idem/redis/async_store.hpp"
#include "idem/redis/client.hpp"
#include "redis/redis_test_support.hpp"

namespace idem::testing {
namespace {

class AsyncRedisRights : public ::testing::Test {
 protected:
  void SetUp() override {
    if (redis_uri() == nullptr) {
      GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set; scripts/test starts a Redis and sets it";
    }
    admin_ = connect_redis(redis_options());
    ASSERT_NE(admin_, nullptr);
    user_ = "idem_async_rights_" + std::to_string(::getpid());
    ASSERT_TRUE(admin_->command(
        {"ACL", "SETUSER", user_, "reset", "on", ">" + password_, "~*", "&*", "+@all"}));
  }
  void TearDown() override {
    if (admin_) (void)admin_->command({"ACL", "DELUSER", user_});
  }
  AsyncRedisStoreOptions as_user(std::string password) const {
    AsyncRedisStoreOptions o{.connection = redis_options()};
    o.connection.user = user_;
    o.connection.password = std::move(password);
    return o;
  }

  std::shared_ptr<redis::Client> admin_;
  std::string user_;
  std::string password_ = "async-rights-" + std::to_string(::getpid()) + "-Hq";
};

TEST_F(AsyncRedisRights, AMissingRightIsConfigInvalidNamingItNotAnOutage) {
  for (const auto& [right, words] :
       {std::pair{"-evalsha", "'evalsha'"}, std::pair{"-hset", "can't run this command"}}) {
    SCOPED_TRACE(right);
    ASSERT_TRUE(admin_->command({"ACL", "SETUSER", user_, right}));
    IoRunner runner;
    AsyncRedisStore store{runner.io().get_executor(), as_user(password_)};
    AsyncGuard guard{store, Options{.scope = "async.rights." + std::to_string(::getpid())}};
    int runs = 0;
    const auto out = runner.run(guard.async_execute("missing", [&] { return ++runs; }));
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error(), errc::config_invalid) << out.message();
    EXPECT_NE(out.message().find("the user lacks a right idem needs"), std::string::npos)
        << out.message();
    EXPECT_NE(out.message().find(words), std::string::npos) << out.message();
    EXPECT_EQ(runs, 0);
    ASSERT_TRUE(admin_->command({"ACL", "SETUSER", user_, "+evalsha", "+hset"}));
  }
}

TEST_F(AsyncRedisRights, AWrongPasswordIsRefusedWithTheServersWordsAndNotShown) {
  const std::string wrong = "async-wrong-" + std::to_string(::getpid()) + "-Zp";
  IoRunner runner;
  AsyncRedisStore store{runner.io().get_executor(), as_user(wrong)};
  AsyncGuard guard{store, Options{.scope = "async.rights"}};
  int runs = 0;
  const auto out = runner.run(guard.async_execute("k", [&] { return ++runs; }));
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error(), errc::store_unavailable) << out.message();
  EXPECT_NE(out.message().find("WRONGPASS"), std::string::npos) << out.message();
  EXPECT_EQ(out.message().find(wrong), std::string::npos) << out.message();
  EXPECT_EQ(out.message().find(password_), std::string::npos) << out.message();
  EXPECT_EQ(runs, 0);
}

}  // namespace
}  // namespace idem::testing
