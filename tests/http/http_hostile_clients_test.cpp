// Misbehaving clients against the http_payments server (a child process, SQLite; label http;
// ctest runs them once more against http_payments_async on PostgreSQL, label async):
// clients that send their head a line a second, a body that trickles in, a 300 MB body, more
// connections than the server takes, and bad command lines. Each test asserts what the server
// answered and that the other clients were still served. Waits are bounded; no duration is
// asserted.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "http_test_support.hpp"
#include "raw_socket.hpp"

namespace {

using namespace http_test;
using namespace std::chrono_literals;

const std::string kPayment = R"({"amount": 1250, "currency": "EUR"})";

// Clients that send a request line, then one header line a second, and never end their head.
// Each second they also look whether the server answered or closed.
class SlowClients {
 public:
  SlowClients(int port, int n) {
    for (int i = 0; i < n; ++i) {
      auto s = std::make_unique<RawSocket>(port);
      if (s->connected() && s->send("POST /payments HTTP/1.1\r\nHost: test\r\n")) {
        sockets_.push_back(std::move(s));
      }
    }
    thread_ = std::thread([this] { trickle(); });
  }
  ~SlowClients() {
    stop_ = true;
    thread_.join();
  }

  std::size_t connected() const { return sockets_.size(); }
  int open() const { return open_.load(); }
  int answered_408() const { return answered_408_.load(); }

 private:
  void trickle() {
    std::vector<bool> closed(sockets_.size(), false);
    for (int line = 0; !stop_; ++line) {
      int open = 0;
      for (std::size_t i = 0; i < sockets_.size(); ++i) {
        if (closed[i]) continue;
        const std::string seen = sockets_[i]->receive(0ms);
        if (seen.find(" 408 ") != std::string::npos) answered_408_.fetch_add(1);
        closed[i] = sockets_[i]->closed_by_peer() ||
                    !sockets_[i]->send("X-Slow-" + std::to_string(line) + ": 1\r\n", 100ms);
        if (!closed[i]) ++open;
      }
      open_ = open;
      for (int i = 0; i < 10 && !stop_; ++i) std::this_thread::sleep_for(100ms);
    }
  }

  std::vector<std::unique_ptr<RawSocket>> sockets_;
  std::atomic<int> open_{-1};
  std::atomic<int> answered_408_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class HostileClients : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kPg && (env("IDEM_TEST_PG_URI") == nullptr || env("IDEM_TEST_REDIS_URI") == nullptr)) {
      GTEST_SKIP()
          << "IDEM_TEST_PG_URI and IDEM_TEST_REDIS_URI are not set (scripts/test sets them)";
    }
  }

  // A client of its own, as another user of the service would have; bounded waits.
  std::unique_ptr<httplib::Client> client(int port) {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
    c->set_connection_timeout(5, 0);
    c->set_read_timeout(10, 0);
    c->set_write_timeout(10, 0);
    return c;
  }

  // GET /health and a replay of `key`, each on a new connection: both must be answered.
  void expect_served(int port, const std::string& key, const std::string& first_body) {
    auto health = client(port)->Get("/health");
    ASSERT_TRUE(health) << "GET /health: " << httplib::to_string(health.error());
    EXPECT_EQ(health->status, 200);
    auto replay =
        client(port)->Post("/payments", headers("alice", key), kPayment, "application/json");
    ASSERT_TRUE(replay) << "replay: " << httplib::to_string(replay.error());
    EXPECT_EQ(replay->status, 201);
    EXPECT_EQ(replay->get_header_value("Idempotent-Replayed"), "true");
    EXPECT_EQ(replay->body, first_body);
  }

  std::string pay_once(int port, const std::string& key) {
    auto first =
        client(port)->Post("/payments", headers("alice", key), kPayment, "application/json");
    if (!first || first->status != 201) return {};
    return first->body;
  }

  void slow_clients_do_not_stop_others(int n) {
    Server server(backing, {"--request-timeout-ms", "6000"});
    const std::string first = pay_once(server.port(), "k-slow");
    ASSERT_FALSE(first.empty());
    const long rss_before = peak_rss_kib(server.pid());

    SlowClients slow(server.port(), n);
    ASSERT_EQ(slow.connected(), static_cast<std::size_t>(n));
    // While every slow client is connected and sending, others are served, again and again.
    for (int round = 0; round < 10; ++round) {
      expect_served(server.port(), "k-slow", first);
      if (round == 0) {
        const auto looked = std::chrono::steady_clock::now() + 10s;
        while (slow.open() < 0 && std::chrono::steady_clock::now() < looked) {
          std::this_thread::sleep_for(10ms);  // the trickle thread's first look at every socket
        }
        EXPECT_EQ(slow.open(), n) << "the slow clients were cut before their deadline";
      }
      std::this_thread::sleep_for(100ms);
    }
    // Bounded cost: once their deadline passes, the server answers 408 and closes them all.
    const auto give_up = std::chrono::steady_clock::now() + 30s;
    while (slow.open() != 0 && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(100ms);
    }
    EXPECT_EQ(slow.open(), 0) << "slow clients still connected long after their deadline";
    EXPECT_GT(slow.answered_408(), 0);
    expect_served(server.port(), "k-slow", first);
    EXPECT_LT(peak_rss_kib(server.pid()) - rss_before, 64 * 1024) << "KiB more at the peak";
  }

  Backing backing;
};

