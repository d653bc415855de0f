// The pipeline (src/redis/pipeline.hpp) on a real server: many threads sharing few connections
// each get their own replies; a paused, killed or absent server fails every waiting call with
// store_unavailable within the command timeout, never a hang and never another call's reply;
// calls work again once the server is back. These tests stop the server: they run alone.

#include "pipeline.hpp"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "redis/redis_test_support.hpp"

namespace idem::testing {
namespace {

using namespace std::chrono_literals;
using redis::Pipeline;
using Clock = std::chrono::steady_clock;

// Connections to the test server (TCP, or TLS for a rediss:// URI; no AUTH, database 0), as
// Client's connector opens.
redis::Connector connector(const redis::ConnectionOptions& o) {
  return [o, tls = redis::TlsContext::make(o.tls)]() -> Result<redis::Socket> {
    return redis::Socket::open(o, tls.get(), Clock::time_point::max(), "test");
  };
}

Pipeline make_pipeline(std::size_t lanes, std::chrono::milliseconds timeout) {
  redis::ConnectionOptions o = redis_options();
  o.command_timeout = timeout;
  o.connect_timeout = 500ms;
  return Pipeline(lanes, timeout, "test", connector(o));
}

std::string echo(Pipeline& p, const std::string& value, errc* failed = nullptr) {
  const std::array<std::string_view, 2> argv{"ECHO", value};
  Result<redis::ReplyPtr> r = p.command(argv);
  if (!r) {
    if (failed != nullptr) *failed = static_cast<errc>(r.failure().code.value());
    return "<failure " + r.failure().describe() + ">";
  }
  return r.value()->type == REDIS_REPLY_STRING ? std::string(r.value()->str, r.value()->len)
                                               : "<not a string>";
}

// A value no other call sends: the thread, the call, and a length that varies from a few bytes
// to 24 KiB so that replies straddle reads.
std::string unique_value(int thread, int call) {
  std::string v = "t" + std::to_string(thread) + "c" + std::to_string(call) + ":";
  v.append(
      static_cast<std::size_t>((call * 7919 + thread * 131) % 97 == 0 ? 24 * 1024 : call % 300),
      static_cast<char>('a' + (thread + call) % 26));
  return v;
}

// Runs `threads` callers that echo unique values until `stop`; counts matches, store_unavailable
// failures and anything else (a wrong reply, another error code: both must stay at zero).
struct Load {
  std::atomic<long> ok{0}, unavailable{0}, wrong{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;

  Load(Pipeline& p, int n) {
    for (int t = 0; t < n; ++t) {
      threads.emplace_back([this, &p, t] {
        for (int i = 0; !stop.load(); ++i) {
          const std::string want = unique_value(t, i);
          errc failed{};
          const std::string got = echo(p, want, &failed);
          if (got == want) {
            ++ok;
          } else if (failed == errc::store_unavailable) {
            ++unavailable;
          } else {
            ++wrong;
            ADD_FAILURE() << "thread " << t << " call " << i << " got " << got.substr(0, 80);
          }
        }
      });
    }
  }
  void join() {
    stop = true;
    for (auto& t : threads) t.join();
  }
};

long server_pid(redis::Client& client) {
  const std::string info = redis_string(client, {"INFO", "server"});
  const auto at = info.find("process_id:");
  return at == std::string::npos ? -1 : std::atol(info.c_str() + at + 11);
}

// SIGSTOP for the server until resume() or the end of the scope, whatever the test asserts.
class PausedServer {
 public:
  explicit PausedServer(long pid) : pid_(static_cast<pid_t>(pid)) {
    paused_ = ::kill(pid_, SIGSTOP) == 0;
  }
  ~PausedServer() { resume(); }
  PausedServer(const PausedServer&) = delete;
  PausedServer& operator=(const PausedServer&) = delete;
  bool paused() const { return paused_; }
  void resume() {
    if (paused_) (void)::kill(pid_, SIGCONT);
    paused_ = false;
  }

