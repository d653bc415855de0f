#pragma once
// MemoryTokenStore: the one-time token strategy in process memory: token records
// (detail::MemoryTokenRecords) and the guard that claims through them. Header-only.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "idem/clock.hpp"
#include "idem/engine/effective_key.hpp"
#include "idem/engine/guarded_records.hpp"
#include "idem/engine/token.hpp"
#include "idem/guard.hpp"
#include "idem/memory/detail/token_records.hpp"
#include "idem/options.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"
#include "idem/store_stats.hpp"

namespace idem {

struct MemoryTokenStoreOptions {
  /// The guard behind execute(): its scope names the token namespace (unset: "token"), and its
  /// lease, ttl (how long a consumed token replays), in-progress policy and observer apply.
  /// Fields left unset keep these defaults (idem::Options).
  Options guard{};
  /// Time source for token expiry and leases (default: steady clock).
  std::shared_ptr<Clock> clock = nullptr;
};

/// One-time tokens in process memory, for single-process services and tests; same behaviour as
/// RedisTokenStore. issue() hands out a token; execute(token, fn) consumes it: the first request
/// runs fn, a repeat of that request replays its result, and anything else is refused.
///
/// | the token is...                                  | execute(token, payload, fn)          |
/// |--------------------------------------------------|--------------------------------------|
/// | unknown, expired, or malformed                   | errc::token_invalid                  |
/// | pending                                          | runs fn (the claim consumes it)      |
/// | being consumed, same payload, lease live         | errc::in_progress (or waits)         |
/// | consumed or being consumed with another payload  | errc::token_invalid                  |
/// | consumed with the same payload                   | replays the result                   |
/// | consumed, but fn threw                           | pending again, until its expiry      |
///
/// It is the token records plus an IdempotencyGuard over them; the scope is the guard's alone.
/// Also an idem::Store over the guard's effective keys (it forwards to the records), so it can
/// be a TokenLayer of a LayeredGuard. Thread-safe (one mutex).
class MemoryTokenStore : public detail::TokenFront<detail::MemoryTokenRecords> {
 public:
  /// What the guard options' unset fields become (idem::Options).
  static constexpr OptionDefaults kDefaults{.scope = "token"};

  /// Throws std::invalid_argument when the guard options are out of range.
  explicit MemoryTokenStore(MemoryTokenStoreOptions options = {})
      : TokenFront(with_defaults(std::move(options.guard), kDefaults),
                   options.clock ? std::move(options.clock) : steady_clock()) {}

  /// A new pending token, valid for `ttl` (at least 1 ms) until consumed.
  Result<std::string> issue(std::chrono::milliseconds ttl) {
    Result<std::string> token = detail::random_token();
    if (!token) return token;
    records_.add(detail::EffectiveKey(options().scope, {}, token.value()).view(), ttl);
    return token;
  }

  // execute(token[, payload], fn), begin<T>(token[, payload]), options() and the idem::Store
  // members come from detail::TokenFront.

  /// Removes expired tokens; returns how many went.
  std::size_t purge_expired() { return records_.purge_expired(); }
  /// Tokens held now (pending, in use, consumed; expired ones until purged).
  std::size_t size() const { return records_.size(); }
  /// Its figures: the tokens held (size()).
  StoreStats stats() const { return StoreStats{.store = "memory", .records = size()}; }
};

static_assert(Store<MemoryTokenStore>);

}  // namespace idem
