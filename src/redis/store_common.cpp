// What the Redis stores share: key names, argument encoding and reply decoding.

#include "store_common.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "lua_scripts.hpp"

namespace idem::redis {

KeyTag key_tag(std::string_view key) noexcept {
  static constexpr std::string_view kHex = "0123456789abcdef";
  std::uint64_t h = detail::hash_bytes(key);
  KeyTag tag;
  tag.front() = '{';
  tag.back() = '}';
  for (auto digit = tag.rbegin() + 1; digit != tag.rend() - 1; ++digit, h >>= 4) {
    *digit = kHex[h & 0xf];
  }
  return tag;
}

void append_tagged_key(std::string& out, std::string_view prefix, std::string_view key) {
  const KeyTag tag = key_tag(key);
  out.append(prefix);
  out.append(tag.data(), tag.size());
  out.append(key);
}

std::string tagged_key(std::string_view prefix, std::string_view key) {
  std::string out;
  out.reserve(prefix.size() + 18 + key.size());
  append_tagged_key(out, prefix, key);
  return out;
}

std::string wake_key(std::string_view record_key, Fence fence) {
  DecimalText digits;
  const std::string_view number = to_chars(digits, static_cast<std::int64_t>(fence));
  std::string out;
  out.reserve(record_key.size() + kWakeSuffix.size() + number.size());
  out.append(record_key).append(kWakeSuffix).append(number);
  return out;
}

namespace {

// `script` (EVAL, KEYS[1] `key`, ARGV[1] `arg`) counts the waiter in, then BLPOP on `wake` for
// the bound, in one write on a connection of the wait pool; a wait that cannot block pauses for
// the rest of the bound.
void count_in_and_block(Client::Impl& client, const Script& script, std::string_view key,
                        std::string_view arg, const std::string& wake,
                        std::chrono::milliseconds bound) {
  if (bound.count() <= 0) return;
  const auto until = std::chrono::steady_clock::now() + bound;
  // BLPOP's timeout in seconds, to the millisecond (Redis 6 and later); 0 would block forever.
  const std::string seconds = fmt::format("{}.{:03}", bound.count() / 1000, bound.count() % 1000);
  const std::array<std::string_view, 5> count_in{"EVAL", script.source, "1", key, arg};
  const std::array<std::string_view, 3> blpop{"BLPOP", wake, seconds};
  Result<Answer> answer = client.block(key, count_in, blpop, bound);
  // Woken (an element), or the bound passed (nil).
  if (answer && answer->reply->type != REDIS_REPLY_ERROR) return;
  std::this_thread::sleep_until(until);
}

}  // namespace

void await_change(Client::Impl& client, std::string_view record_key, Fence fence,
                  std::chrono::milliseconds bound) {
  DecimalText fence_text;
  count_in_and_block(client, script_record_wait, record_key,
                     to_chars(fence_text, static_cast<std::int64_t>(fence)),
                     wake_key(record_key, fence), bound);
}

std::string cache_holder_hex(Fence fence) { return fmt::format("{:016x}", fence); }

std::string cache_waiting_key(std::string_view entry_key, Fence fence) {
  return fmt::format("{}{}{}", entry_key, kWaitingSuffix, cache_holder_hex(fence));
}

std::string cache_wake_key(std::string_view entry_key, Fence fence) {
  return fmt::format("{}{}{}", entry_key, kWakeSuffix, cache_holder_hex(fence));
}

void await_cache_change(Client::Impl& client, std::string_view entry_key, Fence fence,
                        std::string_view holder, std::chrono::milliseconds bound) {
  count_in_and_block(client, script_cache_wait, entry_key, holder, cache_wake_key(entry_key, fence),
                     bound);
}

std::array<char, 16> fingerprint_bytes(const Fingerprint& fp) noexcept {
  std::array<char, 16> out{};
  for (std::size_t i = 0; i < 8; ++i) {
    const std::size_t shift = 56 - 8 * i;  // big-endian: the high byte first
    out[i] = static_cast<char>(fp.high >> shift);
    out[8 + i] = static_cast<char>(fp.low >> shift);
  }
  return out;
}

std::string_view ms_text(DecimalText& buf, std::chrono::milliseconds ms) noexcept {
  return to_chars(buf, std::max<std::int64_t>(ms.count(), 1));
}

Failure unexpected_reply(std::string_view where, std::string_view doing) {
  return make_failure(errc::record_corrupt,
                      fmt::format("redis {}: unexpected reply: {}", where, doing));
}

Result<Claim> decode_claim(const redisReply& reply, std::string_view where, RedisClaimReply& code) {
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements < 1 ||
      reply.element[0]->type != REDIS_REPLY_INTEGER) {
    return unexpected_reply(where, "not {code, ...}");
  }
  const long long raw_code = reply.element[0]->integer;
  const std::optional<RedisClaimReply> named = detail::redis_claim_reply(raw_code);
  if (!named) return unexpected_reply(where, fmt::format("unknown code {}", raw_code));
  code = *named;
  const bool token_code =
      code == RedisClaimReply::token_unknown || code == RedisClaimReply::token_mismatch;
  if (token_code && reply.elements == 1) return Claim{};  // token: no such token
  if (reply.elements < 2 || reply.element[1]->type != REDIS_REPLY_INTEGER ||
      reply.element[1]->integer < 0) {
    return unexpected_reply(where, "no fence");
  }
  Claim claim;
  claim.fence = static_cast<Fence>(reply.element[1]->integer);
  const redisReply* third = reply.elements > 2 ? reply.element[2] : nullptr;
  switch (code) {
    case RedisClaimReply::acquired:
      claim.status = ClaimStatus::acquired;
      claim.took_over =
          third != nullptr && third->type == REDIS_REPLY_INTEGER && third->integer != 0;
      return claim;
    case RedisClaimReply::completed:
    case RedisClaimReply::failed:
      if (third == nullptr || third->type != REDIS_REPLY_STRING)
        return unexpected_reply(where, "no result");
      claim.status =
          code == RedisClaimReply::completed ? ClaimStatus::completed : ClaimStatus::failed;
      claim.result.assign(third->str, third->len);
      // The record's PTTL, so a cache in front keeps the replay no longer than the record lives.
      if (reply.elements > 3 && reply.element[3]->type == REDIS_REPLY_INTEGER &&
          reply.element[3]->integer > 0) {
        claim.expires_in = std::chrono::milliseconds{reply.element[3]->integer};
      }
      return claim;
    case RedisClaimReply::in_progress:
      claim.status = ClaimStatus::in_progress;
      if (third != nullptr && third->type == REDIS_REPLY_INTEGER) {
        claim.lease_remaining = std::chrono::milliseconds{std::max<long long>(third->integer, 0)};
      }
      return claim;
    case RedisClaimReply::mismatch:
    case RedisClaimReply::token_mismatch:
      claim.status = ClaimStatus::mismatch;
      return claim;
    case RedisClaimReply::token_unknown:
      break;  // never with a fence
  }
  return unexpected_reply(where, fmt::format("unknown code {}", raw_code));
}

