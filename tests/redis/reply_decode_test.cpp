// The Redis stores' reply decoders on replies no script of idem sends (found by fuzz/
// redis_reply_fuzz.cpp's invariants): they are record_corrupt, never a claim or a success. The
// replies are RESP bytes read by hiredis, as a connection reads them; no server is needed.

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <array>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "abandoned_index.hpp"
#include "idem/engine/record_model.hpp"
#include "lua_scripts.hpp"
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
  RedisClaimReply code{};
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
  EXPECT_EQ(code, RedisClaimReply::completed);
}

TEST(RedisReplyDecodeTest, FencedRepliesOtherThanZeroOrOneAreCorruptNotLeaseLost) {
  EXPECT_TRUE(decode_fenced(*parse(":1\r\n"), "test", "commit").ok());
  EXPECT_EQ(decode_fenced(*parse(":0\r\n"), "test", "commit").error(), errc::lease_lost);
  EXPECT_EQ(decode_fenced(*parse(":7\r\n"), "test", "commit").error(), errc::record_corrupt);
  EXPECT_EQ(decode_fenced(*parse(":-1\r\n"), "test", "commit").error(), errc::record_corrupt);
  EXPECT_EQ(decode_fenced(*parse("$1\r\n1\r\n"), "test", "commit").error(), errc::record_corrupt);
  // Error replies (both faces decode them here): a key that is not idem's is corrupt, the rest
  // an outage.
  EXPECT_EQ(
      decode_fenced(*parse("-WRONGTYPE Operation against a key\r\n"), "test", "commit").error(),
      errc::record_corrupt);
  EXPECT_EQ(decode_fenced(*parse("-LOADING Redis is loading\r\n"), "test", "commit").error(),
            errc::store_unavailable);
  EXPECT_EQ(decode_record_claim(*parse("-IDEM_CORRUPT x\r\n"), "test").error(),
            errc::record_corrupt);
  EXPECT_EQ(decode_record_claim(*parse("*1\r\n:5\r\n"), "test").error(), errc::record_corrupt)
      << "a token code from the record script";
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

// An entry the script found is live whatever its PTTL says (-1: no expiry, 0: under a
// millisecond left): a marker is in progress, never acquired, a response replays.
TEST(RedisReplyDecodeTest, CacheEntriesWithoutTimeLeftStandAsFound) {
  std::array<char, 16> fp{};
  fp.fill('f');
  auto entry = [&](char state, const std::string& pttl) {
    const std::string bytes = state + std::string(8, '\1') + std::string(16, 'f') + "ok";
    return parse("*2\r\n$" + std::to_string(bytes.size()) + "\r\n" + bytes + "\r\n:" + pttl +
                 "\r\n");
  };
  for (const char* pttl : {"-1", "0"}) {
    const Result<Claim> held = decode_cache_claim(*entry('P', pttl), 9, fp, "t");
    ASSERT_TRUE(held.has_value()) << pttl;
    EXPECT_EQ(held->status, ClaimStatus::in_progress) << pttl;
    EXPECT_EQ(held->lease_remaining, std::chrono::milliseconds{0}) << pttl;
    const Result<Claim> done = decode_cache_claim(*entry('F', pttl), 9, fp, "t");
    ASSERT_TRUE(done.has_value()) << pttl;
    EXPECT_EQ(done->status, ClaimStatus::failed) << pttl;
    EXPECT_EQ(done->result, "ok");
    EXPECT_EQ(done->expires_in, std::chrono::milliseconds{0}) << pttl;
  }
  const Result<Claim> live = decode_cache_claim(*entry('P', "250"), 9, fp, "t");
  ASSERT_TRUE(live.has_value());
  EXPECT_EQ(live->status, ClaimStatus::in_progress);
  EXPECT_EQ(live->lease_remaining, std::chrono::milliseconds{250});
  EXPECT_EQ(live->fence, 0x0101010101010101u);
}

// The Lua scripts name their reply codes and stored states (`local REPLY_... = ...`,
// `local STATE_... = ...`); each name must have C++'s value (detail::RedisClaimReply,
// detail::RedisFencedReply, detail::redis_state), and no code or state may appear in a script
// other than through its name.
TEST(RedisReplyDecodeTest, TheScriptsNamesAgreeWithTheRecordModel) {
  using detail::RedisClaimReply;
  using detail::RedisFencedReply;
  auto code = [](auto value) { return std::to_string(static_cast<long long>(value)); };
  auto letter = [](char c) { return "'" + std::string(1, c) + "'"; };
  const std::map<std::string, std::string> cpp = {
      {"REPLY_ACQUIRED", code(RedisClaimReply::acquired)},
      {"REPLY_COMPLETED", code(RedisClaimReply::completed)},
      {"REPLY_FAILED", code(RedisClaimReply::failed)},
      {"REPLY_IN_PROGRESS", code(RedisClaimReply::in_progress)},
      {"REPLY_MISMATCH", code(RedisClaimReply::mismatch)},
      {"REPLY_TOKEN_UNKNOWN", code(RedisClaimReply::token_unknown)},
      {"REPLY_TOKEN_MISMATCH", code(RedisClaimReply::token_mismatch)},
      {"REPLY_DONE", code(RedisFencedReply::done)},
      {"REPLY_LEASE_LOST", code(RedisFencedReply::lease_lost)},
      {"REPLY_GAP", code(kStepReplyGap)},
      {"REPLY_STALE", code(IndexEntry::stale)},
      {"REPLY_LIVE", code(IndexEntry::live)},
      {"REPLY_ABANDONED", code(IndexEntry::abandoned)},
      {"REPLY_WOKEN", code(WaitReply::woken)},
      {"REPLY_COUNTED", code(WaitReply::counted)},
      {"STATE_HELD", letter(detail::redis_state::held)},
      {"STATE_COMPLETED", letter(detail::redis_state::completed)},
      {"STATE_FAILED", letter(detail::redis_state::failed)},
      {"STATE_RELEASED", letter(detail::redis_state::released)},
      {"STATE_ISSUED", letter(detail::redis_state::issued)},
  };
  const std::regex declaration(R"(^local ((?:REPLY|STATE)_\w+(?:, (?:REPLY|STATE)_\w+)*) = (.*)$)");
  const std::regex raw_code(R"(return \{?\s*-?\d)");
  const std::regex raw_state(R"('[A-Z]')");
  int named = 0;
  for (const Script* script :
       {&script_record_claim, &script_record_commit, &script_record_abort, &script_record_extend,
        &script_token_claim, &script_token_abort, &script_cache_claim, &script_cache_commit,
        &script_cache_abort, &script_cache_extend, &script_record_step_save,
        &script_record_step_load, &script_record_keep_request, &script_record_find_abandoned,
        &script_record_wait, &script_record_commit_batch, &script_cache_wait}) {
    std::istringstream lines{std::string(script->source)};
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("--", 0) == 0) continue;
      std::smatch m;
      if (std::regex_match(line, m, declaration)) {
        std::vector<std::string> names, values;
        std::istringstream name_list(m[1]), value_list(m[2]);
        for (std::string n; std::getline(name_list >> std::ws, n, ',');) names.push_back(n);
        for (std::string v; std::getline(value_list >> std::ws, v, ',');) values.push_back(v);
        ASSERT_EQ(names.size(), values.size()) << script->name << ": " << line;
        for (std::size_t i = 0; i < names.size(); ++i) {
          ASSERT_TRUE(cpp.contains(names[i])) << script->name << ": C++ has no " << names[i];
          EXPECT_EQ(values[i], cpp.at(names[i])) << script->name << ": " << names[i];
          ++named;
        }
        continue;
      }
      EXPECT_FALSE(std::regex_search(line, raw_code)) << script->name << ": raw code: " << line;
      EXPECT_FALSE(std::regex_search(line, raw_state)) << script->name << ": raw state: " << line;
    }
  }
  EXPECT_GE(named, 30);  // every script declares what it answers
}

