// The Redis stores on the test cluster (IDEM_TEST_REDIS_CLUSTER_SEEDS) as an ACL user with exactly
// the rights of docs/redis.md's line for a cluster (read from the file), set on every node: every
// operation of the blocking stores and the admin works, and AsyncRedisStore's; and each right the
// cluster line adds to the one server's, taken away alone, is refused as config_invalid naming
// it: +cluster|slots when the slot map is read, +asking when a call of either store follows an
// ASK redirection during a slot migration (which this test sets up, on a slot that holds no key,
// and undoes).

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "idem/engine/effective_key.hpp"
#include "idem/redis/async_store.hpp"
#include "redis/acl_support.hpp"
#include "redis/cluster_fixture.hpp"
#include "redis/redis_cluster_support.hpp"
#include "redis/redis_test_support.hpp"

namespace idem::testing {
namespace {

namespace net = boost::asio;

class RedisClusterAcl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cluster_seeds() == nullptr) {
      GTEST_SKIP() << "IDEM_TEST_REDIS_CLUSTER_SEEDS is not set; scripts/test starts a cluster";
    }
    ASSERT_TRUE(wait_cluster_ok(std::chrono::seconds{20}, false)) << cluster_report();
    const auto lines = documented_acl_lines();
    ASSERT_EQ(lines.size(), 2u) << "docs/redis.md gives one line for a server, one for a cluster";
    rules_ = lines[1];
    ASSERT_TRUE(std::equal(lines[0].begin(), lines[0].end(), rules_.begin()))
        << "the cluster's line is the one server's and more";
    cluster_only_.assign(rules_.begin() + static_cast<std::ptrdiff_t>(lines[0].size()),
                         rules_.end());
    user_ = "idem_acl_cluster_" + std::to_string(::getpid());
    set_rules(rules_);
  }
  void TearDown() override {
    for (const std::string& node : seed_addresses()) {
      (void)node_client(node)->command({"ACL", "DELUSER", user_});
    }
  }
  // The user anew on every node (replicas too), with exactly `rules`.
  void set_rules(const std::vector<std::string>& rules) const {
    for (const std::string& node : seed_addresses()) {
      std::vector<std::string_view> argv{"ACL", "SETUSER", user_, "reset", "on", password_};
      for (const std::string& r : rules) argv.emplace_back(r);
      const auto set = node_client(node)->command(argv);
      ASSERT_TRUE(set && set->type != redis::Reply::Type::error)
          << node << ": " << (set ? set->str : "no reply");
    }
  }
  redis::ClusterOptions user_options() const {
    redis::ClusterOptions o = cluster_options();
    o.node.user = user_;
    o.node.password = password_.substr(1);
    return o;
  }
  std::shared_ptr<redis::Client> as_user() const {
    return std::make_shared<redis::Client>(user_options());
  }
  // AsyncRedisStore as the user: a fresh call's claim and commit, then its replay.
  std::vector<FailedCall> run_async_store(const std::string& scope,
                                          const std::string& id = "async") const {
    net::io_context io;
    AsyncRedisStoreOptions options{.connection = user_options().node};
    options.cluster_seeds = user_options().seeds;
    AsyncRedisStore store(io.get_executor(), options);
    const std::string key(detail::EffectiveKey(scope, {}, id).view());
    // Runs `awaitable` to its end on `io` (the store's connections keep `io` busy meanwhile), or
    // gives up after a bound far past the calls' own deadlines.
    const auto run = [&](auto awaitable) {
      using T = typename decltype(awaitable)::value_type;
      std::optional<T> out;
      net::co_spawn(
          io, [&]() -> net::awaitable<void> { out.emplace(co_await std::move(awaitable)); },
          net::detached);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds{30};
      while (!out && std::chrono::steady_clock::now() < until) {
        io.run_one_for(std::chrono::milliseconds{100});
      }
      if (!out) out.emplace(make_failure(errc::store_unavailable, "the call did not end in 30 s"));
      return std::move(out).value();
    };
    std::vector<FailedCall> failed;
    const ClaimRequest request{key, {1, 2}, std::chrono::seconds{30}, std::chrono::hours{1}};
    Result<Claim> claim = run(store.async_claim(request));
    if (!claim) {
      failed.push_back({"async claim", claim.failure()});
      return failed;
    }
    const Status committed = run(store.async_commit(
        Ticket{key, claim->fence}, Completion{.result = "r", .ttl = std::chrono::hours{1}}));
    if (!committed) failed.push_back({"async commit", committed.failure()});
    Result<Claim> replay = run(store.async_claim(request));
    if (!replay) failed.push_back({"async replay", replay.failure()});
    return failed;
  }
  std::string scope() {
    return "acl." + std::to_string(::getpid()) + "." + std::to_string(++scopes_);
  }

  std::vector<std::string> rules_;
  std::vector<std::string> cluster_only_;
  std::string user_;
  std::string password_ = ">acl-cluster-password";
  int scopes_ = 0;
};