Result<Claim> record_codes(Result<Claim> claim, RedisClaimReply code) {
  if (claim &&
      (code == RedisClaimReply::token_unknown || code == RedisClaimReply::token_mismatch)) {
    return make_failure(errc::record_corrupt, "record claim script answered a token code");
  }
  return claim;
}

Result<Claim> decode_record_claim(const redisReply& reply, std::string_view where) {
  if (reply.type == REDIS_REPLY_ERROR) return error_reply_failure(reply, "claim", where);
  RedisClaimReply code{};
  Result<Claim> claim = decode_claim(reply, where, code);
  return record_codes(std::move(claim), code);
}

Status decode_fenced(const redisReply& r, std::string_view where, std::string_view doing) {
  if (r.type == REDIS_REPLY_ERROR) return error_reply_failure(r, doing, where);
  if (r.type != REDIS_REPLY_INTEGER)
    return unexpected_reply(where, fmt::format("{}: not 0 or 1", doing));
  if (r.integer == static_cast<long long>(RedisFencedReply::done)) return {};
  if (r.integer != static_cast<long long>(RedisFencedReply::lease_lost)) {
    return unexpected_reply(where, fmt::format("{}: {} is not 0 or 1", doing, r.integer));
  }
  return Status(errc::lease_lost,
                fmt::format("{}: the record is no longer held under this fence", doing));
}

