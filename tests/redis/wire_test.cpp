// The connection core (src/redis/wire.hpp) on bytes, and the blocking face's connection
// (src/redis/socket.hpp) against a scripted peer on a real loopback socket: a reply split across
// reads is whole, a stalled or garbled reply fails the call by its deadline and breaks the
// connection, a reply lost after the command went out is in doubt. No Redis server needed.

#include "wire.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "socket.hpp"
#include "support/free_port.hpp"

namespace idem::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using redis::Wire;

std::string_view str(const redis::ReplyPtr& r) { return {r->str, r->len}; }

TEST(Wire, AReplySplitAcrossFeedsReachesItsEntryWhole) {
  Wire<int> wire;
  const std::array<std::string_view, 2> echo{"ECHO", "hello"};
  wire.queue(echo, 1);
  wire.queue(echo, 2);
  std::string batch;
  wire.take_output(batch);
  EXPECT_EQ(batch, "*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n");
  redis::ReplyPtr reply;
  int entry = 0;
  const std::string bytes = "$5\r\nhello\r\n+OK\r\n";
  for (std::size_t i = 0; i < 6; ++i) {  // "$5\r\nhe": no whole reply yet
    ASSERT_TRUE(wire.feed(&bytes[i], 1));
    EXPECT_EQ(wire.next(reply, entry), Wire<int>::Got::more);
  }
  ASSERT_TRUE(wire.feed(bytes.data() + 6, bytes.size() - 6));
  ASSERT_EQ(wire.next(reply, entry), Wire<int>::Got::reply);
  EXPECT_EQ(entry, 1);
  EXPECT_EQ(str(reply), "hello");
  ASSERT_EQ(wire.next(reply, entry), Wire<int>::Got::reply);
  EXPECT_EQ(entry, 2);
  EXPECT_EQ(str(reply), "OK");
  EXPECT_EQ(wire.next(reply, entry), Wire<int>::Got::more);
  EXPECT_EQ(wire.awaiting(), 0u);
}

TEST(Wire, AReplyForNoCommandIsStrayAndGarbageIsBroken) {
  Wire<int> stray;
  redis::ReplyPtr reply;
  int entry = 0;
  ASSERT_TRUE(stray.feed("+OK\r\n", 5));
  EXPECT_EQ(stray.next(reply, entry), Wire<int>::Got::stray);

  Wire<int> garbled;
  garbled.queue(std::array<std::string_view, 1>{"PING"}, 1);
  (void)garbled.feed("?what\r\n", 7);
  EXPECT_EQ(garbled.next(reply, entry), Wire<int>::Got::broken);
  EXPECT_FALSE(garbled.error().empty());
}

TEST(Wire, OnlyCommandsHandedToAWriteCountAsWritten) {
  Wire<int> wire;
  const std::array<std::string_view, 1> ping{"PING"};
  wire.queue(ping, 1);
  std::string batch;
  wire.take_output(batch);
  wire.queue(ping, 2);  // encoded, not written yet
  std::vector<std::pair<int, bool>> failed;
  wire.fail_all([&](int e, bool written) { failed.emplace_back(e, written); });
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_EQ(failed[0], std::make_pair(1, true));
  EXPECT_EQ(failed[1], std::make_pair(2, false));
  EXPECT_FALSE(wire.has_output());
  EXPECT_EQ(wire.awaiting(), 0u);
}

// A loopback listener whose one connection `script` serves (reading the command, answering as it
// likes), on its own thread; the peer end closes when the script returns.
class ScriptedPeer {
 public:
  explicit ScriptedPeer(std::function<void(int fd)> script) {
    const LoopbackListener listening = listen_on_loopback(1);
    if (listening.fd < 0) throw std::runtime_error("cannot listen on loopback");
    listener_ = listening.fd;
    port_ = listening.port;
    thread_ = std::thread([this, script = std::move(script)] {
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      script(fd);
      ::close(fd);
    });
  }
  ~ScriptedPeer() {
    ::shutdown(listener_, SHUT_RDWR);  // an accept that never got its client returns
    thread_.join();
    ::close(listener_);
  }
  ScriptedPeer(const ScriptedPeer&) = delete;
  ScriptedPeer& operator=(const ScriptedPeer&) = delete;

  redis::ConnectionOptions options() const {
    redis::ConnectionOptions o;
    o.host = "127.0.0.1";
    o.port = port_;
    o.connect_timeout = 2s;
    o.command_timeout = 2s;
    return o;
  }