 private:
  pid_t pid_;
  bool paused_ = false;
};

class PipelineTest : public RedisTest {
 protected:
  PipelineTest() : RedisTest("pipeline") {}
};

TEST_F(PipelineTest, RepliesAndErrorRepliesReachTheirCaller) {
  Pipeline p = make_pipeline(2, 2000ms);
  const std::string key = prefix_ + "k";
  const std::string value("v\0\r\nw", 5);  // outlives the views below
  const std::array<std::string_view, 3> set{"SET", key, value};
  Result<redis::ReplyPtr> r = p.command(set);
  ASSERT_TRUE(r) << r.failure().describe();
  EXPECT_EQ(r.value()->type, REDIS_REPLY_STATUS);
  const std::array<std::string_view, 2> get{"GET", key};
  r = p.command(get);
  ASSERT_TRUE(r) << r.failure().describe();
  EXPECT_EQ(std::string(r.value()->str, r.value()->len), value);
  // An error reply is a reply, and the link stays up.
  const std::array<std::string_view, 2> bad{"INCR", key};
  r = p.command(bad);
  ASSERT_TRUE(r) << r.failure().describe();
  EXPECT_EQ(r.value()->type, REDIS_REPLY_ERROR);
  EXPECT_EQ(echo(p, "after"), "after");
  EXPECT_EQ(p.dropped_connections(), 0u);
  EXPECT_LE(p.open_connections(), 2u);
}

TEST_F(PipelineTest, ManyThreadsOnTwoConnectionsEachGetTheirOwnReplies) {
  Pipeline p = make_pipeline(2, 5000ms);
  constexpr int kThreads = 32, kCalls = 400;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        const std::string want = unique_value(t, i);
        if (echo(p, want) != want) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(p.dropped_connections(), 0u);
  EXPECT_EQ(p.open_connections(), 2u);
  // Both connections served all of it: the server saw only these two clients of ours.
}

TEST_F(PipelineTest, BatchesStayTogetherAndInOrder) {
  Pipeline p = make_pipeline(2, 5000ms);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      const std::string key = prefix_ + "batch:" + std::to_string(t);
      for (int i = 0; i < 200; ++i) {
        const std::string value = unique_value(t, i);
        const std::array<std::string_view, 3> set{"SET", key, value};
        const std::array<std::string_view, 2> get{"GET", key};
        const std::array<std::string_view, 2> incr{"INCR", key};  // an error reply: not a number
        const std::array<std::span<const std::string_view>, 3> batch{set, get, incr};
        Result<Pipeline::Replies> r = p.run(batch);
        if (!r || r.value()[0]->type != REDIS_REPLY_STATUS ||
            std::string_view(r.value()[1]->str, r.value()[1]->len) != value ||
            r.value()[2]->type != REDIS_REPLY_ERROR || r.value()[3] != nullptr) {
          ++wrong;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(p.dropped_connections(), 0u);
  const std::array<std::span<const std::string_view>, 0> none{};
  EXPECT_EQ(p.run(none).error(), errc::store_unavailable);
}

TEST_F(PipelineTest, PausedServerFailsEveryWaitingCallWithinTheTimeout) {
  const long pid = server_pid(*client_);
  ASSERT_GT(pid, 0);
  Pipeline p = make_pipeline(2, 300ms);
  ASSERT_EQ(echo(p, "up"), "up");

  PausedServer pause(pid);
  ASSERT_TRUE(pause.paused());
  const auto start = Clock::now();
  std::atomic<int> unavailable{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      errc failed{};
      const std::string got = echo(p, unique_value(t, 0), &failed);
      (failed == errc::store_unavailable ? unavailable : other)++;
    });
  }
  for (auto& t : threads) t.join();
  const auto waited = Clock::now() - start;
  pause.resume();

  EXPECT_EQ(unavailable.load(), 16);
  EXPECT_EQ(other.load(), 0);
  EXPECT_LT(waited, 1500ms) << "300 ms timeout: every call gives up within it (plus slack)";
  EXPECT_GE(p.dropped_connections(), 1u);

  // The server now answers the commands it received while paused, on the dropped sockets; the
  // new connections carry only new replies.
  for (int i = 0; i < 50; ++i) {
    const std::string want = unique_value(99, i);
    EXPECT_EQ(echo(p, want), want);
  }
}

// A call that asks (report_in_doubt, a commit) and whose command went out fails with
// outcome_unknown when no reply comes: the server may have run it. The calls beside it on the
// same links that did not ask get store_unavailable, and a call that never went out (nobody
// listens) is store_unavailable whatever it asked.
TEST_F(PipelineTest, ACallThatAsksIsOutcomeUnknownOnceSentAndStoreUnavailableWhenNeverSent) {
  const long pid = server_pid(*client_);
  ASSERT_GT(pid, 0);
  // 16 callers on 16 lanes each get one of their own, where nothing is in flight: each command
  // goes out at once. On 2 lanes, a command queued behind others in flight waits for their
  // replies, which never come: it is never sent.
  Pipeline own = make_pipeline(16, 300ms);
  Pipeline shared = make_pipeline(2, 300ms);
  // Every lane open before the pause: over TLS a connection opened during it never finishes its
  // handshake, so its calls never go out.
  for (int i = 0; i < 16; ++i) ASSERT_EQ(echo(own, "up"), "up");
  for (int i = 0; i < 2; ++i) ASSERT_EQ(echo(shared, "up"), "up");
  auto run = [](Pipeline& on, const std::string& value, bool report_in_doubt) {
    const std::array<std::string_view, 2> argv{"ECHO", value};
    const std::array<std::span<const std::string_view>, 1> one{argv};
    return on.run(one, Clock::time_point::max(), report_in_doubt).error();
  };
  auto sixteen_calls = [&](Pipeline& on) {
    std::vector<std::error_code> got(16);
    std::vector<std::thread> threads;
    for (int t = 0; t < 16; ++t) {
      threads.emplace_back([&, t] { got[t] = run(on, unique_value(t, 0), t % 2 == 0); });
    }
    for (auto& t : threads) t.join();
    return got;
  };
  {
    PausedServer pause(pid);
    ASSERT_TRUE(pause.paused());
    const std::vector<std::error_code> got = sixteen_calls(own);
    for (int t = 0; t < 16; ++t) {
      EXPECT_EQ(got[t], t % 2 == 0 ? errc::outcome_unknown : errc::store_unavailable)
          << "call " << t;
    }
    // Which of them went out depends on the order the callers came in: each one that asks is
    // in doubt or unavailable, and the others are all unavailable.
    const std::vector<std::error_code> queued = sixteen_calls(shared);
    for (int t = 0; t < 16; ++t) {
      if (t % 2 == 0) {
        EXPECT_TRUE(queued[t] == errc::outcome_unknown || queued[t] == errc::store_unavailable)
            << "call " << t << ": " << queued[t].message();
      } else {
        EXPECT_EQ(queued[t], errc::store_unavailable) << "call " << t;
      }
    }
  }
  redis::ConnectionOptions o = redis_options();
  o.port = 1;  // nobody listens there
  Pipeline nowhere(2, 300ms, "nowhere", connector(o));
  EXPECT_EQ(run(nowhere, "x", true), errc::store_unavailable);
}

TEST_F(PipelineTest, PauseUnderLoadNeverDeliversAnotherCallsReply) {
  const long pid = server_pid(*client_);
  ASSERT_GT(pid, 0);
  Pipeline p = make_pipeline(2, 200ms);
  Load load(p, 16);
  std::this_thread::sleep_for(300ms);
  {
    PausedServer pause(pid);
    EXPECT_TRUE(pause.paused());
    std::this_thread::sleep_for(600ms);
  }
  const long ok_at_resume = load.ok.load();
  std::this_thread::sleep_for(500ms);
  load.join();

  EXPECT_EQ(load.wrong.load(), 0);
  EXPECT_GE(load.unavailable.load(), 16) << "every thread waited during the pause";
  EXPECT_GT(load.ok.load(), ok_at_resume) << "calls succeed again after the pause";
}

TEST_F(PipelineTest, KilledAndRestartedServerIsUnavailableThenRecovers) {
  const char* conf = std::getenv("IDEM_TEST_REDIS_CONF");
  if (conf == nullptr || *conf == '\0') {
    GTEST_FAIL()
        << "restarting needs IDEM_TEST_REDIS_CONF: start Redis with scripts/lib/servers.sh";
  }
  const long pid = server_pid(*client_);
  ASSERT_GT(pid, 0);
  Pipeline p = make_pipeline(2, 300ms);
  Load load(p, 8);
  std::this_thread::sleep_for(300ms);

  ASSERT_EQ(::kill(static_cast<pid_t>(pid), SIGKILL), 0);
  std::this_thread::sleep_for(300ms);
  const std::string start = "redis-server '" + std::string(conf) + "'";
  ASSERT_EQ(std::system(start.c_str()), 0);
  redis::Client probe(redis_options());
  bool up = false;
  for (int i = 0; i < 200 && !(up = probe.ping().ok()); ++i) std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(up) << "redis-server did not come back from " << conf;
  const long ok_at_restart = load.ok.load();
  std::this_thread::sleep_for(500ms);
  load.join();

  EXPECT_EQ(load.wrong.load(), 0);
  EXPECT_GT(load.unavailable.load(), 0) << "calls failed while the server was gone";
  EXPECT_GT(load.ok.load(), ok_at_restart) << "and succeed on new connections after";
  EXPECT_GE(p.dropped_connections(), 2u);
}

TEST_F(PipelineTest, UnreachableServerFailsEveryCallerPromptly) {
  redis::ConnectionOptions o = redis_options();
  o.port = 1;  // nobody listens there
  Pipeline p(2, 300ms, "nowhere", connector(o));
  const auto start = Clock::now();
  std::atomic<int> unavailable{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      errc failed{};
      (void)echo(p, "x", &failed);
      if (failed == errc::store_unavailable) ++unavailable;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(unavailable.load(), 16);
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(p.open_connections(), 0u);
}

}  // namespace
}  // namespace idem::testing
