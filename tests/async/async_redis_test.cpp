// AsyncRedisStore against the server in IDEM_TEST_REDIS_URI: the guard's cases through
// async_execute, the record-store conformance kit through the asynchronous calls, records shared
// with RedisStore, exactly-once across processes of many coroutines, and a server that crashes
// and comes back mid-run.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "async/async_guard_cases.hpp"
#include "idem/guard.hpp"
#include "idem/redis/admin.hpp"
#include "idem/redis/async_store.hpp"
#include "idem/redis/store.hpp"
#include "idem/testing/async_face.hpp"
#include "idem/testing/blocking_store.hpp"
#include "idem/testing/record_store_conformance.hpp"
#include "redis/redis_test_support.hpp"
#include "support/fault_relay.hpp"
#include "support/free_port.hpp"

namespace idem::testing {

inline AsyncRedisStoreOptions async_redis_options(std::string prefix) {
  return AsyncRedisStoreOptions{.connection = redis_options(), .prefix = std::move(prefix)};
}

// --- The guard's cases ---------------------------------------------------------------------------
struct RedisBackend : IoRunner {
  using Store = AsyncRedisStore;
  void set_up() {
    if (redis_uri() == nullptr) {
      GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set; scripts/test starts a Redis and sets it";
    }
    store_ = std::make_unique<AsyncRedisStore>(io().get_executor(),
                                               async_redis_options(unique_prefix("async")));
  }
  bool ready() const { return store_ != nullptr; }
  Store& store() { return *store_; }