namespace {
// The inverse of fingerprint_bytes(): 16 bytes, high half first.
Fingerprint fingerprint_of(std::string_view bytes) noexcept {
  Fingerprint fp;
  for (std::size_t i = 0; i < 8; ++i) {
    fp.high = (fp.high << 8) | static_cast<unsigned char>(bytes[i]);
    fp.low = (fp.low << 8) | static_cast<unsigned char>(bytes[8 + i]);
  }
  return fp;
}
}  // namespace

Result<Claim> decode_cache_claim(const redisReply& r, Fence fence,
                                 const std::array<char, 16>& fingerprint, std::string_view where) {
  auto corrupt = [&](std::string_view why) {
    return make_failure(errc::record_corrupt,
                        fmt::format("redis {}: request-id entry is not idem's: {}", where, why));
  };
  if (r.type != REDIS_REPLY_ARRAY) return corrupt("unexpected script reply");
  if (r.elements == 0) return Claim{.status = ClaimStatus::acquired, .fence = fence};
  if (r.elements != 2 || r.element[0]->type != REDIS_REPLY_STRING) return corrupt("no entry");
  const std::string_view entry(r.element[0]->str, r.element[0]->len);
  if (entry.size() < kCacheEntryHeader) return corrupt("too short");
  // Entries are held (a marker), completed or failed; never released.
  const std::optional<detail::RecordState> state = detail::from_redis(entry[0]);
  if (!state || *state == detail::RecordState::released) return corrupt("unknown state");
  Fence entry_fence = 0;
  for (std::size_t i = 1; i < 9; ++i) {
    entry_fence = (entry_fence << 8) | static_cast<unsigned char>(entry[i]);
  }
  // The entry's PTTL: a marker's lease (and expiry), a response's time left to be replayed (so
  // a cache in front keeps it no longer). None, or none left: the script found the entry live,
  // so it stands, for a time the server does not say. classify() therefore never answers
  // acquired here: only the script's SET NX acquires.
  const redisReply& pttl = *r.element[1];
  std::optional<std::chrono::milliseconds> left;
  if (pttl.type == REDIS_REPLY_INTEGER && pttl.integer > 0) left.emplace(pttl.integer);
  const detail::RecordView<std::chrono::milliseconds> view{
      .state = *state,
      .fingerprint = fingerprint_of(entry.substr(9, fingerprint.size())),
      .fence = entry_fence,
      .lease_left = left,
      .expires_in = left,
      .result = entry.substr(kCacheEntryHeader)};
  return detail::classify(view, fingerprint_of({fingerprint.data(), fingerprint.size()}));
}

bool claim_acquired(const redisReply& r) {
  return r.type == REDIS_REPLY_ARRAY && r.elements > 0 &&
         r.element[0]->type == REDIS_REPLY_INTEGER &&
         r.element[0]->integer == static_cast<long long>(RedisClaimReply::acquired);
}
bool fenced_ok(const redisReply& r) {
  return r.type == REDIS_REPLY_INTEGER &&
         r.integer == static_cast<long long>(RedisFencedReply::done);
}

bool ReplicaWait::check(int acknowledged, std::string_view operation) const {
  if (acknowledged < 0 || acknowledged >= durability.replicas) return true;
  timeouts.fetch_add(1, std::memory_order_relaxed);
  if (durability.on_timeout) durability.on_timeout(operation, acknowledged, durability.replicas);
  return false;
}

Failure ReplicaWait::unconfirmed(std::string_view where, std::string_view operation,
                                 int acknowledged) const {
  return make_failure(
      errc::outcome_unknown,
      fmt::format("redis {}: {} not confirmed: {} of {} replicas acknowledged it within {} ms; it "
                  "stands on the primary, and a failover before it replicates would lose it",
                  where, operation, std::max(acknowledged, 0), durability.replicas,
                  durability.timeout.count()));
}

