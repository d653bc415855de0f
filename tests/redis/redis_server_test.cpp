// RedisStore against server-wide events: round trips counted by the server, a flushed script
// cache, and a restart in the middle of a run. These tests run alone (RUN_SERIAL): they change
// or measure the whole server.

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include "idem/idem.hpp"
#include "idem/redis/store.hpp"
#include "redis/redis_test_support.hpp"

namespace idem::testing {
namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;

// cmdstat_<name> -> calls, from INFO commandstats.
std::map<std::string, long long> command_calls(redis::Client& client) {
  std::map<std::string, long long> calls;
  const std::string info = redis_string(client, {"INFO", "commandstats"});
  std::size_t pos = 0;
  while ((pos = info.find("cmdstat_", pos)) != std::string::npos) {
    const std::size_t colon = info.find(':', pos);
    const std::size_t eq = info.find("calls=", colon);
    const std::string name = info.substr(pos + 8, colon - pos - 8);
    calls[name] = std::stoll(info.substr(eq + 6));
    pos = colon;
  }
  return calls;
}

// Calls of every command made by clients between two snapshots, without the INFO calls and
// the commands run inside scripts (Redis counts those under their own names too).
long long delta(const std::map<std::string, long long>& before,
                const std::map<std::string, long long>& after, const std::string& name) {
  const auto a = after.find(name);
  const auto b = before.find(name);
  return (a == after.end() ? 0 : a->second) - (b == before.end() ? 0 : b->second);
}

class RedisServerTest : public RedisTest {
 protected:
  RedisServerTest() : RedisTest("server") {}
};

TEST_F(RedisServerTest, FreshKeyIsOneClaimAndOneCommitAReplayOneClaim) {
  RedisStore store(client_, RedisStoreOptions{.prefix = prefix_});
  IdempotencyGuard guard{store, Options{.scope = "rt"}};
  ASSERT_TRUE(guard.execute("warm-up", [] { return 1; }));  // scripts loaded, connection open

  auto before = command_calls(*client_);
  auto fresh = guard.execute("fresh", [] { return 2; });
  auto after = command_calls(*client_);
  ASSERT_TRUE(fresh) << fresh.message();
  EXPECT_EQ(delta(before, after, "evalsha"), 2) << "claim + commit";
  EXPECT_EQ(delta(before, after, "eval"), 0);
  EXPECT_EQ(delta(before, after, "script|load"), 0);
  EXPECT_EQ(delta(before, after, "hmget"), 2) << "one read inside each script";

  before = command_calls(*client_);
  auto replay = guard.execute("fresh", [] { return 3; });
  after = command_calls(*client_);
  ASSERT_TRUE(replay) << replay.message();
  EXPECT_TRUE(replay.replayed());
  EXPECT_EQ(delta(before, after, "evalsha"), 1) << "claim only";
  EXPECT_EQ(delta(before, after, "hmget"), 1);
  EXPECT_EQ(delta(before, after, "hset"), 0) << "a replay writes nothing";
}

TEST_F(RedisServerTest, EmbeddedScriptShaIsWhatTheServerComputes) {
  // After a first claim the server holds our script under the SHA we call it by.
  RedisStore store(client_, RedisStoreOptions{.prefix = prefix_});
  ASSERT_TRUE(store.claim(ClaimRequest{"sha", {}, 1s, 1s}));
  const auto before = command_calls(*client_);
  ASSERT_TRUE(store.claim(ClaimRequest{"sha", {}, 1s, 1s}));
  const auto after = command_calls(*client_);
  EXPECT_EQ(delta(before, after, "evalsha"), 1);
  EXPECT_EQ(delta(before, after, "eval"), 0) << "EVALSHA found the script: SHA matches";
}

TEST_F(RedisServerTest, ScriptFlushMidRunReloadsAndRetriesOnce) {
  RedisStore store(client_, RedisStoreOptions{.prefix = prefix_});
  IdempotencyGuard guard{store, Options{.scope = "flush"}};
  int runs = 0;
  ASSERT_TRUE(guard.execute("before", [&] { return ++runs; }));
  // Flush between claim and commit: the commit script is gone when the holder commits.
  auto out = guard.execute("during", [&] {
    EXPECT_EQ(redis_string(*client_, {"SCRIPT", "FLUSH"}), "OK");
    return ++runs;
  });
  ASSERT_TRUE(out) << out.message();
  EXPECT_TRUE(out.recorded());
  ASSERT_EQ(redis_string(*client_, {"SCRIPT", "FLUSH"}), "OK");
  const auto before = command_calls(*client_);
  auto replay = guard.execute("during", [&] { return ++runs; });
  const auto after = command_calls(*client_);
  ASSERT_TRUE(replay) << replay.message();
  EXPECT_TRUE(replay.replayed());
  EXPECT_EQ(replay.value(), 2);
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(delta(before, after, "evalsha"), 1) << "NOSCRIPT";
  EXPECT_EQ(delta(before, after, "eval"), 1) << "the retry, with the script's source";
  EXPECT_EQ(delta(before, after, "script|load"), 0);
}

// Stops the server (SHUTDOWN NOSAVE) and starts it again from its config file on the same port.
class RestartedServer {
 public:
  explicit RestartedServer(redis::Client& client) : client_(client) {
    conf_ = std::getenv("IDEM_TEST_REDIS_CONF") ? std::getenv("IDEM_TEST_REDIS_CONF") : "";
    if (conf_.empty()) {  // fall back on what the server says it was started from
      const std::string info = redis_string(client, {"INFO", "server"});
      const auto at = info.find("config_file:");
      if (at != std::string::npos) {
        conf_ = info.substr(at + 12, info.find('\r', at) - at - 12);
      }
    }
  }
  const std::string& conf() const { return conf_; }

