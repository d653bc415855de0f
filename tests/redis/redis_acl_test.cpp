// RedisStore, RedisTokenStore, RequestIdCache and the admin as an ACL user with exactly the rights
// of docs/redis.md's line for one server ("Least privilege: an ACL user", read from the file):
// every operation works; and the line is minimal: without any one of its rights, some operation
// fails, and every one that fails is config_invalid naming that right. The user is one of its own
// on the test server, deleted at the end.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "idem/guard.hpp"
#include "idem/redis/client.hpp"
#include "idem/redis/store.hpp"
#include "redis/acl_support.hpp"
#include "redis/redis_test_support.hpp"

namespace idem::testing {
namespace {

using namespace std::chrono_literals;

class RedisAcl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (redis_uri() == nullptr) GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set";
    const auto lines = documented_acl_lines();
    ASSERT_EQ(lines.size(), 2u) << "docs/redis.md gives one line for a server, one for a cluster";
    rules_ = lines[0];
    admin_ = connect_redis(redis_options());
    ASSERT_NE(admin_, nullptr);
    user_ = "idem_acl_" + std::to_string(::getpid());
    set_rules(rules_);
  }
  void TearDown() override {
    if (admin_) (void)admin_->command({"ACL", "DELUSER", user_});
  }
  // The user anew, with exactly `rules`.
  void set_rules(const std::vector<std::string>& rules) const {
    std::vector<std::string_view> argv{"ACL", "SETUSER", user_, "reset", "on", password_};
    for (const std::string& r : rules) argv.emplace_back(r);
    const auto set = admin_->command(argv);
    ASSERT_TRUE(set && set->type != redis::Reply::Type::error) << (set ? set->str : "no reply");
  }
  std::shared_ptr<redis::Client> as_user(int db = 0) const {
    redis::ConnectionOptions o = redis_options();
    o.user = user_;
    o.password = std::string(password_).substr(1);
    o.db = db;
    return std::make_shared<redis::Client>(o);
  }
  std::string scope() {
    return "acl." + std::to_string(::getpid()) + "." + std::to_string(++scopes_);
  }
  // The user's refusals the server logged for `command` (ACL LOG).
  long long logged_refusals(const std::string& command) const {
    const auto log = admin_->command({"ACL", "LOG", "128"});
    long long n = 0;
    if (!log) return n;
    for (const redis::Reply& entry : log->elements) {
      bool mine = false;
      bool that = false;
      for (std::size_t i = 0; i + 1 < entry.elements.size(); i += 2) {
        if (entry.elements[i].str == "username") mine = entry.elements[i + 1].str == user_;
        if (entry.elements[i].str == "object") that = entry.elements[i + 1].str == command;
      }
      n += mine && that ? 1 : 0;
    }
    return n;
  }

  std::shared_ptr<redis::Client> admin_;
  std::vector<std::string> rules_;
  std::string user_;
  std::string password_ = ">acl-test-password";
  int scopes_ = 0;
};

TEST_F(RedisAcl, EveryOperationWorksWithTheDocumentedLineAlone) {
  for (const FailedCall& f : run_every_operation(as_user(), scope())) {
    ADD_FAILURE() << f.doing << ": " << f.failure.describe();
  }
  // A database other than 0 (SELECT on each new connection).
  RedisStore store{as_user(1)};
  IdempotencyGuard guard{store, Options{.scope = scope()}};
  auto out = guard.execute("db1", [] { return 1; });
  EXPECT_TRUE(out) << out.message();
}

// Each right of the line taken away alone: what needs it fails as config_invalid naming it.
// +select is needed by a database other than 0 only; +wait by Durability only; +blpop, +incr and
// +rpush by a waiting duplicate and its wake only: the duplicate then waits out its bound instead
// of being woken, and the commit that could not wake it is retried and finds itself (the server
// logs the refusal).
TEST_F(RedisAcl, WithoutAnyOneRightSomeOperationFailsAsConfigInvalidNamingIt) {
  for (const std::string& rule : rules_) {
    if (!grants(rule) || rule == "+wait") continue;
    SCOPED_TRACE("without " + rule);
    std::vector<std::string> without = rules_;
    without.erase(std::find(without.begin(), without.end(), rule));
    set_rules(without);
    if (rule == "+select") {
      RedisStore store{as_user(1)};
      IdempotencyGuard guard{store, Options{.scope = scope()}};
      auto out = guard.execute("db1", [] { return 1; });
      ASSERT_FALSE(out);
      expect_refused_naming({{"fresh call on db 1",
                              make_failure(static_cast<errc>(out.error().value()), out.message())}},
                            rule);
      EXPECT_TRUE(run_every_operation(as_user(), scope()).empty()) << "db 0 needs no SELECT";
      continue;
    }
    const std::vector<FailedCall> failed = run_every_operation(as_user(), scope());
    if (rule == "+blpop" || rule == "+incr" || rule == "+rpush") {
      EXPECT_TRUE(failed.empty()) << failed.front().doing << ": "
                                  << failed.front().failure.describe();
      if (rule == "+incr") {  // the request-ID cache's waiting duplicate
        RequestIdCache cache{
            as_user(), RequestIdCacheOptions{
                           .guard = Options{.scope = scope(), .in_progress = Wait{.timeout = 2s}}}};
        std::thread holder([&] {
          (void)cache.execute(Key{"held"}, [] {
            std::this_thread::sleep_for(300ms);
            return std::string("r");
          });
        });
        std::this_thread::sleep_for(100ms);
        auto waited = cache.execute(Key{"held"}, [] { return std::string("other"); });
        holder.join();
        EXPECT_TRUE(waited) << waited.message();
      }
      EXPECT_GT(logged_refusals(rule.substr(1)), 0) << "the waiting duplicate was refused " << rule;
      continue;
    }
    expect_refused_naming(failed, rule);
  }
}

// Durability's WAIT refused: the write stands, but it is not confirmed by replicas.
TEST_F(RedisAcl, WithoutWaitADurableWriteIsNotConfirmed) {
  std::vector<std::string> without = rules_;
  without.erase(std::find(without.begin(), without.end(), "+wait"));
  set_rules(without);
  RedisStore store{as_user(), RedisStoreOptions{.durability = {.replicas = 1, .timeout = 10ms}}};
  IdempotencyGuard guard{store, Options{.scope = scope()}};
  auto out = guard.execute("durable", [] { return 1; });
  EXPECT_FALSE(out.recorded());
  EXPECT_EQ(out.commit_error(), errc::outcome_unknown) << out.commit_failure().describe();
  EXPECT_GT(logged_refusals("wait"), 0);
}

}  // namespace
}  // namespace idem::testing