TEST_F(RedisClusterAcl, EveryOperationWorksWithTheDocumentedClusterLineAlone) {
  for (const FailedCall& f : run_every_operation(as_user(), scope())) {
    ADD_FAILURE() << f.doing << ": " << f.failure.describe();
  }
  for (const FailedCall& f : run_async_store(scope())) {
    ADD_FAILURE() << f.doing << ": " << f.failure.describe();
  }
}

TEST_F(RedisClusterAcl, WithoutTheSlotMapRightEveryStoreIsRefusedNamingIt) {
  ASSERT_NE(std::find(cluster_only_.begin(), cluster_only_.end(), "+cluster|slots"),
            cluster_only_.end());
  std::vector<std::string> without = rules_;
  without.erase(std::find(without.begin(), without.end(), "+cluster|slots"));
  set_rules(without);
  expect_refused_naming(run_every_operation(as_user(), scope()), "+cluster|slots");
  expect_refused_naming(run_async_store(scope()), "+cluster|slots");
}

// A call redirected by ASK during a migration sends ASKING to the target first.
TEST_F(RedisClusterAcl, WithoutAskingACallDuringAMigrationIsRefusedNamingIt) {
  ASSERT_NE(std::find(cluster_only_.begin(), cluster_only_.end(), "+asking"), cluster_only_.end());
  std::vector<std::string> without = rules_;
  without.erase(std::find(without.begin(), without.end(), "+asking"));
  set_rules(without);
  const std::string s = scope();
  RedisStore store{as_user()};
  const KeyInAnEmptySlot moving = key_in_an_empty_slot([&](const std::string& id) {
    return redis::key_slot(store.record_key(detail::EffectiveKey(s, {}, id).view()));
  });
  ClusterNode target;
  for (const ClusterNode& n : cluster_nodes()) {
    if (n.primary && !n.failed && !n.slots.empty() && n.id != moving.source.id) target = n;
  }
  ASSERT_FALSE(target.id.empty());
  const std::string slot = std::to_string(moving.slot);
  ASSERT_EQ(redis_string(*node_client(target.address),
                         {"CLUSTER", "SETSLOT", slot, "IMPORTING", moving.source.id}),
            "OK");
  ASSERT_EQ(redis_string(*node_client(moving.source.address),
                         {"CLUSTER", "SETSLOT", slot, "MIGRATING", target.id}),
            "OK");
  IdempotencyGuard guard{store, Options{.scope = s}};
  int runs = 0;
  auto out = guard.execute(moving.id, [&] { return ++runs; });
  const std::vector<FailedCall> async_failed = run_async_store(s, moving.id);
  // The migration is undone: the slot holds no key, and stays the source's.
  for (const std::string& node : {target.address, moving.source.address}) {
    EXPECT_EQ(redis_string(*node_client(node), {"CLUSTER", "SETSLOT", slot, "STABLE"}), "OK");
  }
  ASSERT_FALSE(out);
  EXPECT_EQ(runs, 0);
  expect_refused_naming(async_failed, "+asking");
  expect_refused_naming({{"fresh call during a migration",
                          make_failure(static_cast<errc>(out.error().value()), out.message())}},
                        "+asking");
}

}  // namespace
}  // namespace idem::testing
