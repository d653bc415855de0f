#pragma once
// The record every store keeps, written once: its states, the rules a claim and a repeated commit
// follow (classify(), check_fence(): stores deciding in C++ call them; the SQL upsert and the Lua
// scripts follow them on the server), and the encodings of states and script replies, whose
// names the Lua scripts declare too (tests/redis/reply_decode_test.cpp checks that they agree).

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "idem/clock.hpp"
#include "idem/detail/enum_names.hpp"
#include "idem/engine/sim_hooks.hpp"
#include "idem/fingerprint.hpp"
#include "idem/store.hpp"

namespace idem::detail {

/// The state of the record under one effective key.
enum class RecordState : std::uint8_t {
  absent,     // no record: a claim takes the key
  released,   // no holder and no end (aborted; a token issued and not used yet): a claim takes
              // it, and its fence carries on
  held,       // a holder runs (in progress), under a lease or an open transaction
  completed,  // a result is stored: repeats replay it
  failed,     // a remembered failure is stored: repeats replay it
};

inline constexpr std::array<std::string_view, 5> kRecordStateNames = {"absent", "released", "held",
                                                                      "completed", "failed"};
static_assert(kRecordStateNames.size() == static_cast<std::size_t>(RecordState::failed) + 1);

constexpr std::string_view to_string(RecordState state) noexcept {
  return name_in(kRecordStateNames, state);
}

/// The state a commit of `status` (completed or failed) stores.
constexpr RecordState finished_state(ClaimStatus status) noexcept {
  return status == ClaimStatus::failed ? RecordState::failed : RecordState::completed;
}

/// A record as a claim or a fenced call finds it. Times are what is left from the reader's now,
/// in the reader's unit, so that no unit conversion can round a live lease into a passed one.
template <class Duration = Clock::duration>
struct RecordView {
  RecordState state = RecordState::absent;
  Fingerprint fingerprint{};
  Fence fence = 0;
  /// held: the time left on the holder's lease; zero or less, it ran out. nullopt: the holder
  /// keeps the record until it ends (an open transaction), whatever the time.
  std::optional<Duration> lease_left{};
  /// The time left before the record expires; zero or less, it is as good as absent. nullopt:
  /// it does not expire, or the store does not say when.
  std::optional<Duration> expires_in{};
  std::string_view result{};  // completed / failed: the stored bytes
};

/// What a claim of a request with `fingerprint` must do about `record`, in this order: absent,
/// released or expired: acquired; another fingerprint: mismatch; completed / failed: replay
/// `result`; held with a live lease (or by a transaction): in_progress; held past its lease:
/// acquired, took_over. The fence of every answer is the record's; on `acquired` the caller takes
/// the record under a larger fence (or asks again). expires_in is rounded down and
/// lease_remaining up to milliseconds; zero when not known.
template <class Duration>
Claim classify(const RecordView<Duration>& record, const Fingerprint& fingerprint) {
  using std::chrono::milliseconds;
  const bool expired = record.expires_in && *record.expires_in <= Duration::zero() &&
                       !(IDEM_SIM_MUTATE(4) && record.state != RecordState::held);
  if (record.state == RecordState::absent || record.state == RecordState::released || expired) {
    return Claim{.status = ClaimStatus::acquired, .fence = record.fence};
  }
  const bool lapsed = record.state == RecordState::held && record.lease_left &&
                      *record.lease_left <= Duration::zero();
  if (record.fingerprint != fingerprint && !(IDEM_SIM_MUTATE(2) && lapsed)) {
    return Claim{.status = ClaimStatus::mismatch, .fence = record.fence};
  }
  if (record.state == RecordState::held) {
    if (record.lease_left && (*record.lease_left <= Duration::zero() || IDEM_SIM_MUTATE(3))) {
      return Claim{.status = ClaimStatus::acquired, .fence = record.fence, .took_over = true};
    }
    return Claim{.status = ClaimStatus::in_progress,
                 .fence = record.fence,
                 .lease_remaining = record.lease_left
                                        ? std::chrono::ceil<milliseconds>(*record.lease_left)
                                        : milliseconds{0}};
  }
  return Claim{
      .status = record.state == RecordState::failed ? ClaimStatus::failed : ClaimStatus::completed,
      .fence = record.fence,
      .result = std::string(record.result),
      .expires_in = record.expires_in ? std::chrono::floor<milliseconds>(*record.expires_in)
                                      : milliseconds{0}};
}

/// What commit, abort or extend under a ticket's fence finds.
enum class FenceCheck : std::uint8_t {
  held,    // the record is held under the fence: make the change
  landed,  // commit only: the record already holds this very completion under the fence (the
           // commit landed and its answer was lost): succeed and change nothing
  lost,    // anything else: errc::lease_lost
};

/// The fenced calls' rule. `repeat`: the commit's completion, or null for abort and extend.
template <class Duration>
FenceCheck check_fence(const RecordView<Duration>& record, Fence fence,
                       const Completion* repeat) noexcept {
  if (record.state == RecordState::absent || record.fence != fence) return FenceCheck::lost;
  if (record.state == RecordState::held) return FenceCheck::held;
  if (repeat != nullptr && !IDEM_SIM_MUTATE(1) && record.state == finished_state(repeat->status) &&
      record.result == repeat->result) {
    return FenceCheck::landed;
  }
  return FenceCheck::lost;
}

// --- How the backends store states and answer ---------------------------------------------------

/// The `state` column of the SQL record table and of the entity op log (which has no released
/// rows). A row stands for every state but absent.
enum class SqlState : std::int16_t { held = 0, completed = 1, failed = 2, released = 3 };

/// The state field `s` of a Redis record or token hash, the first byte of a request-id cache
/// entry, and the value of a freshly issued token (Lua: STATE_*).
namespace redis_state {
inline constexpr char held = 'P';
inline constexpr char completed = 'C';
inline constexpr char failed = 'F';
inline constexpr char released = 'R';
inline constexpr char issued = 'T';  // a token not used yet: claimed like a released record
}  // namespace redis_state

/// How each stored state is written: its SQL `state` value and its Redis letter. Absent has no
/// row and no letter.
struct StoredState {
  RecordState state;
  SqlState sql;
  char redis;
};
inline constexpr std::array<StoredState, 4> kStoredStates = {{
    {RecordState::released, SqlState::released, redis_state::released},
    {RecordState::held, SqlState::held, redis_state::held},
    {RecordState::completed, SqlState::completed, redis_state::completed},
    {RecordState::failed, SqlState::failed, redis_state::failed},
}};

constexpr const StoredState* stored_state(RecordState state) noexcept {
  for (const StoredState& s : kStoredStates) {
    if (s.state == state) return &s;
  }
  return nullptr;
}

/// The `state` value of `state`; absent is released (no row, and a released one is claimed alike).
constexpr SqlState to_sql(RecordState state) noexcept {
  const StoredState* s = stored_state(state);
  return s != nullptr ? s->sql : SqlState::released;
}

/// The state a `state` column holds; nullopt for a value idem never writes.
constexpr std::optional<RecordState> from_sql(std::int64_t column) noexcept {
  for (const StoredState& s : kStoredStates) {
    if (static_cast<std::int64_t>(s.sql) == column) return s.state;
  }
  return std::nullopt;
}

/// The one-letter text of `state` as Redis stores it (absent: none, empty).
constexpr std::string_view to_redis(RecordState state) noexcept {
  const StoredState* s = stored_state(state);
  return s != nullptr ? std::string_view(&s->redis, 1) : std::string_view{};
}

/// The state a Redis state letter stands for; nullopt for a letter idem never writes.
constexpr std::optional<RecordState> from_redis(char letter) noexcept {
  if (letter == redis_state::issued) return RecordState::released;
  for (const StoredState& s : kStoredStates) {
    if (s.redis == letter) return s.state;
  }
  return std::nullopt;
}

/// The first element of a claim script's reply (record_claim.lua, token_claim.lua; Lua:
/// REPLY_*): the script applied classify()'s rules on the server and says which answer it gave.
enum class RedisClaimReply : long long {
  acquired = 0,        // {code, fence, took_over}
  completed = 1,       // {code, fence, result, pttl}
  failed = 2,          // {code, fence, result, pttl}
  in_progress = 3,     // {code, fence, lease_left_ms}
  mismatch = 4,        // {code, fence}
  token_unknown = 5,   // {code}: no such token (never issued, expired, forged)
  token_mismatch = 6,  // {code, fence}: a token used by a request with another payload
};

/// The reply code `value` names; nullopt for one no script sends.
constexpr std::optional<RedisClaimReply> redis_claim_reply(long long value) noexcept {
  if (value < static_cast<long long>(RedisClaimReply::acquired) ||
      value > static_cast<long long>(RedisClaimReply::token_mismatch)) {
    return std::nullopt;
  }
  return static_cast<RedisClaimReply>(value);
}

/// The reply of a fenced script (commit, abort, extend; Lua: REPLY_DONE, REPLY_LEASE_LOST):
/// check_fence()'s answer on the server, held and landed both being done.
enum class RedisFencedReply : long long { lease_lost = 0, done = 1 };

}  // namespace idem::detail