// The wake list's name and expiry, written in record_wake_step.lua (which every script that ends
// a hold includes) and in C++ (wake_key, kWakeTtl), agree.
TEST(RedisReplyDecodeTest, TheWakeListsNameAndExpiryAgreeWithTheScripts) {
  const std::string declared = "local WAKE_SUFFIX, WAKE_TTL_MS = '" + std::string(kWakeSuffix) +
                               "', " + std::to_string(kWakeTtl.count()) + "\n";
  for (const Script* script : {&script_record_wait, &script_record_commit, &script_record_abort,
                               &script_record_commit_batch, &script_token_abort}) {
    EXPECT_NE(std::string_view(script->source).find(declared), std::string_view::npos)
        << script->name;
  }
  EXPECT_EQ(wake_key("idem:{0123456789abcdef}k", 42), "idem:{0123456789abcdef}k:wake:42");
  EXPECT_EQ(key_slot(wake_key("a{b{0123456789abcdef}k", 7)), key_slot("a{b{0123456789abcdef}k"));
}

// A RequestIdCache entry's waiter count and wake list: the suffixes in cache_wake_step.lua and
// record_wake_step.lua (which the cache's waiting and ending scripts include) and in C++ agree,
// and both names share the entry's slot.
TEST(RedisReplyDecodeTest, TheCachesWaitNamesAgreeWithTheScripts) {
  const std::string waiting = "local WAITING_SUFFIX = '" + std::string(kWaitingSuffix) + "'\n";
  const std::string wake = "local WAKE_SUFFIX, WAKE_TTL_MS = '" + std::string(kWakeSuffix) + "', " +
                           std::to_string(kWakeTtl.count()) + "\n";
  for (const Script* script : {&script_cache_wait, &script_cache_commit, &script_cache_abort}) {
    const std::string_view source(script->source);
    EXPECT_NE(source.find(waiting), std::string_view::npos) << script->name;
    EXPECT_NE(source.find(wake), std::string_view::npos) << script->name;
  }
  const std::string entry = "idem:req:{0123456789abcdef}k";
  EXPECT_EQ(cache_waiting_key(entry, 0x1234), entry + ":waiting:0000000000001234");
  EXPECT_EQ(cache_wake_key(entry, 0xfedcba9876543210ULL), entry + ":wake:fedcba9876543210");
  EXPECT_EQ(key_slot(cache_wake_key(entry, 7)), key_slot(entry));
  EXPECT_EQ(key_slot(cache_waiting_key(entry, 7)), key_slot(entry));
}

