// StreamConsumer end to end: consumer processes read a Redis stream through a group and apply
// each message's effect in the claim's transaction on SQLite, while the test SIGKILLs them
// (restarting some under their name, replacing others by new consumers that must reclaim their
// messages) and crashes and restarts Redis (durable: appendfsync always). Every message's
// effect must be there exactly once, and none left pending.

#include "idem/redis/stream_consumer.hpp"

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "idem/idem.hpp"
#include "idem/sqlite/store.hpp"
#include "idem/sqlite/transaction.hpp"
#include "sql/sql_test_support.hpp"
#include "support/free_port.hpp"

namespace idem::testing {
namespace {

using namespace std::chrono_literals;

// A durable redis-server of the test's own, crashed with SIGKILL and started again on demand.
class DurableRedis {
 public:
  explicit DurableRedis(const std::string& dir) : dir_(dir), port_(restartable_server_port()) {}
  ~DurableRedis() { crash(); }

  bool start() {
    const std::string cmd = "redis-server --port " + std::to_string(port_) +
                            " --bind 127.0.0.1 --dir '" + dir_ +
                            "' --appendonly yes --appendfsync always --save '' --daemonize yes "
                            "--pidfile '" +
                            dir_ + "/redis.pid' --logfile '" + dir_ + "/redis.log' >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) return false;
    redis::Client probe(options());
    for (int i = 0; i < 200; ++i) {
      if (probe.ping().ok()) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }
  void crash() {
    std::ifstream in(dir_ + "/redis.pid");
    pid_t pid = 0;
    if (!(in >> pid) || pid <= 0) return;
    ::kill(pid, SIGKILL);
    redis::Client probe(options());
    for (int i = 0; i < 100 && probe.ping().ok(); ++i) std::this_thread::sleep_for(20ms);
    std::filesystem::remove(dir_ + "/redis.pid");
  }
  redis::ConnectionOptions options() const {
    redis::ConnectionOptions o;
    o.host = "127.0.0.1";
    o.port = port_;
    o.connect_timeout = 300ms;
    o.command_timeout = 1000ms;
    o.pool_size = 4;
    return o;
  }

 private:
  std::string dir_;
  int port_;
};

constexpr const char* kStream = "orders";
constexpr const char* kGroup = "billing";
constexpr int kMessages = 300;

// A consumer process: reads and applies until killed.
[[noreturn]] void consume(const DurableRedis& redis, const std::string& db,
                          const std::string& name) {
  try {
    auto client = std::make_shared<redis::Client>(redis.options());
    SqliteStore store(SqliteStoreOptions{
        .path = db, .mode = SqlMode::transactional, .table_prefix = "sc_", .busy_timeout = 10s});
    IdempotencyGuard guard(store, Options{.scope = "billing", .lease = 5s});
    redis::StreamConsumer consumer(client, redis::StreamConsumerOptions{.stream = kStream,
                                                                        .group = kGroup,
                                                                        .consumer = name,
                                                                        .count = 20,
                                                                        .block = 100ms,
                                                                        .reclaim_idle = 400ms});
    for (;;) {
      auto page = consumer.process(guard, [&](const redis::StreamMessage& m, Context& ctx) {
        SQLite::Statement st(sqlite_transaction(ctx),
                             "INSERT INTO effects (id, amount) VALUES (?1, ?2)");
        st.bind(1, m.id);
        st.bind(2, std::string(m.field("amount")));
        st.exec();
        std::this_thread::sleep_for(5ms);  // work inside the transaction: kills land mid-page
        return std::string("billed");
      });
      if (!page) std::this_thread::sleep_for(50ms);  // Redis restarting
    }
  } catch (...) {
  }
  ::_exit(3);
}

TEST(StreamConsumer, KilledConsumersAndARedisCrashLeaveEachEffectExactlyOnce) {
  if (std::system("command -v redis-server >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "redis-server is not installed (scripts/deps installs it)";
  }
  TempDb db;
  const std::string dir = std::filesystem::path(db.path()).parent_path().string();
  DurableRedis redis(dir);
  ASSERT_TRUE(redis.start()) << "redis-server did not start in " << dir;
  {
    SQLite::Database d(db.path(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE, 5000);
    d.exec("CREATE TABLE effects (id TEXT NOT NULL, amount TEXT)");
  }
  ASSERT_TRUE(
      SqliteStore(SqliteStoreOptions{
                      .path = db.path(), .mode = SqlMode::transactional, .table_prefix = "sc_"})
          .ensure_schema());
  auto client = std::make_shared<redis::Client>(redis.options());
  ASSERT_TRUE(redis::StreamConsumer(client, {.stream = kStream, .group = kGroup, .consumer = "x"})
                  .create_group());
  for (int i = 0; i < kMessages; ++i) {
    auto r = client->command({"XADD", kStream, "*", "amount", std::to_string(i)});
    ASSERT_TRUE(r && r->type == redis::Reply::Type::string);
  }

  auto effects = [&](bool distinct) {
    SQLite::Database d(db.path(), SQLite::OPEN_READONLY, 5000);
    return d
        .execAndGet(distinct ? "SELECT count(DISTINCT id) FROM effects"
                             : "SELECT count(*) FROM effects")
        .getInt64();
  };
  auto pending = [&]() -> long long {
    auto r = client->command({"XPENDING", kStream, kGroup});
    if (!r || r->type != redis::Reply::Type::array || r->elements.empty()) return -1;
    return r->elements[0].integer;
  };

  std::map<pid_t, std::string> consumers;
  int next_name = 0;
  auto spawn = [&](const std::string& name) {
    const pid_t pid = ::fork();
    if (pid == 0) consume(redis, db.path(), name);
    consumers[pid] = name;
  };
  for (int i = 0; i < 3; ++i) spawn("c" + std::to_string(next_name++));

  std::mt19937 rng(12345);
  bool restarted = false;
  int kills = 0;
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(60ms);
    const long long done = effects(true);
    if (done >= kMessages && pending() == 0) break;
    if (!restarted && done >= kMessages / 3) {
      redis.crash();  // every consumer loses its connections mid-page
      ASSERT_TRUE(redis.start());
      restarted = true;
    }
    if (done < kMessages && std::uniform_int_distribution<int>(0, 1)(rng) == 0) {
      auto victim = consumers.begin();
      std::advance(victim, std::uniform_int_distribution<int>(
                               0, static_cast<int>(consumers.size()) - 1)(rng));
      ::kill(victim->first, SIGKILL);
      ::waitpid(victim->first, nullptr, 0);
      const std::string name = victim->second;
      consumers.erase(victim);
      ++kills;
      // Most come back under their name (their own pending first); some never do, and their
      // messages must be reclaimed by the others.
      spawn(std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? "c" + std::to_string(next_name++)
                                                               : name);
    }
  }
  for (const auto& [pid, name] : consumers) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  std::cout << "consumers killed: " << kills << ", Redis crashed and restarted: " << restarted
            << '\n';
  EXPECT_TRUE(restarted);
  EXPECT_GT(kills, 0);
  EXPECT_EQ(effects(true), kMessages) << "messages whose effect is missing";
  EXPECT_EQ(effects(false), kMessages) << "effects applied more than once";
  EXPECT_EQ(pending(), 0) << "messages left unacknowledged";
}

}  // namespace
}  // namespace idem::testing