  void stop() {
    (void)client_.command({"SHUTDOWN", "NOSAVE"});  // the reply is the closed connection
    redis::Client probe(testing::redis_options());
    for (int i = 0; i < 100 && probe.ping().ok(); ++i) std::this_thread::sleep_for(50ms);
  }
  bool start() {
    const std::string cmd = "redis-server '" + conf_ + "'";
    if (std::system(cmd.c_str()) != 0) return false;
    redis::Client probe(testing::redis_options());
    for (int i = 0; i < 200; ++i) {
      if (probe.ping().ok()) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

 private:
  redis::Client& client_;
  std::string conf_;
};

TEST_F(RedisServerTest, RestartMidRunIsUnavailableThenRecoversWithoutHanging) {
  RestartedServer server(*client_);
  ASSERT_FALSE(server.conf().empty())
      << "restarting needs the server's config file: start Redis with scripts/lib/servers.sh "
         "(it exports IDEM_TEST_REDIS_CONF) or from a config file";

  redis::ConnectionOptions o = redis_options();
  o.connect_timeout = 300ms;
  o.command_timeout = 500ms;
  auto client = std::make_shared<redis::Client>(o);
  RedisStore store(client, RedisStoreOptions{.prefix = prefix_});
  IdempotencyGuard guard{
      store, Options{.scope = "restart", .commit_retry = {.attempts = 2, .backoff = 10ms}}};
  ASSERT_TRUE(guard.execute("before", [] { return 1; }));

  // The server goes away while a handler runs: its result comes back, unrecorded. The commit
  // never went out (its connection was found closed first, and no new one opens), so this is
  // store_unavailable, not outcome_unknown.
  auto during = guard.execute("during", [&] {
    server.stop();
    return 2;
  });
  ASSERT_TRUE(during);
  EXPECT_FALSE(during.recorded());
  EXPECT_EQ(during.commit_error(), errc::store_unavailable) << during.commit_failure().message;

  // While it is down every call answers store_unavailable, promptly.
  const auto start = std::chrono::steady_clock::now();
  int runs = 0;
  auto down = guard.execute("down", [&] { return ++runs; });
  EXPECT_EQ(down.error(), errc::store_unavailable) << down.message();
  EXPECT_EQ(runs, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);

  ASSERT_TRUE(server.start()) << "could not restart redis-server from " << server.conf();

  // After the restart (empty, no scripts, every pooled connection dead) calls work again.
  auto after = guard.execute("after", [&] { return ++runs; });
  ASSERT_TRUE(after) << after.message();
  EXPECT_TRUE(after.recorded());
  auto replay = guard.execute("after", [&] { return ++runs; });
  ASSERT_TRUE(replay) << replay.message();
  EXPECT_TRUE(replay.replayed());
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace idem::testing