Result<Claim> eval_claim(Client::Impl& client, const Script& script, std::string_view key,
                         const ClaimRequest& request, ClaimCodeMap map, ReplicaWait wait) {
  const auto fp = fingerprint_bytes(request.fingerprint);
  DecimalText lease;
  DecimalText retention;
  const std::array<std::string_view, 3> args{std::string_view(fp.data(), fp.size()),
                                             ms_text(lease, request.lease),
                                             ms_text(retention, request.retention)};
  Result<Answer> answer = client.eval(script, key, args, &wait.durability, claim_acquired);
  if (!answer) return std::move(answer).failure();
  RedisClaimReply code{};
  Result<Claim> decoded = decode_claim(*answer->reply, answer->where, code);
  Result<Claim> claim = map(std::move(decoded), code);
  if (claim && claim->status == ClaimStatus::acquired) wait.check(answer->acknowledged, "claim");
  return claim;
}

Status eval_fenced(Client::Impl& client, const Script& script, std::string_view key,
                   std::span<const std::string_view> args, std::string_view doing) {
  Result<Answer> answer = client.eval(script, key, args);
  if (!answer) return std::move(answer).failure();
  return decode_fenced(*answer->reply, answer->where, doing);
}

Status eval_commit(Client::Impl& client, const Script& script,
                   std::span<const std::string_view> keys, std::span<const std::string_view> args,
                   const ReplicaWait* wait) {
  constexpr std::string_view doing = "commit";
  Result<Answer> answer =
      client.eval_keys(script, keys, args, wait != nullptr ? &wait->durability : nullptr, fenced_ok,
                       /*report_in_doubt=*/true);
  if (!answer) return std::move(answer).failure();
  Status status = decode_fenced(*answer->reply, answer->where, doing);
  if (wait != nullptr && status.ok() && !wait->check(answer->acknowledged, doing)) {
    return Status(wait->unconfirmed(answer->where, doing, answer->acknowledged));
  }
  return status;
}

Status eval_record_commit(Client::Impl& client, const Script& script, std::string_view key,
                          Fence fence, const Completion& completion, ReplicaWait wait) {
  DecimalText fence_text;
  DecimalText ttl;
  const std::array<std::string_view, 4> args{
      to_chars(fence_text, static_cast<std::int64_t>(fence)),
      detail::to_redis(detail::finished_state(completion.status)), completion.result,
      ms_text(ttl, completion.ttl)};
  // The record alone: the script names the hold's wake list from it (record_wake_step.lua). A
  // second declared key would make a commit during a slot migration TRYAGAIN where the list
  // does not exist.
  const std::array<std::string_view, 1> keys{key};
  // A retry of a commit that landed (its reply lost, or its WAIT short) succeeds in the script,
  // which writes again so that this call's WAIT covers the landed commit.
  return eval_commit(client, script, keys, args, &wait);
}

Status eval_record_abort(Client::Impl& client, const Script& script, std::string_view key,
                         Fence fence) {
  DecimalText fence_text;
  const std::array<std::string_view, 1> args{
      to_chars(fence_text, static_cast<std::int64_t>(fence))};
  const std::array<std::string_view, 1> keys{key};  // as in eval_record_commit
  Result<Answer> answer = client.eval_keys(script, keys, args);
  if (!answer) return std::move(answer).failure();
  return decode_fenced(*answer->reply, answer->where, "abort");
}

Status eval_record_extend(Client::Impl& client, const Script& script, std::string_view key,
                          Fence fence, std::chrono::milliseconds lease) {
  DecimalText fence_text;
  DecimalText ms;
  const std::array<std::string_view, 2> args{to_chars(fence_text, static_cast<std::int64_t>(fence)),
                                             ms_text(ms, lease)};
  return eval_fenced(client, script, key, args, "extend");
}

}  // namespace idem::redis