  // Reads what the client sent (one small command) and writes `bytes`.
  static void answer(int fd, std::string_view bytes) {
    std::array<char, 512> in;
    (void)::recv(fd, in.data(), in.size(), 0);
    (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  // Waits for the client to close its end (or 5 s at most).
  static void until_closed(int fd) {
    timeval tv{5, 0};
    (void)::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::array<char, 64> in;
    while (::recv(fd, in.data(), in.size(), 0) > 0) {
    }
  }

 private:
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
};

redis::BlockingConnection connect(const ScriptedPeer& peer) {
  Result<redis::BlockingConnection> c =
      redis::BlockingConnection::open(peer.options(), nullptr, Clock::now() + 2s, "peer");
  if (!c) throw std::runtime_error(c.failure().describe());
  return std::move(c).value();
}

const std::array<std::string_view, 2> kEcho{"ECHO", "hello"};

TEST(BlockingConnection, AReplySplitAcrossReadsIsWhole) {
  ScriptedPeer peer([](int fd) {
    ScriptedPeer::answer(fd, "$5\r\nhe");
    std::this_thread::sleep_for(50ms);  // the client reads the first part alone
    (void)::send(fd, "llo\r\n", 5, MSG_NOSIGNAL);
    ScriptedPeer::until_closed(fd);
  });
  redis::BlockingConnection c = connect(peer);
  Result<redis::ReplyPtr> r = c.command(kEcho, Clock::now() + 2s);
  ASSERT_TRUE(r) << r.failure().describe();
  EXPECT_EQ(str(r.value()), "hello");
  EXPECT_FALSE(c.broken());
}

TEST(BlockingConnection, AStalledReplyFailsByTheDeadlineAndBreaksTheConnection) {
  ScriptedPeer peer([](int fd) {
    ScriptedPeer::answer(fd, "$5\r\nhe");  // then nothing more
    ScriptedPeer::until_closed(fd);
  });
  redis::BlockingConnection c = connect(peer);
  const auto start = Clock::now();
  Result<redis::ReplyPtr> r = c.command(kEcho, start + 200ms, /*report_in_doubt=*/true);
  const auto took = Clock::now() - start;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::outcome_unknown) << "the command went out: " << r.failure().describe();
  EXPECT_GE(took, 190ms);
  EXPECT_LT(took, 1900ms) << "the call's deadline, not command_timeout (2 s), ends the wait";
  EXPECT_TRUE(c.broken());
  Result<redis::ReplyPtr> after = c.command(kEcho, Clock::now() + 200ms);
  ASSERT_FALSE(after);
  EXPECT_EQ(after.error(), errc::store_unavailable) << "a broken connection sends nothing";
}

TEST(BlockingConnection, AServerThatDoesNotReadFailsTheWriteByTheDeadline) {
  std::atomic<bool> done{false};
  ScriptedPeer peer([&done](int) {  // reads nothing until the test is done (5 s at most)
    for (auto until = Clock::now() + 5s; !done && Clock::now() < until;) {
      std::this_thread::sleep_for(10ms);
    }
  });
  redis::ConnectionOptions o = peer.options();
  o.command_timeout = 10s;  // the call's own deadline is what must end the write
  Result<redis::BlockingConnection> opened =
      redis::BlockingConnection::open(o, nullptr, Clock::now() + 2s, "peer");
  ASSERT_TRUE(opened) << opened.failure().describe();
  redis::BlockingConnection& c = opened.value();
  const std::string big(std::size_t{64} << 20, 'x');  // more than the socket buffers hold
  const std::array<std::string_view, 3> set{"SET", "k", big};
  const auto start = Clock::now();
  Result<redis::ReplyPtr> r = c.command(set, start + 200ms, /*report_in_doubt=*/true);
  const auto took = Clock::now() - start;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::store_unavailable) << "never sent whole: " << r.failure().describe();
  EXPECT_LT(took, 2500ms) << "the call's deadline ends the write";
  EXPECT_TRUE(c.broken());
  done = true;
}

TEST(BlockingConnection, AGarbledOrClosedReplyIsUnavailable) {
  ScriptedPeer garbled([](int fd) {
    ScriptedPeer::answer(fd, "?what\r\n");
    ScriptedPeer::until_closed(fd);
  });
  redis::BlockingConnection g = connect(garbled);
  Result<redis::ReplyPtr> r = g.command(kEcho, Clock::now() + 2s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::store_unavailable) << r.failure().describe();
  EXPECT_TRUE(g.broken());

  ScriptedPeer closing([](int fd) { ScriptedPeer::answer(fd, ""); });
  redis::BlockingConnection c = connect(closing);
  r = c.command(kEcho, Clock::now() + 2s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::store_unavailable);
  EXPECT_NE(r.failure().message.find("closed by the server"), std::string::npos)
      << r.failure().message;
}

TEST(BlockingConnection, NoListenerIsUnavailableAtOnce) {
  redis::ConnectionOptions o;
  o.host = "127.0.0.1";
  o.port = free_port();
  Result<redis::BlockingConnection> c =
      redis::BlockingConnection::open(o, nullptr, Clock::now() + 2s, "gone");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error(), errc::store_unavailable);
  EXPECT_NE(c.failure().message.find("cannot connect"), std::string::npos) << c.failure().message;
}

}  // namespace
}  // namespace idem::testing
