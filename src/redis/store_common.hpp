#pragma once
// What the Redis stores share: key names, argument encoding and reply decoding.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "client_impl.hpp"
#include "idem/engine/record_model.hpp"
#include "idem/fingerprint.hpp"
#include "idem/store.hpp"

namespace idem::redis {

/// `<prefix>{<16 hex digits of XXH3-64(key)>}<key>`: the tag picks the cluster slot and is
/// brace-free whatever the key holds; the raw bytes after it keep every key distinct.
std::string tagged_key(std::string_view prefix, std::string_view key);
/// The hash tag tagged_key puts between the prefix and the key: "{" 16 hex digits "}".
using KeyTag = std::array<char, 18>;
KeyTag key_tag(std::string_view key) noexcept;
/// tagged_key appended to `out`, for a caller that gathers a command's arguments in one buffer.
void append_tagged_key(std::string& out, std::string_view prefix, std::string_view key);

/// The wake list of the hold of `record_key` under `fence`: `<record key>:wake:<fence>`, in the
/// record's hash slot whatever the prefix holds (its name starts with the record's). The scripts
/// that end a hold push one element per counted waiter on it (record_wake_step.lua's
/// WAKE_SUFFIX), and it expires after kWakeTtl (its WAKE_TTL_MS).
inline constexpr std::string_view kWakeSuffix = ":wake:";
inline constexpr std::chrono::milliseconds kWakeTtl{5000};
std::string wake_key(std::string_view record_key, Fence fence);

/// record_wait.lua's answers: the waiter was counted, or woken at once (the hold is over).
enum class WaitReply : long long { woken = 0, counted = 1 };

/// Waits, at most `bound` (and the blocking slack), for the end of the hold of `record_key`
/// under `fence`: record_wait.lua, then BLPOP on the hold's wake list for the bound, in one write
/// on a connection of the server's wait pool. A wait that cannot block (an error reply, no
/// server, no wait connection) pauses for the rest of the bound instead, so that a caller who
/// claims again after it does not spin. Reports nothing.
void await_change(Client::Impl& client, std::string_view record_key, Fence fence,
                  std::chrono::milliseconds bound);

/// A RequestIdCache entry's waiter count and wake list for the hold by `fence` (the holder id):
/// `<entry>:waiting:<holder>` and `<entry>:wake:<holder>`, <holder> as 16 hex digits, in the
/// entry's hash slot (cache_wake_step.lua's WAITING_SUFFIX, and record_wake_step.lua's suffix).
inline constexpr std::string_view kWaitingSuffix = ":waiting:";
std::string cache_holder_hex(Fence fence);
std::string cache_waiting_key(std::string_view entry_key, Fence fence);
std::string cache_wake_key(std::string_view entry_key, Fence fence);

/// await_change for a RequestIdCache entry: cache_wait.lua (with `holder`, the marker's state
/// and holder id) counts the waiter in, then BLPOP on cache_wake_key; as await_change otherwise.
void await_cache_change(Client::Impl& client, std::string_view entry_key, Fence fence,
                        std::string_view holder, std::chrono::milliseconds bound);

/// The fingerprint as 16 bytes, high half first.
std::array<char, 16> fingerprint_bytes(const Fingerprint& fp) noexcept;

/// Milliseconds as decimal text, at least 1 (Redis refuses PX 0, and PEXPIRE 0 deletes).
std::string_view ms_text(DecimalText& buf, std::chrono::milliseconds ms) noexcept;

using idem::detail::RedisClaimReply;
using idem::detail::RedisFencedReply;
/// record_step_save.lua's third answer besides RedisFencedReply's: the steps before the index
/// are missing.
inline constexpr long long kStepReplyGap = 2;

/// errc::record_corrupt: `where` answered `doing` with a reply no script or command of idem's
/// sends.
Failure unexpected_reply(std::string_view where, std::string_view doing);

/// Decodes a claim script's reply ({code, fence, ...}: detail::RedisClaimReply, the scripts'
/// REPLY_*) into a Claim; `code` tells the caller which one came back (token_unknown and
/// token_mismatch are the token script's own, for the caller to map). A code no script sends is
/// errc::record_corrupt.
Result<Claim> decode_claim(const redisReply& reply, std::string_view where, RedisClaimReply& code);

/// A record claim script's answer: a token code (the token script's own) is
/// errc::record_corrupt. A ClaimCodeMap.
Result<Claim> record_codes(Result<Claim> claim, RedisClaimReply code);

/// Decodes a record claim script's reply (decode_claim, record_codes; an error reply is
/// error_reply_failure's).
Result<Claim> decode_record_claim(const redisReply& reply, std::string_view where);

/// Decodes a fenced script's reply (RedisFencedReply): done is success, lease_lost is
/// errc::lease_lost, an error reply is error_reply_failure's, anything else is
/// errc::record_corrupt.
Status decode_fenced(const redisReply& reply, std::string_view where, std::string_view doing);

/// Which replies wrote something worth a WAIT: an acquired claim, a fenced success.
bool claim_acquired(const redisReply& reply);
bool fenced_ok(const redisReply& reply);

/// A request-id cache entry: state (detail::redis_state: held, completed or failed), holder id
/// (8 bytes, big-endian), fingerprint (16 bytes), then the result.
inline constexpr std::size_t kCacheEntryHeader = 1 + 8 + 16;

/// Decodes cache_claim.lua's reply: {} is acquired under `fence`; {entry, pttl} is the entry in
/// the way, which the record model classifies (detail::classify). Bytes that are not an entry are
/// errc::record_corrupt, never a result.
Result<Claim> decode_cache_claim(const redisReply& reply, Fence fence,
                                 const std::array<char, 16>& fingerprint, std::string_view where);

/// A store's durability and the counter of the replica waits that fell short.
struct ReplicaWait {
  const Durability& durability;
  std::atomic<std::uint64_t>& timeouts;

