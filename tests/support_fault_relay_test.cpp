// The fault relay the backend tests put between a store and its server, tried against a small
// echo server: each fault does what it says to connections already open and to new ones.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "support/fault_relay.hpp"

namespace idem::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Echoes every byte back on every connection and keeps what it received.
class EchoServer {
 public:
  EchoServer() {
    const LoopbackListener listening = listen_on_loopback(16);
    if (listening.fd < 0) throw std::runtime_error("echo server: cannot listen");
    listener_ = listening.fd;
    port_ = listening.port;
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  ~EchoServer() {
    stop_ = true;
    ::shutdown(listener_, SHUT_RDWR);  // wakes the accept
    accept_thread_.join();             // no connection is added after this
    {
      std::lock_guard lock(mutex_);
      for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : threads_) t.join();
    ::close(listener_);
  }
  int port() const { return port_; }
  std::string received() const {
    std::lock_guard lock(mutex_);
    return received_;
  }

 private:
  void accept_loop() {
    while (!stop_) {
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) continue;
      std::lock_guard lock(mutex_);
      if (stop_) {
        ::close(fd);
        return;
      }
      open_.push_back(fd);
      threads_.emplace_back([this, fd] { echo(fd); });
    }
  }
  void echo(int fd) {
    char buf[4096];
    while (true) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
      {
        std::lock_guard lock(mutex_);
        received_.append(buf, static_cast<std::size_t>(n));
      }
      if (::send(fd, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL) != n) break;
    }
    std::lock_guard lock(mutex_);
    open_.erase(std::find(open_.begin(), open_.end(), fd));
    ::close(fd);
  }

  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mutex_;
  std::string received_;
  std::vector<int> open_;
  std::vector<std::thread> threads_;  // one a connection, added by the accept thread
  std::thread accept_thread_;
};

// A client connection to the relay.
class Client {
 public:
  explicit Client(int port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      throw std::runtime_error("client: cannot connect");
    }
  }
  ~Client() { ::close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void send(std::string_view bytes) {
    ASSERT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }

  struct Read {
    std::string bytes;
    bool closed = false;  // the relay closed the connection
  };
  // What arrives within `wait`, up to `want` bytes; stops early at `want` bytes or a close.
  Read read(std::size_t want, milliseconds wait) {
    Read out;
    const auto until = Clock::now() + wait;
    while (out.bytes.size() < want) {
      const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        out.closed = true;
        break;
      }
      out.bytes.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }

 private:
  int fd_;
};

constexpr milliseconds kLong{5000};  // for what must arrive: a loaded machine is slow
constexpr milliseconds kQuiet{300};  // for what must not arrive

