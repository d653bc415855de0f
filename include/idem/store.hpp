#pragma once
// The Store concept: what IdempotencyGuard needs from a strategy on a backend (docs/design.md §2,
// §3). Each of claim, commit, abort and extend is one atomic step in the backend.

#include <chrono>
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "idem/detail/min_max.hpp"
#include "idem/engine/sim_hooks.hpp"
#include "idem/fingerprint.hpp"
#include "idem/result.hpp"
#include "idem/transaction.hpp"

namespace idem {

/// Each claim that acquires a key gets a fence larger than every earlier holder's of that key,
/// takeovers included (by one per claim in lease mode; from a counter no rollback undoes in SQL
/// transactional mode, docs/design.md §4). A holder presents its fence at commit, abort and
/// extend; a stale fence changes nothing (errc::lease_lost).
using Fence = std::uint64_t;

/// What claim() asks for.
struct ClaimRequest {
  std::string_view key{};                 // effective key: opaque bytes, never empty
  Fingerprint fingerprint{};              // of the request payload
  std::chrono::milliseconds lease{};      // how long the new holder may run before takeover
  std::chrono::milliseconds retention{};  ///< kept unfinished at least held_retention(this, lease)
  /// How long a store that blocks on the holder (a row lock in transactional mode) may wait for
  /// it before answering in_progress; zero: never block. Stores without blocking ignore it.
  std::chrono::milliseconds block_for{};
  /// The guard will rewind() before recording a handler's failure (remember_failures): a store
  /// running the handler in its own transaction marks the point rewind() goes back to.
  bool rewindable = false;
  /// The caller saw the key held and waited for the holder before this claim (a duplicate under
  /// the Wait policy): the record has likely settled. A store may read the record before it
  /// claims, so that a replay or a refusal, which changes nothing, takes no write lock (the SQL
  /// stores do); the answer is the claim's either way.
  bool after_wait = false;
};

/// What the caller of claim() must do next.
enum class ClaimStatus : std::uint8_t {
  acquired,     // the caller holds the key under Claim::fence: run the handler
  completed,    // a result is stored: replay Claim::result
  failed,       // a remembered failure is stored: replay it (Claim::result holds it)
  in_progress,  // another holder's lease is live: refuse or wait
  mismatch,     // the key is held or stored with another fingerprint
};

/// The record the caller must act on, returned by the claim itself (no second read).
struct Claim {
  ClaimStatus status = ClaimStatus::in_progress;
  Fence fence = 0;         // acquired: the caller's fence; otherwise the record's
  bool took_over = false;  // acquired by taking over an expired lease
  std::string result{};    // completed / failed: the stored bytes
  std::chrono::milliseconds lease_remaining{0};  // in_progress: time left on the holder's lease
  /// acquired in transactional mode: the backend's open transaction, which commit or abort ends
  /// (handlers reach it through sqlite_transaction(ctx), pg_transaction(ctx)); none otherwise.
  NativeTransaction transaction{};
  /// completed / failed: time left before expiry, rounded down; zero when the store does not say
  /// (CachedStore then does not cache the replay).
  std::chrono::milliseconds expires_in{0};
};

/// How long a store keeps a record in progress at least, from its claim or last extend: the
/// request's retention, and never less than twice the lease, so a claim after the lease ran out
/// always finds the record (a takeover), never a key as good as new (docs/design.md §2).
constexpr std::chrono::milliseconds held_retention(std::chrono::milliseconds retention,
                                                   std::chrono::milliseconds lease) noexcept {
  if (!std::is_constant_evaluated() && IDEM_SIM_MUTATE(19)) return detail::max_of(retention, lease);
  return detail::max_of(retention, 2 * lease);
}

/// Identifies a holder: the key and the fence its claim returned.
struct Ticket {
  std::string_view key{};
  Fence fence = 0;
};

/// The end of a held record: completed with a result, or failed with a remembered failure.
struct Completion {
  ClaimStatus status = ClaimStatus::completed;  // completed or failed
  std::string_view result{};                    // the bytes to replay
  std::chrono::milliseconds ttl{};              // how long repeats replay them
};

/// A record store. claim() takes the key or says what holds it; commit() stores the end of a held
/// record; abort() releases it; extend() renews the holder's lease and keeps the record at least
/// held_retention(0, lease) from now. commit, abort and extend return errc::lease_lost for a stale
/// fence. A commit repeated after it landed succeeds when the record holds that very completion.
/// A store whose handler runs inside its own transaction also has `Status rewind(const Ticket&)`:
/// it undoes the handler's writes and the claim's changes beyond the record, keeping the key held,
/// so that a failure commits without them (a claim made with ClaimRequest::rewindable).
template <class S>
concept Store = requires(S& store, const ClaimRequest& request, const Ticket& ticket,
                         const Completion& completion, std::chrono::milliseconds lease) {
  { store.claim(request) } -> std::same_as<Result<Claim>>;
  { store.commit(ticket, completion) } -> std::same_as<Status>;
  { store.abort(ticket) } -> std::same_as<Status>;
  { store.extend(ticket, lease) } -> std::same_as<Status>;
};

/// A Store that can undo a held claim's side effects before a failure is committed (above).
template <class S>
concept RewindableStore = Store<S> && requires(S& store, const Ticket& ticket) {
  { store.rewind(ticket) } -> std::same_as<Status>;
};

/// A Store that can wake a caller waiting for another holder (the Wait policy) instead of
/// letting it poll. await_change(held, bound) returns once the record held.key that was held
/// under held.fence has ended (committed, aborted, released) or been taken over, or once `bound`
/// has passed, whichever is first. It may return early (spuriously); the caller then claims
/// again either way, so a lost wake costs at most `bound`. It never blocks longer than `bound`
/// (plus the backend's own call deadline) and reports nothing: a failure to wait is a return.
/// A store that can wait only in some configurations also has `bool wakes() const`: when it says
/// false, callers poll instead.
template <class S>
concept WakingStore = Store<S> &&
    requires(S& store, const Ticket& held, std::chrono::milliseconds bound) {
  { store.await_change(held, bound) } -> std::same_as<void>;
};

}  // namespace idem
