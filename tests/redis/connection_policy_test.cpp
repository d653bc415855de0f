// The decisions both Redis faces share, without I/O: the reconnect backoff and the watchdog
// (src/redis/connection_policy.hpp), a cluster call's tries and one read of the slot map
// (src/redis/slot_routing.hpp), on replies parsed from RESP bytes. No Redis server needed.

#include "connection_policy.hpp"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol.hpp"
#include "slot_routing.hpp"

namespace idem::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using redis::ConnectionOptions;

// A reply as a server would send it.
redis::ReplyPtr parsed(std::string_view resp) {
  redis::ReplyReader reader;
  EXPECT_TRUE(reader.feed(resp.data(), resp.size()));
  redis::ReplyPtr reply;
  EXPECT_EQ(reader.next(reply), redis::ReplyReader::Got::reply) << resp;
  return reply;
}

// CLUSTER SLOTS naming one primary per range.
std::string slots_reply(const std::vector<std::pair<std::pair<int, int>, int>>& ranges) {
  std::string out = "*" + std::to_string(ranges.size()) + "\r\n";
  for (const auto& [slots, port] : ranges) {
    out += "*3\r\n:" + std::to_string(slots.first) + "\r\n:" + std::to_string(slots.second) +
           "\r\n*2\r\n$9\r\n127.0.0.1\r\n:" + std::to_string(port) + "\r\n";
  }
  return out;
}

struct FakeNode {
  explicit FakeNode(ConnectionOptions o) : options(std::move(o)) {}
  ConnectionOptions options;
};
using Topology = redis::Topology<FakeNode>;
using Tries = redis::Tries<FakeNode>;

Topology topology_of(std::vector<std::string> seeds) {
  return Topology(ConnectionOptions{}, seeds, redis::OptionNames{"test", "node", "seeds"},
                  [](ConnectionOptions o) { return std::make_unique<FakeNode>(std::move(o)); });
}

TEST(ReconnectBackoff, AFailureHoldsConnectsOffDoublingUpToTheMaxUntilAConnection) {
  redis::ReconnectBackoff backoff(50ms, 120ms);
  const auto t0 = Clock::now();
  EXPECT_EQ(backoff.wait_left(t0), 0ms);
  backoff.failed(t0, "refused");
  EXPECT_EQ(backoff.wait_left(t0), 50ms);
  EXPECT_EQ(backoff.wait_left(t0 + 20ms), 30ms);
  EXPECT_EQ(backoff.wait_left(t0 + 50ms), 0ms);
  EXPECT_EQ(backoff.why(), "refused");
  backoff.failed(t0 + 50ms, "again");
  EXPECT_EQ(backoff.wait_left(t0 + 50ms), 100ms);
  backoff.failed(t0 + 150ms, "and again");
  EXPECT_EQ(backoff.wait_left(t0 + 150ms), 120ms) << "capped at the max";
  backoff.connected();
  backoff.failed(t0 + 300ms, "once more");
  EXPECT_EQ(backoff.wait_left(t0 + 300ms), 50ms) << "a connection starts the pauses over";
}

TEST(Watchdog, ASlowConnectOrALateReplyIsOverdueAndAReplyAtATickResetsTheClock) {
  redis::Watchdog dog(ConnectionOptions{.connect_timeout = 200ms, .command_timeout = 400ms});
  EXPECT_EQ(dog.period(), 50ms);
  const auto t0 = Clock::now();
  dog.connecting(t0);
  EXPECT_EQ(dog.overdue(t0 + 150ms, /*connected=*/false, /*awaiting=*/true), "");
  EXPECT_NE(dog.overdue(t0 + 250ms, false, true).find("connecting took more than 200 ms"),
            std::string::npos);

  dog.connecting(t0);
  EXPECT_EQ(dog.overdue(t0 + 300ms, true, true), "");
  dog.replied();  // noted now, timed at the next tick
  EXPECT_EQ(dog.overdue(t0 + 350ms, true, true), "");
  EXPECT_EQ(dog.overdue(t0 + 700ms, true, true), "") << "400 ms from the tick that saw a reply";
  EXPECT_NE(dog.overdue(t0 + 800ms, true, true).find("no reply within 400 ms"), std::string::npos);
  EXPECT_EQ(dog.overdue(t0 + 5s, true, false), "") << "nothing awaited, nothing late";
  dog.sent_to_idle(t0 + 5s);
  EXPECT_EQ(dog.overdue(t0 + 5s + 300ms, true, true), "");
}