  std::unique_ptr<AsyncRedisStore> store_;
};

INSTANTIATE_TYPED_TEST_SUITE_P(Redis, AsyncGuardCases, RedisBackend);

// The same cases with single_threaded (IoRunner runs the io_context on the test's thread): a
// caller resumes in place once the read that answered it is done, not through a post.
struct RedisOneThreadBackend : RedisBackend {
  static constexpr bool kOneThread = true;
  void set_up() {
    if (redis_uri() == nullptr) {
      GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set; scripts/test starts a Redis and sets it";
    }
    AsyncRedisStoreOptions options = async_redis_options(unique_prefix("async1"));
    options.single_threaded = true;
    store_ = std::make_unique<AsyncRedisStore>(io().get_executor(), options);
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(RedisOneThread, AsyncGuardCases, RedisOneThreadBackend);

// --- The conformance kit, each call through the asynchronous store -------------------------------
// The key prefix, set before the store is made with it.
struct KeyPrefix {
  std::string prefix;
};

struct BlockingAsyncRedis : KeyPrefix, BlockingStore<AsyncRedisStore> {
  explicit BlockingAsyncRedis(std::string key_prefix)
      : KeyPrefix{std::move(key_prefix)}, BlockingStore(async_redis_options(prefix)) {}
};

template <>
struct StoreTraits<BlockingAsyncRedis> {
  static constexpr std::chrono::milliseconds lease{500};
  static std::unique_ptr<BlockingAsyncRedis> make() {
    if (redis_uri() == nullptr) {
      [] { GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set; scripts/test sets it"; }();
      return nullptr;
    }
    return std::make_unique<BlockingAsyncRedis>(unique_prefix("async-conf"));
  }
  static std::unique_ptr<BlockingAsyncRedis> reopen(BlockingAsyncRedis& store) {
    return std::make_unique<BlockingAsyncRedis>(store.prefix);
  }
  static void advance(BlockingAsyncRedis&, std::chrono::milliseconds d) {
    std::this_thread::sleep_for(d);
  }
  static std::unique_ptr<admin::Admin> admin(BlockingAsyncRedis& store) {
    return admin::redis_admin(connect_redis(redis_options()), {.prefix = store.prefix});
  }
  using async_face = AsyncFace<BlockingAsyncRedis>;
};

}  // namespace idem::testing

IDEM_RECORD_STORE_CONFORMANCE(AsyncRedis, idem::testing::BlockingAsyncRedis);

namespace idem::testing {

class AsyncRedisTest : public RedisTest {
 protected:
  AsyncRedisTest() : RedisTest("async") {}
};

// RedisStore and AsyncRedisStore with one prefix serve the same records.
TEST_F(AsyncRedisTest, SharesItsRecordsWithRedisStore) {
  if (!ready()) return;
  RedisStore blocking(client_, RedisStoreOptions{.prefix = prefix_});
  IoRunner runner;
  AsyncRedisStore async(runner.io().get_executor(), async_redis_options(prefix_));
  EXPECT_EQ(async.record_key("some key"), blocking.record_key("some key"));
  IdempotencyGuard sync_guard{blocking, Options{.scope = "shared"}};
  AsyncGuard async_guard{async, Options{.scope = "shared"}};
  int runs = 0;
  ASSERT_TRUE(sync_guard.execute("a", "p", [&] { return ++runs; }).recorded());
  auto replay = runner.run(async_guard.async_execute("a", "p", [&] { return ++runs; }));
  ASSERT_TRUE(replay.replayed()) << replay.message();
  EXPECT_EQ(replay.value(), 1);
  ASSERT_TRUE(runner.run(async_guard.async_execute("b", "p", [&] { return ++runs; })).recorded());
  auto back = sync_guard.execute("b", "p", [&] { return ++runs; });
  ASSERT_TRUE(back.replayed()) << back.message();
  EXPECT_EQ(back.value(), 2);
  EXPECT_EQ(sync_guard.execute("b", "other", [&] { return ++runs; }).error(),
            errc::payload_mismatch);
}

// After SCRIPT FLUSH the next call loads its script again (EVAL) and succeeds.
TEST_F(AsyncRedisTest, ReloadsItsScriptsAfterNoscript) {
  if (!ready()) return;
  IoRunner runner;
  AsyncRedisStore async(runner.io().get_executor(), async_redis_options(prefix_));
  AsyncGuard guard{async, Options{.scope = "noscript"}};
  ASSERT_TRUE(runner.run(guard.async_execute("k", [] { return 1; })).recorded());
  ASSERT_EQ(redis_string(*client_, {"SCRIPT", "FLUSH"}), "OK");
  auto replay = runner.run(guard.async_execute("k", [] { return 2; }));
  ASSERT_TRUE(replay.replayed()) << replay.message();
  ASSERT_TRUE(runner.run(guard.async_execute("k2", [] { return 3; })).recorded());
  EXPECT_EQ(async.connections_opened(), 1u);
}

// Durability on the asynchronous store, as on RedisStore (RedisStoreTest's
// WaitShortfallIsReportedAndAnUnconfirmedCommitIsNotRecorded): the test server has no replicas,
// so WAIT 1 returns 0 after its timeout. The claim's shortfall is only reported; the commit's
// reaches the caller as outcome_unknown, and the record stands on the primary. Both with calls
// through the strand and with single_threaded (the caller resumed in place after the WAIT).
TEST_F(AsyncRedisTest, WaitShortfallIsReportedAndAnUnconfirmedCommitIsNotRecorded) {
  if (!ready()) return;
  for (const bool one_thread : {false, true}) {
    SCOPED_TRACE(one_thread ? "single_threaded" : "strand");
    std::atomic<int> reports{0};
    std::string last_op;
    AsyncRedisStoreOptions options = async_redis_options(prefix_ + (one_thread ? "1:" : "n:"));
    options.single_threaded = one_thread;
    options.durability = {.replicas = 1,
                          .timeout = std::chrono::milliseconds{20},
                          .on_timeout = [&](std::string_view op, int acked, int wanted) {
                            EXPECT_EQ(acked, 0);
                            EXPECT_EQ(wanted, 1);
                            last_op = op;
                            reports.fetch_add(1);
                          }};
    IoRunner runner;
    AsyncRedisStore durable(runner.io().get_executor(), options);
    AsyncGuard guard{durable, Options{.scope = "wait"}};
    auto out = runner.run(guard.async_execute("k", [] { return 7; }));
    ASSERT_TRUE(out) << out.message();
    EXPECT_EQ(out.value(), 7);
    EXPECT_FALSE(out.recorded());
    EXPECT_EQ(out.commit_error(), errc::outcome_unknown);
    EXPECT_NE(out.commit_failure().message.find("commit not confirmed: 0 of 1 replicas"),
              std::string::npos)
        << out.commit_failure().message;
    const int commits = Options{}.commit_retry.attempts;
    EXPECT_EQ(reports.load(), 1 + commits);  // after the claim and after every commit attempt
    EXPECT_EQ(last_op, "commit");
    EXPECT_EQ(durable.replication_timeouts(), 1u + commits);
    // The write stands on the primary: a repeat replays it, and a replay writes nothing: no WAIT.
    auto replay = runner.run(guard.async_execute("k", [] { return 8; }));
    ASSERT_TRUE(replay.replayed()) << replay.message();
    EXPECT_EQ(replay.value(), 7);
    EXPECT_EQ(durable.replication_timeouts(), 1u + commits);
  }
}

// The TCP sockets of this process connected to `port` on the loopback.
std::set<int> sockets_to(int port) {
  std::set<int> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::atoi(entry.path().filename().c_str());
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0 &&
        peer.sin_family == AF_INET && ntohs(peer.sin_port) == port) {
      out.insert(fd);
    }
  }
  return out;
}

// ConnectionOptions::keep_alive: the store's connection has SO_KEEPALIVE (a server that vanished
// without closing is found by the kernel's probes), and has not when it is turned off.
TEST_F(AsyncRedisTest, KeepAliveIsSetOnTheConnectionUnlessTurnedOff) {
  if (!ready()) return;
  AsyncRedisStoreOptions options = async_redis_options(prefix_);
  ASSERT_TRUE(options.connection.unix_socket.empty());
  for (const bool keep : {true, false}) {
    IoRunner runner;
    options.connection.keep_alive = keep;
    const std::set<int> before = sockets_to(options.connection.port);
    AsyncRedisStore async(runner.io().get_executor(), options);
    AsyncGuard guard{async, Options{.scope = "keepalive"}};
    ASSERT_TRUE(runner.run(guard.async_execute(keep ? "on" : "off", [] { return 1; })).recorded());
    std::vector<int> opened;
    for (int fd : sockets_to(options.connection.port)) {
      if (before.count(fd) == 0) opened.push_back(fd);
    }
    ASSERT_EQ(opened.size(), 1u);
    int on = -1;
    socklen_t len = sizeof on;
    ASSERT_EQ(::getsockopt(opened[0], SOL_SOCKET, SO_KEEPALIVE, &on, &len), 0);
    EXPECT_EQ(on != 0, keep);
  }
}

// The watchdog times a new connection's commands from when they were sent, not from the last
// call of the connection before: after a long idle spell, a reconnection whose handshake (SELECT,
// the database not being 0) and first call are slower than one watchdog tick is not dropped as
// "no reply" while its command timeout still has most of its time to run.
TEST_F(AsyncRedisTest, AReconnectionsFirstCallIsTimedFromItsOwnSend) {
  if (!ready()) return;
  AsyncRedisStoreOptions options = async_redis_options(prefix_);
  ASSERT_TRUE(options.connection.unix_socket.empty());
  FaultRelay relay(options.connection.host, options.connection.port);
  options.connection.host = "127.0.0.1";
  options.connection.port = relay.port();
  options.connection.db = 1;
  options.connection.command_timeout = std::chrono::milliseconds{2000};  // a tick: 500 ms
  options.connection.connect_timeout = std::chrono::milliseconds{2000};
  options.reconnect_backoff = std::chrono::milliseconds{10};
  IoRunner runner;
  AsyncRedisStore async(runner.io().get_executor(), options);
  AsyncGuard guard{async, Options{.scope = "idle"}};
  ASSERT_TRUE(runner.run(guard.async_execute("first", [] { return 1; })).recorded());
  runner.run(pause(std::chrono::milliseconds{1000}));  // the watchdog's tick sees the replies
  relay.cut();  // the server's side closes: the store drops the connection
  runner.run(pause(std::chrono::milliseconds{2500}));  // idle for longer than command_timeout
  relay.delay(std::chrono::milliseconds{300});         // replies come after the first tick
  auto second = runner.run(guard.async_execute("second", [] { return 2; }));
  EXPECT_TRUE(second.recorded()) << second.message();
  EXPECT_EQ(async.connections_opened(), 2u);
}

// ConnectionOptions::ignore_sigpipe: hiredis writes without MSG_NOSIGNAL, so a write to a
// connection the server has closed raises SIGPIPE, which by default ends the process. The store
// sets SIGPIPE to SIG_IGN when it is at SIG_DFL, unless turned off; checked in a child process,
// whose signal dispositions are its own.
TEST(AsyncRedisOptions, IgnoreSigpipeIgnoresSigpipeUnlessTurnedOff) {
  for (const bool ignore : {true, false}) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      std::signal(SIGPIPE, SIG_DFL);
      net::io_context io;
      AsyncRedisStoreOptions options;
      options.connection.ignore_sigpipe = ignore;
      { AsyncRedisStore store(io.get_executor(), options); }
      struct sigaction now {};
      if (::sigaction(SIGPIPE, nullptr, &now) != 0) ::_exit(3);
      ::_exit(now.sa_handler == (ignore ? SIG_IGN : SIG_DFL) ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(WEXITSTATUS(status), 0) << "ignore_sigpipe = " << ignore;
  }
}

// Several processes, each with its own connection and many coroutines on one thread, meet on
// every key: each key's handler runs once, and every caller gets that run's value.
TEST_F(AsyncRedisTest, EachKeyRunsOnceAcrossProcessesOfManyCoroutines) {
  if (!ready()) return;
  constexpr int kProcesses = 4;
  constexpr int kCoroutines = 32;
  constexpr int kKeys = 12;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int failures = 0;
      {
        auto counter = std::make_shared<redis::Client>(redis_options());
        IoRunner runner;
        // Each child runs its coroutines on one thread: no strand.
        AsyncRedisStoreOptions o = async_redis_options(prefix_);
        o.single_threaded = true;
        AsyncRedisStore store(runner.io().get_executor(), o);
        AsyncGuard guard{store, Options{.scope = "race", .in_progress = Wait{.timeout = 20s}}};
        int finished = 0;
        for (int c = 0; c < kCoroutines; ++c) {
          net::co_spawn(
              runner.io(),
              [&, c]() -> net::awaitable<void> {
                for (int i = 0; i < kKeys; ++i) {
                  const std::string k = std::to_string((i + p + c) % kKeys);
                  auto out = co_await guard.async_execute(k, [&]() -> net::awaitable<std::string> {
                    (void)counter->command({"INCR", prefix_ + "runs:" + k});
                    co_await pause(2ms);
                    co_return "made by " + std::to_string(p) + "/" + std::to_string(c);
                  });
                  if (!out) {
                    ++failures;
                    continue;
                  }
                  (void)counter->command({"RPUSH", prefix_ + "seen:" + k, out.value()});
                }
                ++finished;
              },
              net::detached);
        }
        runner.run_until([&] { return finished == kCoroutines; });
      }
      ::_exit(failures == 0 ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child failed: " << status;
  }
  for (int i = 0; i < kKeys; ++i) {
    const std::string k = std::to_string(i);
    EXPECT_EQ(redis_string(*client_, {"GET", prefix_ + "runs:" + k}), "1") << "key " << k;
    Result<redis::Reply> seen = client_->command({"LRANGE", prefix_ + "seen:" + k, "0", "-1"});
    ASSERT_TRUE(seen);
    ASSERT_EQ(seen->elements.size(), static_cast<std::size_t>(kProcesses * kCoroutines));
    for (const redis::Reply& v : seen->elements) EXPECT_EQ(v.str, seen->elements.front().str);
  }
}

// A private redis-server (append-only file, fsync on every write) that the test kills and
// starts again on the same port, so no other test meets the outage.
class CrashableServer {
 public:
  CrashableServer() {
    dir_ =
        std::filesystem::temp_directory_path() / ("idem-async-redis-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    port_ = restartable_server_port();
  }
  ~CrashableServer() {
    kill();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  int port() const { return port_; }

  bool start() {
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string port = std::to_string(port_);
      ::execlp("redis-server", "redis-server", "--port", port.c_str(), "--bind", "127.0.0.1",
               "--dir", dir_.c_str(), "--save", "", "--appendonly", "yes", "--appendfsync",
               "always", "--logfile", (dir_ / "redis.log").c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    redis::ConnectionOptions o;
    o.port = port_;
    redis::Client probe(o);
    for (int i = 0; i < 200; ++i) {
      if (probe.ping().ok()) return true;
      std::this_thread::sleep_for(25ms);
    }
    return false;
  }
  // SIGKILL: a crash; what was acknowledged is on disk (appendfsync always).
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  std::filesystem::path dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// Coroutines call keys without pause while the server crashes and comes back: calls while it
// is down answer store_unavailable at once, calls after it is back succeed on a new connection,
// and no key's handler runs twice (commits retry past the outage, up to 10 s; claims lost with
// the crash are taken over after their lease).
TEST(AsyncRedisRestart, CrashMidRunIsUnavailableThenRecoversAndNothingRunsTwice) {
  if (redis_uri() == nullptr) GTEST_SKIP() << "IDEM_TEST_REDIS_URI is not set";
  CrashableServer server;
  ASSERT_TRUE(server.start()) << "could not start redis-server on port " << server.port();
  AsyncRedisStoreOptions o;
  o.connection.port = server.port();
  o.connection.connect_timeout = 300ms;
  o.connection.command_timeout = 500ms;
  o.reconnect_backoff = 20ms;
  o.max_reconnect_backoff = 100ms;
  o.prefix = unique_prefix("async-crash");
  IoRunner runner;
  AsyncRedisStore store(runner.io().get_executor(), o);
  AsyncGuard guard{
      // The lease outlasts the outage and the restart with room to spare: a holder whose commit
      // lands after its lease could be taken over, and its key would run twice for a reason
      // other than the crash.
      store, Options{.scope = "crash",
                     .lease = 5s,
                     .in_progress = Wait{.timeout = 20s},
                     .commit_retry = {.attempts = 100, .backoff = 50ms, .max_backoff = 100ms}}};
  constexpr int kCoroutines = 16;
  constexpr int kKeys = 40;
  std::map<int, int> runs;
  std::map<int, std::set<int>> answers;
  int unavailable = 0;
  int finished = 0;
  auto down_since = std::chrono::steady_clock::time_point::max();
  std::chrono::steady_clock::duration slowest_refusal{};
  for (int c = 0; c < kCoroutines; ++c) {
    net::co_spawn(
        runner.io(),
        [&, c]() -> net::awaitable<void> {
          for (int k = 0; k < kKeys; ++k) {
            for (;;) {
              const auto start = std::chrono::steady_clock::now();
              auto out = co_await guard.async_execute(std::to_string(k), [&, k, c] {
                ++runs[k];
                return c;
              });
              if (out.has_value()) {
                answers[k].insert(out.value());
                break;
              }
              if (out.error() != errc::store_unavailable) {
                ADD_FAILURE() << "key " << k << ": " << out.message();
                break;
              }
              ++unavailable;
              if (start > down_since) {
                slowest_refusal =
                    std::max(slowest_refusal, std::chrono::steady_clock::now() - start);
              }
              co_await pause(5ms);
            }
            co_await pause(3ms);
          }
          ++finished;
        },
        net::detached);
  }
  runner.run_until([&] { return runs.size() >= kKeys / 4; });
  server.kill();
  down_since = std::chrono::steady_clock::now();
  const auto back_at = down_since + 400ms;
  runner.run_until([&] { return std::chrono::steady_clock::now() >= back_at; });
  down_since = std::chrono::steady_clock::time_point::max();
  ASSERT_TRUE(server.start());
  runner.run_until([&] { return finished == kCoroutines; });

  EXPECT_GT(unavailable, 0) << "no call met the outage";
  EXPECT_LT(slowest_refusal, 2s) << "calls while the server was down did not fail promptly";
  EXPECT_GE(store.connections_opened(), 2u);
  for (int k = 0; k < kKeys; ++k) {
    EXPECT_EQ(runs[k], 1) << "key " << k;
    EXPECT_EQ(answers[k].size(), 1u) << "key " << k << ": callers got different values";
  }
}

}  // namespace idem::testing