// The index of kept requests: a scope read from an effective key, members that give back their
// key and fence, and lexicographic bounds that take in exactly the members under a prefix.
TEST(RedisAbandonedIndexTest, ScopesMembersAndBoundsReadBackExactly) {
  const std::string scope(200, 's');  // a length of two LEB128 bytes
  const std::string key = std::string("\xc8\x01") + scope + std::string("\x00", 1) + "id";
  ASSERT_TRUE(scope_part(key).has_value());
  EXPECT_EQ(scope_part(key)->size(), 2 + scope.size());
  EXPECT_FALSE(scope_part(key.substr(0, 100)).has_value());
  EXPECT_FALSE(scope_part("").has_value());
  EXPECT_FALSE(scope_part("\xff\xff").has_value());

  const Fence fence = 0x0102030405060708ULL;
  std::string_view read_key;
  Fence read_fence = 0;
  const std::string member = index_member(key, fence);
  ASSERT_TRUE(read_index_member(member, read_key, read_fence));
  EXPECT_EQ(read_key, key);
  EXPECT_EQ(read_fence, fence);
  EXPECT_FALSE(read_index_member("short", read_key, read_fence));

  EXPECT_EQ(lex_from("ab"), "[ab");
  EXPECT_EQ(lex_past("ab"), "(ac");
  EXPECT_EQ(lex_past("a\xff\xff"), "(b");
  EXPECT_EQ(lex_past("\xff"), "+");
  EXPECT_EQ(abandoned_index_key("p:", "\x01x"),
            "p:{abandoned:" + tagged_key("", "\x01x").substr(1, 16) + "}\x01x");
}

}  // namespace
}  // namespace idem::redis
