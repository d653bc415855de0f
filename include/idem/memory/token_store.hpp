#pragma once
// MemoryTokenStore: the one-time token strategy in process memory. Header-only.

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
  /// The guard behind execute(): scope (the token namespace; unset: "token"), lease, ttl (how
  /// long a consumed token replays), in-progress policy, observer; unset fields keep these.
  Options guard{};
  std::shared_ptr<Clock> clock = nullptr;  ///< for expiry and leases (default: steady clock)
};

/// One-time tokens in process memory; same behaviour as RedisTokenStore (the table of answers:
/// docs/redis.md). issue() hands out a token; execute(token, fn) consumes it: the first request
/// runs fn, a repeat replays its result, anything else is token_invalid; a throwing fn returns the
/// token to pending. The token records plus an IdempotencyGuard over them, and an idem::Store over
/// its effective keys (a TokenLayer of a LayeredGuard). Thread-safe (one mutex).
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

  // execute(), begin<T>(), options() and the idem::Store members come from TokenFront.

  /// Removes expired tokens; returns how many went.
  std::size_t purge_expired() { return records_.purge_expired(); }
  /// Tokens held now (pending, in use, consumed; expired ones until purged).
  std::size_t size() const { return records_.size(); }
  /// Its figures: the tokens held (size()).
  StoreStats stats() const { return StoreStats{.store = "memory", .records = size()}; }
};

static_assert(Store<MemoryTokenStore>);

}  // namespace idem