TEST_F(HostileClients, SixteenSlowClientsDoNotStopOthers) { slow_clients_do_not_stop_others(16); }

TEST_F(HostileClients, SixtyFourSlowClientsDoNotStopOthers) { slow_clients_do_not_stop_others(64); }

// The deadline covers the whole request: a body that trickles in a byte every 100 ms, each read
// well within any per-read timeout, is cut when the request's time is up.
TEST_F(HostileClients, ABodyThatTricklesInIsCutAtTheRequestDeadline) {
  Server server(backing, {"--request-timeout-ms", "1500"});
  RawSocket s(server.port());
  ASSERT_TRUE(s.connected());
  ASSERT_TRUE(
      s.send("POST /payments HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer alice\r\n"
             "Idempotency-Key: k-trickle\r\nContent-Length: 100\r\n\r\n"));
  int sent = 0;
  for (; sent < 100; ++sent) {
    if (!s.receive(100ms).empty() || s.closed_by_peer() || !s.send("x")) break;
  }
  EXPECT_LT(sent, 100) << "the whole body was read: no deadline on the request";
  EXPECT_TRUE(s.closes_within(10s));
  const std::string first = pay_once(server.port(), "k-after");
  EXPECT_FALSE(first.empty());
}

// A 300 MB body: refused from its Content-Length, unread, while the client keeps sending.
TEST_F(HostileClients, AnOversizedBodyIsRefusedUnreadWhileOthersAreServed) {
  Server server(backing);
  const std::string first = pay_once(server.port(), "k-big");
  ASSERT_FALSE(first.empty());
  const long rss_before = peak_rss_kib(server.pid());

  RawSocket big(server.port());
  ASSERT_TRUE(big.connected());
  ASSERT_TRUE(
      big.send("POST /payments HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer alice\r\n"
               "Idempotency-Key: k-huge\r\nContent-Type: application/json\r\n"
               "Content-Length: 314572800\r\n\r\n"));
  std::atomic<bool> stop{false};
  std::atomic<long long> body_sent{0};
  std::thread sender([&] {
    const std::string chunk(64 * 1024, 'x');
    while (!stop && body_sent < 314572800LL) {
      if (!big.send(chunk, 200ms)) {
        if (big.closed_by_peer()) break;
        continue;  // no room: the server is not reading
      }
      body_sent += static_cast<long long>(chunk.size());
    }
  });
  const std::string answer = big.receive(20s, "}");
  expect_served(server.port(), "k-big", first);
  const bool closed = big.closes_within(20s);
  stop = true;
  sender.join();

  EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer.substr(0, 200);
  EXPECT_NE(answer.find("application/problem+json"), std::string::npos);
  EXPECT_NE(answer.find("urn:idem:problem:body_too_large"), std::string::npos);
  EXPECT_TRUE(closed) << "the connection stays open after the refusal";
  EXPECT_LT(body_sent.load(), 64LL << 20) << "bytes of body the server took in";
  EXPECT_LT(peak_rss_kib(server.pid()) - rss_before, 64 * 1024) << "KiB more at the peak";
}

// With Expect: 100-continue the refusal comes before the client sends any body; within the
// limit the client is told to go on.
TEST_F(HostileClients, ExpectContinueIsRefusedOverTheLimitAndAnsweredWithin) {
  Server server(backing, {"--body-limit", "1000"});
  RawSocket s(server.port());
  ASSERT_TRUE(
      s.send("POST /payments HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer alice\r\n"
             "Idempotency-Key: k-expect\r\nExpect: 100-continue\r\n"
             "Content-Length: 1001\r\n\r\n"));
  const std::string answer = s.receive(10s, "}");
  EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer.substr(0, 200);
  EXPECT_NE(answer.find("body_too_large"), std::string::npos);
  EXPECT_TRUE(s.closes_within(10s));

  // Within the limit, the client is told to go on, sends its body, and is answered.
  RawSocket polite(server.port());
  ASSERT_TRUE(
      polite.send("POST /payments HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer alice\r\n"
                  "Idempotency-Key: k-continue\r\nExpect: 100-continue\r\n"
                  "Content-Length: " +
                  std::to_string(kPayment.size()) + "\r\n\r\n"));
  const std::string go_on = polite.receive(10s, "\r\n\r\n");
  EXPECT_EQ(go_on.rfind("HTTP/1.1 100 Continue", 0), 0u) << go_on;
  ASSERT_TRUE(polite.send(kPayment));
  const std::string paid = polite.receive(10s, "}");
  EXPECT_EQ(paid.rfind("HTTP/1.1 201", 0), 0u) << paid.substr(0, 200);

  // At the limit, the body is read and the payment made.
  auto ok = client(server.port())
                ->Post("/payments", headers("alice", "k-at-limit"),
                       kPayment + std::string(1000 - kPayment.size(), ' '), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 201);
}

