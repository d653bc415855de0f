#pragma once
// RedisTokenStore: the one-time token strategy on Redis (docs/design.md §12), in the compiled
// adapter idem::redis.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "idem/detail/owned_guard.hpp"
#include "idem/detail/token.hpp"
#include "idem/guard.hpp"
#include "idem/options.hpp"
#include "idem/redis/client.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"

namespace idem {

struct RedisTokenStoreOptions {
  /// Prepended to every token's Redis key (default "idem:token:").
  std::string prefix = "idem:token:";
  /// The guard behind execute(): its scope names the token namespace (unset: "token"), and its
  /// lease, ttl (how long a consumed token replays), in-progress policy and observer apply.
  /// Fields left unset keep these defaults (idem::Options).
  Options guard{};
  /// Optional WAIT for replicas after a consuming claim and after a commit (default off).
  redis::Durability durability{};
};

/// One-time tokens in Redis. issue(ttl) draws 128 bits from the OS CSPRNG and stores the token
/// pending with `SET key T NX PX ttl`; execute(token, fn) consumes it: the claim script turns
/// pending into in progress atomically, fn runs once, and a repeat of the same request replays
/// its result. Unknown, expired, malformed or forged tokens, and a token used by a request with
/// another payload, are errc::token_invalid; the same request while the first still runs is
/// errc::in_progress (or waits, under Options::in_progress = Wait{...}). If fn throws, the token
/// returns to pending until its own expiry, so the client may retry with it.
///
/// Keys: `<prefix>{<16 hex digits>}<effective key>`, as RedisStore. Cost: issue is one SET;
/// execute is one claim and one commit script (a replay one claim), like the record store.
/// Also an idem::Store over the guard's effective keys. Thread-safe.
class RedisTokenStore {
 public:
  /// What the guard options' unset fields become (idem::Options).
  static constexpr OptionDefaults kDefaults{.scope = "token"};

  /// Throws std::invalid_argument when the guard options are out of range.
  explicit RedisTokenStore(std::shared_ptr<redis::Client> client,
                           RedisTokenStoreOptions options = {});
  ~RedisTokenStore();
  RedisTokenStore(const RedisTokenStore&) = delete;
  RedisTokenStore& operator=(const RedisTokenStore&) = delete;

  /// A new pending token, valid for `ttl` (at least 1 ms) until consumed. One round trip.
  Result<std::string> issue(std::chrono::milliseconds ttl);

  /// Consumes `token` and runs fn once (see the class comment). Without a payload every repeat
  /// of the token matches.
  template <class Fn>
  [[nodiscard]] Outcome<handler_result_t<Fn>> execute(std::string_view token, Fn&& fn) {
    return execute(token, std::string_view{}, std::forward<Fn>(fn));
  }
  template <class Fn>
  [[nodiscard]] Outcome<handler_result_t<Fn>> execute(std::string_view token,
                                                      std::string_view payload, Fn&& fn) {
    if (!detail::token_shaped(token)) {
      return Outcome<handler_result_t<Fn>>::failed(detail::malformed_token(options(), token));
    }
    return guard_.get().execute(Key{token}, payload, std::forward<Fn>(fn));
  }

  const Options& options() const noexcept { return guard_.get().options(); }
  /// The Redis key of `token`.
  std::string token_key(std::string_view token) const;
  std::uint64_t replication_timeouts() const noexcept {
    return replication_timeouts_.load(std::memory_order_relaxed);
  }

  // --- idem::Store, over the guard's effective keys --------------------------------------------
  Result<Claim> claim(const ClaimRequest& request);
  Status commit(const Ticket& ticket, const Completion& completion);
  Status abort(const Ticket& ticket);
  Status extend(const Ticket& ticket, std::chrono::milliseconds lease);

 private:
  std::shared_ptr<redis::Client> client_;
  std::string prefix_;
  std::string scope_;
  redis::Durability durability_;
  std::atomic<std::uint64_t> replication_timeouts_{0};
  detail::OwnedGuard<RedisTokenStore> guard_;
};

static_assert(Store<RedisTokenStore>);

}  // namespace idem