template <class F>
bool eventually(F condition) {
  const auto until = Clock::now() + kLong;
  while (!condition()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

// Sends `text` and expects it back whole.
void expect_echo(Client& client, const std::string& text) {
  client.send(text);
  EXPECT_EQ(client.read(text.size(), kLong).bytes, text);
}

class FaultRelayTest : public ::testing::Test {
 protected:
  EchoServer server_;
  FaultRelay relay_{"127.0.0.1", server_.port()};
};

TEST_F(FaultRelayTest, PassForwardsBothWaysAndCounts) {
  Client client(relay_.port());
  expect_echo(client, "hello");
  EXPECT_EQ(server_.received(), "hello");
  EXPECT_EQ(relay_.accepted(), 1);
  EXPECT_TRUE(eventually([&] { return relay_.bytes_to_client() == 5; }));
  EXPECT_EQ(relay_.bytes_to_server(), 5);
  EXPECT_EQ(relay_.open_connections(), 1);
}

TEST_F(FaultRelayTest, DelayForwardsEachChunkAfterTheDelayInOrder) {
  Client client(relay_.port());
  relay_.delay(milliseconds(200));
  const auto start = Clock::now();
  client.send("one");
  client.send("two");
  EXPECT_EQ(client.read(6, kLong).bytes, "onetwo");
  EXPECT_GE(Clock::now() - start, milliseconds(400));  // 200 ms each way
  relay_.pass();
  expect_echo(client, "three");
}

TEST_F(FaultRelayTest, StallForwardsNothingAndKeepsConnectionsOpen) {
  Client before(relay_.port());
  relay_.stall();
  Client during(relay_.port());  // accepted while stalled
  before.send("lost");
  during.send("lost too");
  for (Client* c : {&before, &during}) {
    const auto got = c->read(1, kQuiet);
    EXPECT_EQ(got.bytes, "");
    EXPECT_FALSE(got.closed);
  }
  EXPECT_EQ(server_.received(), "");
  EXPECT_EQ(relay_.open_connections(), 2);
  relay_.pass();  // what was sent during the stall is gone; what follows flows
  expect_echo(before, "after");
  EXPECT_EQ(server_.received(), "after");
}

TEST_F(FaultRelayTest, HoldReadsNothingAndTheBytesFlowAfterPass) {
  Client client(relay_.port());
  relay_.hold();
  client.send("held");
  const auto got = client.read(1, kQuiet);
  EXPECT_EQ(got.bytes, "");
  EXPECT_FALSE(got.closed);
  EXPECT_EQ(server_.received(), "");
  relay_.pass();
  EXPECT_EQ(client.read(4, kLong).bytes, "held");
}

TEST_F(FaultRelayTest, CutClosesOpenConnectionsWhateverTheFaultAndNewOnesWork) {
  Client a(relay_.port());
  Client b(relay_.port());
  ASSERT_TRUE(eventually([&] { return relay_.open_connections() == 2; }));
  relay_.hold();
  relay_.cut();
  EXPECT_TRUE(a.read(1, kLong).closed);
  EXPECT_TRUE(b.read(1, kLong).closed);
  EXPECT_TRUE(eventually([&] { return relay_.open_connections() == 0; }));
  relay_.pass();
  Client c(relay_.port());
  expect_echo(c, "new");
}

TEST_F(FaultRelayTest, RefuseClosesNewConnectionsOnly) {
  Client open(relay_.port());
  ASSERT_TRUE(eventually([&] { return relay_.open_connections() == 1; }));
  relay_.refuse();
  Client refused(relay_.port());
  EXPECT_TRUE(refused.read(1, kLong).closed);
  expect_echo(open, "still");
  relay_.refuse(false);
  Client again(relay_.port());
  expect_echo(again, "back");
}

TEST_F(FaultRelayTest, LoseReplyAfterForwardsTheChunkThenCutsBeforeTheReply) {
  Client client(relay_.port());
  relay_.lose_reply_after(FaultRelay::contains("COMMIT"));
  expect_echo(client, "BEGIN");
  EXPECT_FALSE(relay_.one_shot_fired());
  client.send("COMMIT");
  const auto got = client.read(1, kLong);
  EXPECT_TRUE(got.closed);
  EXPECT_EQ(got.bytes, "");  // the echo never came through
  EXPECT_TRUE(relay_.one_shot_fired());
  EXPECT_TRUE(eventually([&] { return server_.received() == "BEGINCOMMIT"; }));
  Client next(relay_.port());  // one shot: the next COMMIT goes through
  expect_echo(next, "COMMIT");
}

TEST_F(FaultRelayTest, CutBeforeDropsTheChunkAndCuts) {
  Client client(relay_.port());
  relay_.cut_before(FaultRelay::contains("EVALSHA"));
  client.send("EVALSHA abc");
  EXPECT_TRUE(client.read(1, kLong).closed);
  EXPECT_EQ(server_.received(), "");
}

TEST_F(FaultRelayTest, AOneShotFaultArmedForSeveralChunksFiresOnEachThenStops) {
  relay_.cut_before(FaultRelay::contains("EVALSHA"), 2);
  for (int i = 0; i < 2; ++i) {
    Client client(relay_.port());
    client.send("EVALSHA abc");
    EXPECT_TRUE(client.read(1, kLong).closed);
    EXPECT_EQ(relay_.one_shot_fired(), i == 1);
  }
  EXPECT_EQ(server_.received(), "");
  Client next(relay_.port());
  expect_echo(next, "EVALSHA abc");
}

// The destructor ends connections held or stalled, with peers still connected, and returns.
TEST(FaultRelayShutdown, DestroyingTheRelayWithStuckConnectionsReturnsPromptly) {
  EchoServer server;
  auto relay = std::make_unique<FaultRelay>("127.0.0.1", server.port());
  Client held(relay->port());
  Client stalled(relay->port());
  ASSERT_TRUE(eventually([&] { return relay->open_connections() == 2; }));
  relay->hold();
  held.send("x");
  relay->delay(milliseconds(60'000));
  stalled.send("y");
  const auto start = Clock::now();
  relay.reset();
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
  EXPECT_TRUE(held.read(1, kLong).closed);
  EXPECT_TRUE(stalled.read(1, kLong).closed);
}

}  // namespace
}  // namespace idem::testing