TEST(ClusterTries, RepliesAskForResendRefreshOrPauseAndGivingUpAfterALostReplyIsInDoubt) {
  Topology topology = topology_of({"127.0.0.1:7000"});
  const redis::ReplyPtr map = parsed(slots_reply({{{0, 16383}, 7000}}));
  redis::SlotMapRead<FakeNode> read(topology, nullptr);
  ASSERT_NE(read.next(), nullptr);
  read.answered(*map, "127.0.0.1", "127.0.0.1:7000");
  ASSERT_TRUE(read.install());
  FakeNode* primary = &topology.node("127.0.0.1", 7000);

  Tries tries;
  tries.start("k", ConnectionOptions{.connect_timeout = 1s, .command_timeout = 2s});
  EXPECT_EQ(tries.slot, redis::key_slot("k"));
  EXPECT_EQ(tries.budget, 3s);
  bool asking = true;
  EXPECT_EQ(tries.next(topology, asking), primary);
  EXPECT_FALSE(asking);

  const std::string slot = std::to_string(tries.slot);
  const auto reply_to = [&](std::string_view resp) {
    const Tries::Next next = tries.on_reply(topology, *parsed(resp), "n");
    return std::array<bool, 4>{next.answer, next.read_map, next.ask_last, next.pause};
  };
  using Asks = std::array<bool, 4>;  // answer, read_map, ask_last, pause
  EXPECT_EQ(reply_to("$2\r\nok\r\n"), (Asks{true, false, false, false}));
  EXPECT_EQ(reply_to("-ERR other\r\n"), (Asks{true, false, false, false}));
  EXPECT_EQ(reply_to("-ASK " + slot + " 127.0.0.1:7001\r\n"), (Asks{false, false, false, false}));
  FakeNode* importing = tries.next(topology, asking);
  EXPECT_EQ(importing, &topology.node("127.0.0.1", 7001));
  EXPECT_TRUE(asking);
  EXPECT_EQ(topology.owner(tries.slot), primary) << "ASK leaves the map alone";
  EXPECT_EQ(reply_to("-MOVED " + slot + " 127.0.0.1:7002\r\n"), (Asks{false, true, false, false}))
      << "a node the map does not know as a primary: read the whole map";
  EXPECT_EQ(topology.owner(tries.slot), &topology.node("127.0.0.1", 7002));
  (void)tries.next(topology, asking);
  EXPECT_EQ(reply_to("-MOVED " + slot + " 127.0.0.1:7000\r\n"), (Asks{false, false, false, false}));
  EXPECT_EQ(tries.next(topology, asking), primary);
  EXPECT_FALSE(asking);
  EXPECT_EQ(reply_to("-TRYAGAIN later\r\n"), (Asks{false, false, false, true}));
  EXPECT_EQ(reply_to("-CLUSTERDOWN down\r\n"), (Asks{false, true, true, true}));
  EXPECT_EQ(topology.moved(), 2u);
  EXPECT_EQ(topology.asked(), 1u);

  // Pauses: 1 ms doubling with the attempts, at most 100 ms, none past the deadline.
  EXPECT_EQ(tries.pause(), std::optional(1ms));
  tries.attempts = 3;
  EXPECT_EQ(tries.pause(), std::optional(8ms));
  tries.attempts = 12;
  EXPECT_EQ(tries.pause(), std::optional(100ms));
  EXPECT_TRUE(tries.may_send(16));
  EXPECT_FALSE(tries.may_send(12));

  EXPECT_EQ(tries.give_up().code, make_error_code(errc::store_unavailable));
  tries.failed(redis::reply_lost(redis::unavailable("redis n: commit timed out")));
  tries.failed(redis::unavailable("redis n: refused"));
  const Failure gave_up = tries.give_up();
  EXPECT_EQ(gave_up.code, make_error_code(errc::outcome_unknown)) << gave_up.message;
  EXPECT_NE(gave_up.message.find("refused"), std::string::npos) << gave_up.message;

  tries.deadline = Clock::now();
  EXPECT_FALSE(tries.may_send(16));
  EXPECT_EQ(tries.pause(), std::nullopt);
}

TEST(SlotMapRead, TheFirstCompleteMapWinsAndAPartialOneOnlyWhenNoneIsComplete) {
  Topology topology = topology_of({"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"});
  const redis::ReplyPtr partial = parsed(slots_reply({{{0, 8000}, 7000}}));
  const redis::ReplyPtr complete = parsed(slots_reply({{{0, 8191}, 7000}, {{8192, 16383}, 7001}}));

  redis::SlotMapRead<FakeNode> read(topology, &topology.node("127.0.0.1", 7000));
  FakeNode* first = read.next();
  ASSERT_NE(first, nullptr);
  EXPECT_NE(first, &topology.node("127.0.0.1", 7000)) << "the failed node is asked last";
  read.answered(*partial, "127.0.0.1", "first");
  ASSERT_NE(read.next(), nullptr);
  read.answered(*complete, "127.0.0.1", "second");
  EXPECT_EQ(read.next(), nullptr) << "a complete map ends the read";
  ASSERT_TRUE(read.install());
  EXPECT_EQ(topology.owner(16383), &topology.node("127.0.0.1", 7001));
  EXPECT_EQ(topology.generation(), 1u);

  redis::SlotMapRead<FakeNode> partial_only(topology, nullptr);
  std::size_t asked = 0;
  while (FakeNode* n = partial_only.next()) {
    ++asked;
    if (asked == 1) partial_only.answered(*partial, "127.0.0.1", "n");
    if (asked == 2) partial_only.answered(*parsed("-ERR no\r\n"), "127.0.0.1", "n");
    if (asked >= 3) partial_only.failed(redis::unavailable("redis n: refused"));
    (void)n;
  }
  EXPECT_EQ(asked, 3u) << "every known node is asked when no map is complete";
  ASSERT_TRUE(partial_only.install());
  EXPECT_EQ(topology.owner(0), &topology.node("127.0.0.1", 7000));
  EXPECT_EQ(topology.owner(16383), nullptr) << "the best map read, though partial";

  redis::SlotMapRead<FakeNode> none(topology, nullptr);
  while (none.next() != nullptr) none.failed(redis::unavailable("redis n: refused"));
  EXPECT_FALSE(none.install());
  EXPECT_EQ(none.why(), "redis n: refused");
  EXPECT_EQ(topology.generation(), 2u);
}

}  // namespace
}  // namespace idem::testing