// A chunked body has no length to refuse early: it is cut as it grows past the limit.
TEST_F(HostileClients, AChunkedBodyIsCutPastTheLimit) {
  Server server(backing, {"--body-limit", "1000"});
  RawSocket s(server.port());
  ASSERT_TRUE(
      s.send("POST /payments HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer alice\r\n"
             "Idempotency-Key: k-chunked\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const std::string chunk = "10000\r\n" + std::string(0x10000, ' ') + "\r\n";
  long long sent = 0;
  while (sent < (64LL << 20) && s.send(chunk, 500ms)) sent += static_cast<long long>(chunk.size());
  const std::string answer = s.receive(10s);
  EXPECT_EQ(answer.rfind("HTTP/1.1 4", 0), 0u) << answer.substr(0, 200);
  EXPECT_LT(sent, 64LL << 20) << "bytes of chunked body the server took in";
  EXPECT_TRUE(s.closes_within(10s));
}

TEST_F(HostileClients, ConnectionsOverTheBoundAreAnswered503AndOthersServedOnceSomeClose) {
  Server server(backing, {"--max-connections", "8"});
  std::vector<std::unique_ptr<RawSocket>> idle;
  for (int i = 0; i < 8; ++i) {
    idle.push_back(std::make_unique<RawSocket>(server.port()));
    ASSERT_TRUE(idle.back()->connected());
  }
  RawSocket ninth(server.port());
  const std::string refused = ninth.receive(10s, "}");
  EXPECT_EQ(refused.rfind("HTTP/1.1 503", 0), 0u) << refused.substr(0, 200);
  EXPECT_NE(refused.find("too_many_connections"), std::string::npos);
  EXPECT_TRUE(ninth.closes_within(10s));

  idle.resize(4);  // four clients leave
  std::optional<int> status;
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < give_up) {
    auto r = client(server.port())->Get("/health");
    if (r && r->status == 200) {
      status = 200;
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(status, 200) << "no connection taken after four closed";
}

// SIGTERM stops the server gracefully: a payment in its handler when the signal comes is
// answered, and the process exits 0. (http_payments_async only; http_payments keeps the
// signal's default action.) The payment goes out on a connection the server has already
// answered once, so it is in hand well before the signal, whatever the machine's load.
TEST_F(HostileClients, SigtermAnswersThePaymentInHandAndExitsZero) {
  Server server(backing, {"--delay-ms", "3000"});
  RawSocket s(server.port());
  ASSERT_TRUE(s.send("GET /health HTTP/1.1\r\nHost: test\r\n\r\n"));
  const std::string health = s.receive(10s, "}");
  ASSERT_EQ(health.rfind("HTTP/1.1 200", 0), 0u) << health;
  ASSERT_TRUE(
      s.send("POST /payments HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer alice\r\n"
             "Idempotency-Key: k-term\r\nContent-Length: " +
             std::to_string(kPayment.size()) + "\r\n\r\n" + kPayment));
  std::this_thread::sleep_for(1s);  // the payment waits out its handler's 3 s
  const int status = server.stop(SIGTERM);
  const std::string paid = s.receive(10s, "}");
  EXPECT_EQ(paid.rfind("HTTP/1.1 201", 0), 0u) << paid.substr(0, 200);
  EXPECT_NE(paid.find("Connection: close"), std::string::npos) << paid.substr(0, 200);
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal "
                                 << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(backing.payments(), 1);
}

// A wrong argument is a usage error (exit 2, naming the option), never an abort.
TEST(HttpPaymentsCommandLine, BadArgumentsAreUsageErrors) {
  const std::vector<std::vector<std::string>> cases{{"--port", "abc"},
                                                    {"--port", "70000"},
                                                    {"--port", ""},
                                                    {"--port", "-1"},
                                                    {"--threads", "0"},
                                                    {"--threads", "lots"},
                                                    {"--body-limit", "-1"},
                                                    {"--keep-alive-ms", "soon"},
                                                    {"--request-timeout-ms", "1e3"},
                                                    {"--max-connections", "99999999999999999999"},
                                                    {"--port"},
                                                    {"--no-such-option"}};
  for (const auto& args : cases) {
    int err[2];
    ASSERT_EQ(::pipe(err), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(err[1], STDERR_FILENO);
      ::close(err[0]);
      ::close(err[1]);
      std::vector<std::string> all{server_binary()};
      all.insert(all.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& a : all) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      std::_Exit(127);
    }
    ::close(err[1]);
    std::string message;
    char buf[512];
    for (ssize_t n; (n = ::read(err[0], buf, sizeof buf)) > 0;) message.append(buf, n);
    ::close(err[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << args[0] << " killed the server by signal "
                                   << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    EXPECT_EQ(WEXITSTATUS(status), 2) << args[0];
    EXPECT_NE(message.find(args[0]), std::string::npos) << message;
    EXPECT_NE(message.find("usage:"), std::string::npos) << message;
  }
}

}  // namespace
