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

#include <atomic>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
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
#include "async/async_redis_cells.hpp"
#include "idem/guard.hpp"
#include "idem/redis/admin.hpp"
#include "idem/redis/async_store.hpp"
#include "idem/redis/store.hpp"
#include "idem/testing/async_store_conformance.hpp"
#include "redis/process_race.hpp"
#include "redis/redis_test_support.hpp"
#include "support/fault_relay.hpp"
#include "support/free_port.hpp"
#include "support/wait_shortfall.hpp"

namespace idem::testing {

INSTANTIATE_TYPED_TEST_SUITE_P(Redis, AsyncGuardCases, CellBackend<AsyncRedisCell>);
INSTANTIATE_TYPED_TEST_SUITE_P(RedisOneThread, AsyncGuardCases,
                               CellBackend<AsyncRedisOneThreadCell>);

}  // namespace idem::testing

IDEM_ASYNC_STORE_CONFORMANCE(AsyncRedis, idem::testing::AsyncRedisCell);

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
  EXPECT_EQ(runs_over_shared_records(blocking, async, runner), 2);
}

// Its commit and abort (one key named: the scripts name the hold's wake list from the record)
// wake a RedisStore duplicate blocked in await_change on the same record.
TEST_F(AsyncRedisTest, ItsCommitAndAbortWakeARedisStoreWaiter) {
  if (!ready()) return;
  RedisStore blocking(client_, RedisStoreOptions{.prefix = prefix_});
  IoRunner runner;
  AsyncRedisStore async(runner.io().get_executor(), async_redis_options(prefix_));
  constexpr std::chrono::milliseconds kLease{30'000};
  for (const bool commit : {true, false}) {
    const std::string key = commit ? "committed" : "aborted";
    Result<Claim> c = runner.run(async.async_claim(ClaimRequest{key, {1, 2}, kLease, kLease}));
    ASSERT_TRUE(c.has_value() && c->status == ClaimStatus::acquired);
    const Ticket held{key, c->fence};
    std::atomic<long long> took{-1};
    std::thread waiter([&] {
      const auto start = std::chrono::steady_clock::now();
      blocking.await_change(held, std::chrono::milliseconds{20'000});
      took = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::steady_clock::now() - start)
                 .count();
    });
    while (redis_string(*client_, {"HGET", blocking.record_key(key), "w"}) != "1") {
      std::this_thread::sleep_for(std::chrono::milliseconds{1});
    }
    const Status ended =
        commit ? runner.run(async.async_commit(held, Completion{.result = "r", .ttl = kLease}))
               : runner.run(async.async_abort(held));
    ASSERT_TRUE(ended.ok()) << ended.failure().describe();
    waiter.join();
    EXPECT_LT(took.load(), 10'000) << key;  // woken, long before its 20 s bound
  }
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
    WaitShortfall shortfall;
    AsyncRedisStoreOptions options = async_redis_options(prefix_ + (one_thread ? "1:" : "n:"));
    options.single_threaded = one_thread;
    options.durability = {.replicas = 1,
                          .timeout = std::chrono::milliseconds{20},
                          .on_timeout = shortfall.on_timeout()};
    IoRunner runner;
    AsyncRedisStore durable(runner.io().get_executor(), options);
    AsyncGuard guard{durable, Options{.scope = "wait"}};
    shortfall.expect_commit_unconfirmed_then_replayed(
        [&](auto handler) { return runner.run(guard.async_execute("k", handler)); },
        [&] { return durable.replication_timeouts(); });
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
  const ProcessRace race{.processes = 4, .keys = 12, .prefix = prefix_, .scope = "race"};
  constexpr int kCoroutines = 32;
  expect_each_key_runs_once_in_children(
      race, kCoroutines,
      [&](int p) {
        auto counter = std::make_shared<redis::Client>(redis_options());
        IoRunner runner;
        // Each child runs its coroutines on one thread: no strand.
        AsyncRedisStoreOptions o = async_redis_options(prefix_);
        o.single_threaded = true;
        AsyncRedisStore store(runner.io().get_executor(), o);
        AsyncGuard guard{store, Options{.scope = race.scope, .in_progress = Wait{.timeout = 20s}}};
        int failures = 0;
        call_every_key(
            runner, guard, kCoroutines, race.keys, p,
            [&](const std::string& k, int c) -> net::awaitable<std::string> {
              (void)counter->command({"INCR", prefix_ + "runs:" + k});
              co_await pause(2ms);
              co_return "made by " + std::to_string(p) + "/" + std::to_string(c);
            },
            [&](const std::string& k, const Outcome<std::string>& out) {
              if (!out) {
                ++failures;
                return;
              }
              (void)counter->command({"RPUSH", prefix_ + "seen:" + k, out.value()});
            });
        return failures;
      },
      *client_);
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
  OutageRun run;
  run.start(runner, store, 5s, 100);
  runner.run_until([&] { return run.runs.size() >= OutageRun::kKeys / 4; });
  server.kill();
  run.down = true;
  const auto back_at = std::chrono::steady_clock::now() + 400ms;
  runner.run_until([&] { return std::chrono::steady_clock::now() >= back_at; });
  run.down = false;
  ASSERT_TRUE(server.start());
  runner.run_until([&] { return run.finished == OutageRun::kCoroutines; });
  run.expect_refused_promptly_and_nothing_ran_twice(2s);
  EXPECT_GE(store.connections_opened(), 2u);
}

}  // namespace idem::testing
