// StreamConsumer::process message by message, on the test Redis: a recorded result and a refusal
// no retry can change are acknowledged (the refusal counted as rejected); a key another holder
// has and a handler that threw stay pending, and come back first on the next page.

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "idem/idem.hpp"
#include "idem/redis/stream_consumer.hpp"
#include "redis/redis_test_support.hpp"

namespace idem::testing {
namespace {

using namespace std::chrono_literals;

// The ids XPENDING lists for `group` on `stream`.
std::vector<std::string> pending_ids(redis::Client& client, const std::string& stream) {
  std::vector<std::string> out;
  Result<redis::Reply> r = client.command({"XPENDING", stream, "g", "-", "+", "100"});
  EXPECT_TRUE(r) << (r ? "" : r.failure().describe());
  if (!r) return out;
  for (const redis::Reply& entry : r->elements) {
    if (!entry.elements.empty()) out.push_back(entry.elements[0].str);
  }
  return out;
}

TEST(StreamConsumerPage, SettledAndRefusedForGoodAreAckedRetryableOnesComeBackFirst) {
  IDEM_REQUIRE_REDIS(client);
  const std::string stream = unique_prefix("page") + "stream";
  redis::StreamConsumer consumer(
      client, redis::StreamConsumerOptions{
                  .stream = stream, .group = "g", .consumer = "c1", .block = 10ms});
  ASSERT_TRUE(consumer.create_group().ok());
  for (const std::string id : {"1-1", "1-2", "1-3", "1-4"}) {
    ASSERT_EQ(redis_string(*client, {"XADD", stream, id, "n", id}), id);
  }
  MemoryStore store;
  IdempotencyGuard guard{store, Options{.scope = "page"}};
  // 1-2: another holder has its key, with the message's own payload (in_progress: retryable).
  const redis::StreamMessage second{"1-2", {{"n", "1-2"}}};
  auto holder = guard.begin<std::string>(Key{"1-2", stream}, second.payload());
  ASSERT_TRUE(holder.acquired());
  // 1-3: its key was used with another payload (payload_mismatch: no retry changes it).
  ASSERT_TRUE(guard.execute(Key{"1-3", stream}, "another payload", [] { return std::string("x"); })
                  .recorded());
  bool throw_on_last = true;  // 1-4's handler throws the first time
  std::vector<std::string> ran;
  auto handler = [&](const redis::StreamMessage& m, Context&) {
    if (m.id == "1-4" && throw_on_last) throw std::runtime_error("not yet");
    ran.push_back(m.id);
    return m.id;
  };

  Result<redis::PageReport> first = consumer.process(guard, handler);
  ASSERT_TRUE(first) << first.failure().describe();
  EXPECT_EQ(first->read, 4u);
  EXPECT_EQ(first->acked, 2u);     // 1-1 recorded, 1-3 refused for good
  EXPECT_EQ(first->rejected, 1u);  // 1-3
  EXPECT_EQ(first->pending, 2u);   // 1-2 held elsewhere, 1-4 threw
  EXPECT_EQ(ran, std::vector<std::string>{"1-1"});
  EXPECT_EQ(pending_ids(*client, stream), (std::vector<std::string>{"1-2", "1-4"}));

  // The holder gives up and the handler stops throwing: the next page is this consumer's own
  // pending messages, and both settle.
  holder.fail("gave up");
  throw_on_last = false;
  Result<redis::PageReport> second_page = consumer.process(guard, handler);
  ASSERT_TRUE(second_page) << second_page.failure().describe();
  EXPECT_EQ(second_page->read, 2u);
  EXPECT_EQ(second_page->acked, 2u);
  EXPECT_EQ(second_page->rejected, 0u);
  EXPECT_EQ(second_page->pending, 0u);
  EXPECT_EQ(ran, (std::vector<std::string>{"1-1", "1-2", "1-4"}));
  EXPECT_TRUE(pending_ids(*client, stream).empty());

  // Nothing left: a page reads nothing new, and 1-1 replays rather than running again.
  Result<redis::PageReport> empty = consumer.process(guard, handler);
  ASSERT_TRUE(empty) << empty.failure().describe();
  EXPECT_EQ(empty->read, 0u);
  auto again =
      guard.execute(Key{"1-1", stream}, redis::StreamMessage{"1-1", {{"n", "1-1"}}}.payload(),
                    [] { return std::string("ran again"); });
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.value(), "1-1");
  (void)client->command({"DEL", stream});
}

}  // namespace
}  // namespace idem::testing
