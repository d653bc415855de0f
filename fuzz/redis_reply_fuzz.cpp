// Redis script replies as idem's Redis stores decode them. The input is RESP bytes, parsed by
// hiredis's reader into redisReply trees exactly as a connection would; each reply then goes
// through the claim decoder (record and token scripts), the request-id cache decoder and the
// fenced-call decoder. Checked: a reply that is not one the scripts send is record_corrupt; a
// completed or failed answer comes only from a well-formed reply and carries its exact bytes.

#include <hiredis/hiredis.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "acl_refusal.hpp"
#include "fuzz_check.hpp"
#include "store_common.hpp"

namespace {

using idem::ClaimStatus;
using idem::errc;
using idem::fuzz::is;

bool integer_at(const redisReply& r, std::size_t i) {
  return r.elements > i && r.element[i]->type == REDIS_REPLY_INTEGER;
}

void check_claim(const redisReply& r) {
  using Reply = idem::detail::RedisClaimReply;
  Reply code{};
  const idem::Result<idem::Claim> claim = idem::redis::decode_claim(r, "fuzz", code);
  if (!claim) {
    IDEM_FUZZ_CHECK(is(claim.error(), errc::record_corrupt));
    return;
  }
  // Only {code, fence, ...} with a known code decodes.
  IDEM_FUZZ_CHECK(r.type == REDIS_REPLY_ARRAY && integer_at(r, 0));
  IDEM_FUZZ_CHECK(idem::detail::redis_claim_reply(r.element[0]->integer) == code);
  if ((code == Reply::token_unknown || code == Reply::token_mismatch) && r.elements == 1) {
    return;  // the token script's "no such token"
  }
  IDEM_FUZZ_CHECK(integer_at(r, 1) && r.element[1]->integer >= 0);
  IDEM_FUZZ_CHECK(claim->fence == static_cast<idem::Fence>(r.element[1]->integer));
  switch (claim->status) {
    case ClaimStatus::completed:
    case ClaimStatus::failed: {
      IDEM_FUZZ_CHECK(code ==
                      (claim->status == ClaimStatus::completed ? Reply::completed : Reply::failed));
      const redisReply& result = *r.element[2];
      IDEM_FUZZ_CHECK(result.type == REDIS_REPLY_STRING);
      IDEM_FUZZ_CHECK(claim->result == std::string_view(result.str, result.len));
      break;
    }
    case ClaimStatus::acquired:
      IDEM_FUZZ_CHECK(code == Reply::acquired);
      break;
    case ClaimStatus::in_progress:
      IDEM_FUZZ_CHECK(code == Reply::in_progress && claim->lease_remaining.count() >= 0);
      break;
    case ClaimStatus::mismatch:
      IDEM_FUZZ_CHECK(code == Reply::mismatch || code == Reply::token_mismatch);
      break;
  }
}

void check_cache_claim(const redisReply& r) {
  std::array<char, 16> fp{};
  fp.fill('f');
  const idem::Result<idem::Claim> claim = idem::redis::decode_cache_claim(r, 77, fp, "fuzz");
  if (!claim) {
    IDEM_FUZZ_CHECK(is(claim.error(), errc::record_corrupt));
    return;
  }
  IDEM_FUZZ_CHECK(r.type == REDIS_REPLY_ARRAY);
  if (claim->status == ClaimStatus::acquired) {
    IDEM_FUZZ_CHECK(r.elements == 0 && claim->fence == 77);
    return;
  }
  IDEM_FUZZ_CHECK(r.elements == 2 && r.element[0]->type == REDIS_REPLY_STRING);
  const std::string_view entry(r.element[0]->str, r.element[0]->len);
  IDEM_FUZZ_CHECK(entry.size() >= idem::redis::kCacheEntryHeader);
  namespace state = idem::detail::redis_state;
  IDEM_FUZZ_CHECK(entry[0] == state::held || entry[0] == state::completed ||
                  entry[0] == state::failed);
  const bool same = entry.substr(9, 16) == std::string_view(fp.data(), fp.size());
  IDEM_FUZZ_CHECK(same == (claim->status != ClaimStatus::mismatch));
  if (claim->status == ClaimStatus::completed || claim->status == ClaimStatus::failed) {
    IDEM_FUZZ_CHECK(entry[0] ==
                    (claim->status == ClaimStatus::completed ? state::completed : state::failed));
    IDEM_FUZZ_CHECK(claim->result == entry.substr(idem::redis::kCacheEntryHeader));
  }
  if (claim->status == ClaimStatus::in_progress) IDEM_FUZZ_CHECK(entry[0] == state::held);
}

void check_fenced(const redisReply& reply) {
  const idem::Status status = idem::redis::decode_fenced(reply, "fuzz", "commit");
  using Reply = idem::detail::RedisFencedReply;
  const bool integer = reply.type == REDIS_REPLY_INTEGER;
  if (reply.type == REDIS_REPLY_ERROR) {
    // The server's own refusal: a key of another type or a script's IDEM_CORRUPT is the record's
    // fault, a right the ACL user lacks the configuration's, anything else (OOM, BUSY,
    // READONLY...) the server's.
    const std::string_view text(reply.str, reply.len);
    const bool corrupt = text.starts_with("WRONGTYPE") || text.find("IDEM_CORRUPT") != text.npos;
    const bool refused = idem::redis::acl_refusal(text).has_value();
    IDEM_FUZZ_CHECK(is(status.error(), corrupt   ? errc::record_corrupt
                                       : refused ? errc::config_invalid
                                                 : errc::store_unavailable));
  } else if (integer && reply.integer == static_cast<long long>(Reply::done)) {
    IDEM_FUZZ_CHECK(status.ok());
  } else if (integer && reply.integer == static_cast<long long>(Reply::lease_lost)) {
    IDEM_FUZZ_CHECK(is(status.error(), errc::lease_lost));
  } else {
    IDEM_FUZZ_CHECK(is(status.error(), errc::record_corrupt));
  }
}

// hiredis allocates an array's element table from its declared count before the elements
// arrive, so "*277777777\r\n" alone asks for 2 GB. A server sends what it declares: inputs that
// declare more elements than they have bytes are not replies and are skipped.
bool declares_more_than_it_holds(std::string_view bytes) {
  for (std::size_t at = bytes.find('*'); at != std::string_view::npos;
       at = bytes.find('*', at + 1)) {
    std::size_t count = 0;
    for (std::size_t i = at + 1; i < bytes.size() && bytes[i] >= '0' && bytes[i] <= '9'; ++i) {
      count = count * 10 + static_cast<std::size_t>(bytes[i] - '0');
      if (count > bytes.size()) return true;
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (declares_more_than_it_holds({reinterpret_cast<const char*>(data), size})) return 0;
  redisReader* reader = redisReaderCreate();
  if (redisReaderFeed(reader, reinterpret_cast<const char*>(data), size) == REDIS_OK) {
    for (int n = 0; n < 64; ++n) {
      void* raw = nullptr;
      if (redisReaderGetReply(reader, &raw) != REDIS_OK || raw == nullptr) break;
      idem::redis::ReplyPtr reply(static_cast<redisReply*>(raw));
      check_claim(*reply);
      check_cache_claim(*reply);
      check_fenced(*reply);
    }
  }
  redisReaderFree(reader);
  return 0;
}
