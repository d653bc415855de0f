// The Redis stores' reply decoders on replies no script of idem sends (found by fuzz/
// redis_reply_fuzz.cpp's invariants): they are record_corrupt, never a claim or a success. The
// replies are RESP bytes read by hiredis, as a connection reads them; no server is needed.

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <array>
#include <string>
#include <string_view>

#include "store_common.hpp"

namespace idem::redis {
namespace {

ReplyPtr parse(std::string_view resp) {
  redisReader* reader = redisReaderCreate();
  void* reply = nullptr;
  const bool ok = redisReaderFeed(reader, resp.data(), resp.size()) == REDIS_OK &&
                  redisReaderGetReply(reader, &reply) == REDIS_OK && reply != nullptr;
  redisReaderFree(reader);
  EXPECT_TRUE(ok) << resp;
  return ReplyPtr(static_cast<redisReply*>(reply));
}

TEST(RedisReplyDecodeTest, ClaimCodesOutsideTheScriptsRangeAreCorruptNotTruncated) {
  int code = -1;
  // 2^32 + 1 truncated to an int would be 1: a completed record replaying "r".
  const ReplyPtr wide = parse("*3\r\n:4294967297\r\n:7\r\n$1\r\nr\r\n");
  const Result<Claim> claim = decode_claim(*wide, "test", code);
  ASSERT_FALSE(claim.has_value());
  EXPECT_EQ(claim.error(), errc::record_corrupt);
  const ReplyPtr negative = parse("*2\r\n:-1\r\n:7\r\n");
  EXPECT_EQ(decode_claim(*negative, "test", code).error(), errc::record_corrupt);
  const ReplyPtr good = parse("*3\r\n:1\r\n:7\r\n$1\r\nr\r\n");
  const Result<Claim> completed = decode_claim(*good, "test", code);
  ASSERT_TRUE(completed.has_value());
  EXPECT_EQ(completed->status, ClaimStatus::completed);
  EXPECT_EQ(completed->result, "r");
}

TEST(RedisReplyDecodeTest, FencedRepliesOtherThanZeroOrOneAreCorruptNotLeaseLost) {
  EXPECT_TRUE(decode_fenced(parse(":1\r\n"), "test", "commit").ok());
  EXPECT_EQ(decode_fenced(parse(":0\r\n"), "test", "commit").error(), errc::lease_lost);
  EXPECT_EQ(decode_fenced(parse(":7\r\n"), "test", "commit").error(), errc::record_corrupt);
  EXPECT_EQ(decode_fenced(parse(":-1\r\n"), "test", "commit").error(), errc::record_corrupt);
  EXPECT_EQ(decode_fenced(parse("$1\r\n1\r\n"), "test", "commit").error(), errc::record_corrupt);
}

TEST(RedisReplyDecodeTest, CacheEntriesOfAnUnknownStateAreCorruptEvenUnderAnotherFingerprint) {
  std::array<char, 16> fp{};
  fp.fill('f');
  const std::string holder(8, '\1');
  auto entry = [&](char state, const std::string& fingerprint, const std::string& result) {
    const std::string bytes = state + holder + fingerprint + result;
    return parse("*2\r\n$" + std::to_string(bytes.size()) + "\r\n" + bytes + "\r\n:500\r\n");
  };
  const Result<Claim> mine =
      decode_cache_claim(*entry('C', std::string(16, 'f'), "ok"), 9, fp, "t");
  ASSERT_TRUE(mine.has_value());
  EXPECT_EQ(mine->status, ClaimStatus::completed);
  EXPECT_EQ(mine->result, "ok");
  EXPECT_EQ(mine->expires_in, std::chrono::milliseconds{500});  // the entry's PTTL
  const Result<Claim> other =
      decode_cache_claim(*entry('C', std::string(16, 'g'), "ok"), 9, fp, "t");
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->status, ClaimStatus::mismatch);
  // The state is checked before the fingerprint: an unknown one is never a mere mismatch.
  EXPECT_EQ(decode_cache_claim(*entry('Z', std::string(16, 'g'), ""), 9, fp, "t").error(),
            errc::record_corrupt);
  EXPECT_EQ(decode_cache_claim(*entry('Z', std::string(16, 'f'), ""), 9, fp, "t").error(),
            errc::record_corrupt);
  EXPECT_EQ(decode_cache_claim(*parse("*2\r\n$3\r\nC12\r\n:5\r\n"), 9, fp, "t").error(),
            errc::record_corrupt);
  EXPECT_EQ(decode_cache_claim(*parse(":1\r\n"), 9, fp, "t").error(), errc::record_corrupt);
  const Result<Claim> acquired = decode_cache_claim(*parse("*0\r\n"), 9, fp, "t");
  ASSERT_TRUE(acquired.has_value());
  EXPECT_EQ(acquired->status, ClaimStatus::acquired);
  EXPECT_EQ(acquired->fence, 9u);
}

}  // namespace
}  // namespace idem::redis