  /// Counts and reports (Durability::on_timeout) a WAIT that fewer replicas acknowledged;
  /// false then. True when enough acknowledged or no WAIT ran (`acknowledged` < 0).
  bool check(int acknowledged, std::string_view operation) const;
  /// errc::outcome_unknown: the write stands on `where` but replicas did not confirm it, so a
  /// failover could still lose it.
  Failure unconfirmed(std::string_view where, std::string_view operation, int acknowledged) const;
};

/// Maps a decoded claim and its script code to what the store answers (store-specific codes).
using ClaimCodeMap = Result<Claim> (*)(Result<Claim> claim, RedisClaimReply code);

/// Runs a record-shaped claim script (KEYS: key; ARGV: fingerprint, lease, retention), decodes
/// it, applies `map`, then waits for replicas when the answer is an acquired claim.
Result<Claim> eval_claim(Client::Impl& client, const Script& script, std::string_view key,
                         const ClaimRequest& request, ClaimCodeMap map, ReplicaWait wait);

/// Runs a fenced script on `key` and decodes its answer (see decode_fenced). A call whose reply
/// was lost is errc::store_unavailable: an abort or extend in doubt at worst leaves the key held
/// until its lease passes.
Status eval_fenced(Client::Impl& client, const Script& script, std::string_view key,
                   std::span<const std::string_view> args, std::string_view doing);

/// A commit script, as eval_fenced, except that a script that went out and got no reply is
/// errc::outcome_unknown (it may have landed; a retry under the same fence finds it); with
/// `wait`, a success then waits for replicas, and a shortfall is outcome_unknown too.
Status eval_commit(Client::Impl& client, const Script& script,
                   std::span<const std::string_view> keys, std::span<const std::string_view> args,
                   const ReplicaWait* wait = nullptr);
inline Status eval_commit(Client::Impl& client, const Script& script, std::string_view key,
                          std::span<const std::string_view> args,
                          const ReplicaWait* wait = nullptr) {
  return eval_commit(client, script, std::span(&key, 1), args, wait);
}

/// The record scripts' fenced calls (ARGV: fence, then commit: state, result, ttl; extend: lease).
/// Commit and abort end the hold: their scripts wake its waiters (record_wake_step.lua).
Status eval_record_commit(Client::Impl& client, const Script& script, std::string_view key,
                          Fence fence, const Completion& completion, ReplicaWait wait);
Status eval_record_abort(Client::Impl& client, const Script& script, std::string_view key,
                         Fence fence);
Status eval_record_extend(Client::Impl& client, const Script& script, std::string_view key,
                          Fence fence, std::chrono::milliseconds lease);

}  // namespace idem::redis
